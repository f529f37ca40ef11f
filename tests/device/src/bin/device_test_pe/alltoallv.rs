//! The runtime's `stream_team_alltoallv` helper kernel (`symmem-runtime-kernels`, what
//! `Team::alltoallv_on_stream` queues on GPU PEs), launched directly with
//! `Runtime::launch` as one block of `TEAM_THREADS`: uneven splits with zeros, every
//! split zero, an `out` too small (the rows that fit move, the counts are the splits as
//! sent) and a negative split (moves nothing), on TEAM_WORLD and the columns of a 2-D
//! split, checked exactly. Rows of 5 bytes, so the copies are not word-aligned.

use symmem::device::DeviceTeam;
use symmem::{Module, Runtime, SymBuf, Team};
use symmem_runtime_kernels::{stream_team_alltoallv, PTX, TEAM_THREADS};

use super::{e2s, read_all, sym, Outcome};

/// Returns `Err` naming what differs unless `$got == $want`.
macro_rules! same {
    ($got:expr, $want:expr, $($fmt:tt)+) => {{
        let (got, want) = ($got, $want);
        if got != want {
            return Err(format!("{}: got {got:?}, expected {want:?}", format!($($fmt)+)));
        }
    }};
}

/// Bytes of a row.
const ROW: usize = 5;
/// A byte `out` holds before each launch, to show rows written past what arrived.
const DEAD: u8 = 0xEE;

/// The buffers, sized for TEAM_WORLD: `input` of `4 n` rows, `out` of `4 n`.
struct Bufs {
    input: SymBuf<u8>,
    out: SymBuf<u8>,
    splits: SymBuf<i64>,
    so: SymBuf<i64>,
}

pub fn alltoallv(rt: &Runtime) -> Outcome {
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let n = rt.n_pes();
    let world = rt.team_world();
    let (row, column) = world.split_2d(2).map_err(e2s)?;
    let b = Bufs {
        input: rt.calloc::<u8>(4 * n * ROW).map_err(e2s)?,
        out: rt.calloc::<u8>(4 * n * ROW).map_err(e2s)?,
        splits: rt.calloc::<i64>(n).map_err(e2s)?,
        so: rt.calloc::<i64>(2 * n).map_err(e2s)?,
    };
    for (t, team) in [&world, &column].into_iter().enumerate() {
        let what = |e: String| format!("team {t} (of {}): {e}", team.n_pes());
        let tag = t as u64 * 10;
        let run = Run {
            rt,
            m: &m,
            team,
            b: &b,
        };
        let uneven = |i: usize, j: usize| ((i * 3 + j * 5 + t) % 4) as i64;
        run.check(tag, 4 * n, uneven).map_err(what)?;
        run.check(tag + 1, 4 * n, |_, _| 0).map_err(what)?;
        // Every member sends 2 rows to team PE 0, whose `out` is taken to hold 3.
        run.check(tag + 2, 3, |_, j| if j == 0 { 2 } else { 0 })
            .map_err(what)?;
        // Team PE 0 sends -1 rows to everyone: nothing, and no gap in the offsets.
        run.check(
            tag + 3,
            4 * n,
            |i, j| if i == 0 { -1 } else { (j % 2) as i64 + 1 },
        )
        .map_err(what)?;
    }
    rt.barrier_all().map_err(e2s)?;
    column.destroy().map_err(e2s)?;
    row.destroy().map_err(e2s)?;
    rt.free(b.input).map_err(e2s)?;
    rt.free(b.out).map_err(e2s)?;
    rt.free(b.splits).map_err(e2s)?;
    rt.free(b.so).map_err(e2s)
}

/// One team.
struct Run<'a> {
    rt: &'a Runtime,
    m: &'a Module,
    team: &'a Team<'a>,
    b: &'a Bufs,
}

impl Run<'_> {
    /// Byte `k` of row `r` of team PE `i`'s input in launch `tag`.
    fn byte(tag: u64, i: usize, r: usize, k: usize) -> u8 {
        (tag as usize * 31 + i * 71 + r * 7 + k + 1) as u8
    }

    /// Stages the input and `splits(i, j)` (team PE `i` to `j`), launches the kernel with
    /// `out` taken to hold `out_rows` rows, and checks `out` and the splits and offsets
    /// against the model (rows past `out_rows` dropped, negative splits as 0).
    fn check(&self, tag: u64, out_rows: usize, splits: impl Fn(usize, usize) -> i64) -> Outcome {
        let (rt, b) = (self.rt, self.b);
        let (me, n) = (self.team.my_pe(), self.team.n_pes());
        let my_pe = rt.my_pe();
        let in_rows = b.input.len() / ROW;
        let input: Vec<u8> = (0..in_rows)
            .flat_map(|r| (0..ROW).map(move |k| Self::byte(tag, me, r, k)))
            .collect();
        rt.put(b.input.at(0), &input, my_pe).map_err(e2s)?;
        let mine: Vec<i64> = (0..n).map(|j| splits(me, j)).collect();
        rt.put(b.splits.at(0), &mine, my_pe).map_err(e2s)?;
        rt.put(b.out.at(0), &vec![DEAD; b.out.len()], my_pe)
            .map_err(e2s)?;
        rt.put(b.so.at(0), &vec![-7i64; b.so.len()], my_pe)
            .map_err(e2s)?;
        let dt: DeviceTeam = self.team.device().map_err(e2s)?;
        let args = (
            dt,
            sym(rt, &b.out)?,
            out_rows,
            sym(rt, &b.input)?.cast_const(),
            in_rows,
            ROW,
            sym(rt, &b.splits)?.cast_const(),
            sym(rt, &b.so)?,
        );
        // SAFETY: the buffers are symmetric, the same on every member, and do not
        // overlap; `out` holds at least `out_rows` rows and `input` `in_rows`.
        unsafe { rt.launch(self.m, stream_team_alltoallv::KERNEL, 1, TEAM_THREADS, args) }
            .map_err(e2s)?;
        let got = read_all(rt, &b.out)?;
        let so = read_all(rt, &b.so)?;
        let rows = |v: i64| v.max(0) as usize;
        let mut at = 0;
        for i in 0..n {
            let count = splits(i, me);
            let start: usize = (0..me).map(|j| rows(splits(i, j))).sum();
            same!(so[i], count, "tag {tag}: rows from team PE {i}");
            same!(so[n + i], at as i64, "tag {tag}: offset of team PE {i}");
            for r in 0..rows(count).min(out_rows.saturating_sub(at)) {
                for k in 0..ROW {
                    same!(
                        got[(at + r) * ROW + k],
                        Self::byte(tag, i, start + r, k),
                        "tag {tag}: byte {k} of row {r} from team PE {i}"
                    );
                }
            }
            at += rows(count);
        }
        let landed = at.min(out_rows) * ROW;
        for (w, g) in got.iter().enumerate().skip(landed) {
            same!(
                *g,
                DEAD,
                "tag {tag}: byte {w} of out, past the rows received"
            );
        }
        rt.barrier_all().map_err(e2s)
    }
}
