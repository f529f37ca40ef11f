//! All-to-all of rows with per-member counts ([`Team::alltoallv`] and its stream form
//! [`Team::alltoallv_on_stream`]; torch's `all_to_all_vdev`, whose split sizes stay on the
//! device).
//!
//! Team PE `i` sends `in_splits[j]` rows of its `input` to team PE `j`, its rows for
//! each member in team order from row 0; each PE receives its members' rows packed from
//! row 0 of `out`, in team order, and `out_splits_offsets` (`2 * n` words) says how many
//! rows came from team PE `i` (word `i`) and at which row of `out` they start (word
//! `n + i`). Rows are `row` elements wide. All four buffers are symmetric.
//!
//! # Algorithm (both forms)
//! 1. The entry barrier: every member has entered, so none still reads its
//!    `out_splits_offsets` of an earlier call.
//! 2. Each PE writes, into word `me` and `n + me` of every member `j`'s
//!    `out_splits_offsets`, its split for `j` and the row of its `input` where those rows
//!    start; a barrier (after `quiet`).
//! 3. Each PE computes its offsets (the exclusive prefix sum of what it receives) and
//!    pulls each member's rows once: a copy from a member mapped here, a get through the
//!    remote transport (the proxy, in a kernel) otherwise; then it replaces word `n + i`
//!    with the offset.
//! 4. The exit barrier: no member changes its `input` before every member has read it.
//!
//! # Counts that do not fit
//! The host form ([`Team::alltoallv`], and the stream form on a CPU PE) reads the splits
//! on the host: after step 2 every member sends every member what it needs, what its
//! `out` holds and whether its own splits are valid (not negative, within its `input`),
//! one more barrier, and when any is wrong every member returns the same
//! [`Error::InvalidArgument`] naming each such member, before any row moves. The stream
//! form on a GPU PE never reads the splits on the host (that is its point): its kernel
//! (`stream_team_alltoallv` of `symmem-runtime-kernels`) moves only the rows inside the
//! sender's `input` and the receiver's `out`, treats a negative split as 0, and still
//! writes the counts as sent, so a caller sees `out_splits_offsets[n + i] +
//! out_splits_offsets[i]` pass `out`'s rows where rows were dropped.
//!
//! Argument errors a PE can see alone (a row of 0 elements, buffers too small for the
//! team, overlapping, or of another runtime) are returned before the entry barrier, on
//! that PE: with the same symmetric buffers on every member, every member returns it.

use bytemuck::Pod;

use super::Team;
use crate::error::{Error, Result};
use crate::ops::stream::Stream;
use crate::route::Located;
use crate::sym::SymBuf;

/// Words each member's verdict takes in the scratch: the rows it receives, the rows its
/// `out` holds, whether its own splits are bad, their sum.
const VERDICT_WORDS: usize = 4;

/// The checked shape of one call: rows of `input` and `out`, elements of a row.
#[derive(Debug, Clone, Copy)]
struct Rows {
    /// Whole rows `input` holds.
    input: usize,
    /// Whole rows `out` holds.
    out: usize,
    /// Elements of one row (whose bytes fit a `usize`: checked).
    elems: usize,
}

impl Team<'_> {
    /// An all-to-all of rows with per-member counts (torch's `all_to_all_vdev`; the book's
    /// Collectives chapter has the algorithm): `in_splits[j]` rows of `row` elements of this PE's `input`
    /// go to team PE `j`, and the rows each member sends here land in `out` in team
    /// order, packed from row 0; `out_splits_offsets[i]` gets the rows from team PE `i`,
    /// `out_splits_offsets[n + i]` the row of `out` where they start. Collective over the
    /// team, blocking. `in_splits` holds `n_pes()` words, `out_splits_offsets` `2 *
    /// n_pes()`.
    ///
    /// Errors: the same on every member when a member's splits are negative or sum past
    /// its `input`, or a member's `out` is too small for what it receives (no row moves);
    /// a `row` of 0, buffers too small for the team, `out` or `out_splits_offsets`
    /// overlapping another buffer, an allocation of another runtime.
    pub fn alltoallv<T: Pod>(
        &self,
        out: &SymBuf<T>,
        input: &SymBuf<T>,
        in_splits: &SymBuf<i64>,
        out_splits_offsets: &SymBuf<i64>,
        row: usize,
    ) -> Result<()> {
        const OP: &str = "team_alltoallv";
        let rows = self.alltoallv_rows(OP, out, input, in_splits, out_splits_offsets, row)?;
        self.alltoallv_host(OP, out, input, in_splits, out_splits_offsets, rows)
    }

    /// [`Self::alltoallv`] in stream order: after the work already on `stream`, before the
    /// work queued after it, without blocking the host. GPU PE: one block of the helper
    /// kernel `stream_team_alltoallv`, which reads the splits on the device (rows that do
    /// not fit are dropped, not an error; a negative split moves nothing; the counts are
    /// reported as sent, so `out_splits_offsets[n + i] + out_splits_offsets[i]` past
    /// `out`'s rows shows a drop); the team's PEs must be evenly spaced. CPU PE:
    /// [`Self::alltoallv`].
    pub fn alltoallv_on_stream<T: Pod>(
        &self,
        out: &SymBuf<T>,
        input: &SymBuf<T>,
        in_splits: &SymBuf<i64>,
        out_splits_offsets: &SymBuf<i64>,
        row: usize,
        stream: &Stream,
    ) -> Result<()> {
        const OP: &str = "team_alltoallv_on_stream";
        let _team = self.prepare(OP, stream)?;
        let rows = self.alltoallv_rows(OP, out, input, in_splits, out_splits_offsets, row)?;
        #[cfg(feature = "cuda")]
        if self.rt.is_gpu() {
            return self.queue(
                OP,
                stream,
                symmem_runtime_kernels::stream_team_alltoallv::KERNEL,
                (
                    _team,
                    self.rt.path.sym_addr(out.at(0)) as *mut u8,
                    rows.out,
                    self.rt.path.sym_addr(input.at(0)) as *const u8,
                    rows.input,
                    rows.elems * std::mem::size_of::<T>(),
                    self.rt.path.sym_addr(in_splits.at(0)) as *const i64,
                    self.rt.path.sym_addr(out_splits_offsets.at(0)) as *mut i64,
                ),
            );
        }
        self.alltoallv_host(OP, out, input, in_splits, out_splits_offsets, rows)
    }

    /// The checks either form makes before anything moves (see the module docs), and
    /// the rows of `input` and `out`.
    fn alltoallv_rows<T>(
        &self,
        op: &'static str,
        out: &SymBuf<T>,
        input: &SymBuf<T>,
        in_splits: &SymBuf<i64>,
        out_so: &SymBuf<i64>,
        row: usize,
    ) -> Result<Rows> {
        let rt = self.rt;
        let n = self.n_pes();
        let bad = |reason: String| Error::InvalidArgument { op, reason };
        rt.path.check_buf(op, out)?;
        rt.path.check_buf(op, input)?;
        rt.path.check_buf(op, in_splits)?;
        rt.path.check_buf(op, out_so)?;
        row
            .checked_mul(std::mem::size_of::<T>())
            .filter(|&b| b > 0)
            .ok_or_else(|| {
                bad(format!(
                    "row must be at least one element of {} bytes and fit the address space, got {row}",
                    std::mem::size_of::<T>()
                ))
            })?;
        if in_splits.len() < n {
            return Err(bad(format!(
                "in_splits holds {} words; the team's {n} PEs need {n}",
                in_splits.len()
            )));
        }
        if out_so.len() < 2 * n {
            return Err(bad(format!(
                "out_splits_offsets holds {} words; the team's {n} PEs need {} (splits, then offsets)",
                out_so.len(),
                2 * n
            )));
        }
        for (name, other) in [
            ("input", span(input)),
            ("in_splits", span(in_splits)),
            ("out_splits_offsets", span(out_so)),
        ] {
            if overlap(span(out), other) {
                return Err(bad(format!("out overlaps {name}")));
            }
        }
        for (name, other) in [("input", span(input)), ("in_splits", span(in_splits))] {
            if overlap(span(out_so), other) {
                return Err(bad(format!("out_splits_offsets overlaps {name}")));
            }
        }
        Ok(Rows {
            input: input.len() / row,
            out: out.len() / row,
            elems: row,
        })
    }

    /// The host form (see the module docs), once the arguments are checked.
    fn alltoallv_host<T: Pod>(
        &self,
        op: &'static str,
        out: &SymBuf<T>,
        input: &SymBuf<T>,
        in_splits: &SymBuf<i64>,
        out_so: &SymBuf<i64>,
        rows: Rows,
    ) -> Result<()> {
        let rt = self.rt;
        let (n, me) = (self.n_pes(), self.my_index);
        let as_rows = |v: i64| v.max(0) as usize;
        let mut splits = vec![0i64; n];
        rt.path.read(op, in_splits.at(0), &mut splits, rt.my_pe())?;
        rt.team_sync(op, self)?;
        // (2) This PE's split for each member and where those rows start in `input`.
        let mut start = 0usize;
        for (j, &split) in splits.iter().enumerate() {
            let pe = self.members.world(j);
            rt.path.write(op, out_so.at(me), &[split], pe)?;
            rt.path.write(op, out_so.at(n + me), &[start as i64], pe)?;
            start = start.saturating_add(as_rows(split));
        }
        rt.quiet()?;
        rt.team_sync(op, self)?;
        let mut words = vec![0i64; 2 * n];
        rt.path.read(op, out_so.at(0), &mut words, rt.my_pe())?;
        let (counts, starts) = words.split_at(n);
        // Every member's verdict to every member's scratch, then one barrier.
        let need = counts
            .iter()
            .fold(0usize, |t, &c| t.saturating_add(as_rows(c)));
        let bad_splits = splits.iter().any(|&s| s < 0) || start > rows.input;
        let mine = [
            need as u64,
            rows.out as u64,
            u64::from(bad_splits),
            start as u64,
        ];
        let area = rt.team_area();
        let ts = &rt.teams;
        let part = |i: usize| ts.scratch(self.slot, 0, i) * 8;
        for k in 1..=n {
            let j = (me + k) % n;
            rt.putmem(
                &area,
                part(me),
                bytemuck::cast_slice(&mine),
                self.members.world(j),
            )?;
        }
        rt.quiet()?;
        rt.team_sync(op, self)?;
        self.judge_alltoallv(op, rows)?;
        // (3) Each member's rows, its right neighbour first; offsets in team order.
        let offsets: Vec<usize> = counts
            .iter()
            .scan(0usize, |at, &c| {
                let here = *at;
                *at += as_rows(c);
                Some(here)
            })
            .collect();
        let mut staged = Vec::new();
        for k in 1..=n {
            let i = (me + k) % n;
            let count = as_rows(counts[i]) * rows.elems;
            if count == 0 {
                continue;
            }
            let (pe, from) = (self.members.world(i), as_rows(starts[i]) * rows.elems);
            let to = out.at(offsets[i] * rows.elems);
            match rt.path.locate(op, input.at(from), count, pe)? {
                // A member mapped here: one copy straight from its input.
                Located::Host(p) => {
                    // SAFETY: `locate` checked that `count` elements of the member's
                    // input lie at `p`, mapped while the runtime lives; no member writes
                    // its input during the call (the exit barrier), and `T: Pod`.
                    let theirs = unsafe { std::slice::from_raw_parts(p.cast_const(), count) };
                    rt.path.write(op, to, theirs, rt.my_pe())?;
                }
                _ => {
                    staged.resize(count, T::zeroed());
                    rt.path.read(op, input.at(from), &mut staged, pe)?;
                    rt.path.write(op, to, &staged, rt.my_pe())?;
                }
            }
        }
        let offsets: Vec<i64> = offsets.iter().map(|&o| o as i64).collect();
        rt.path.write(op, out_so.at(n), &offsets, rt.my_pe())?;
        // (4) No member changes its input before every member has read its rows.
        rt.team_sync(op, self)
    }

    /// After the verdicts' barrier: the same error on every member when any member's
    /// splits are bad or its `out` too small (see the module docs).
    fn judge_alltoallv(&self, op: &'static str, rows: Rows) -> Result<()> {
        let rt = self.rt;
        let n = self.n_pes();
        let area = rt.team_area();
        let mut faults = Vec::new();
        for i in 0..n {
            let mut w = [0u64; VERDICT_WORDS];
            rt.getmem(
                &area,
                rt.teams.scratch(self.slot, 0, i) * 8,
                bytemuck::cast_slice_mut(&mut w),
                rt.my_pe(),
            )?;
            let [need, room, bad_splits, sent] = w;
            let who = format!("team PE {i} (world PE {})", self.members.world(i));
            if bad_splits != 0 {
                faults.push(format!(
                    "{who}'s in_splits are negative or sum to {sent} rows, past its input's {} rows",
                    rows.input
                ));
            }
            if need > room {
                faults.push(format!(
                    "{who} receives {need} rows but its out holds {room}"
                ));
            }
        }
        if faults.is_empty() {
            return Ok(());
        }
        Err(Error::InvalidArgument {
            op,
            reason: format!(
                "{}; every member of the team returns this error, and no rows moved",
                faults.join("; ")
            ),
        })
    }
}

/// The heap byte range `(start, end)` of `buf` on every PE.
fn span<T>(buf: &SymBuf<T>) -> (usize, usize) {
    (buf.offset, buf.offset + buf.len * std::mem::size_of::<T>())
}

/// Whether two non-empty byte ranges share a byte.
fn overlap(a: (usize, usize), b: (usize, usize)) -> bool {
    a.0 < a.1 && b.0 < b.1 && a.0 < b.1 && b.0 < a.1
}
