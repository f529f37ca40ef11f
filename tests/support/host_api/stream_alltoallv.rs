//! `Team::alltoallv` and `Team::alltoallv_on_stream` (torch's `all_to_all_vdev`): uneven
//! splits with zeros, every split zero, on TEAM_WORLD and the columns of a 2-D split, in
//! both forms; rows of 3 u32s (12 bytes, no power of two); an `out` too small and
//! negative splits (the same error on every PE from the host form; on a GPU PE the stream
//! form drops the rows that do not fit and reports the counts as sent); the argument
//! errors returned before anything moves.

use symmem::{Runtime, Stream, SymBuf, Team};

use super::{check_eq, expect_err, finish, key, OrFail, Outcome};

/// Elements of a row.
const ROW: usize = 3;
/// A word `out` rows hold before the call, to show rows written past what arrived.
const DEAD: u32 = 0xDEAD_BEEF;

/// The scenario: `stream_alltoallv ok` on every PE.
pub fn stream_alltoallv(rt: &Runtime) -> Outcome {
    finish(rt, "stream_alltoallv", inner(rt))
}

fn inner(rt: &Runtime) -> Outcome {
    let stream = rt.create_stream().or_fail()?;
    let world = rt.team_world();
    let (row, column) = world.split_2d(2).or_fail()?;
    let b = Bufs::new(rt)?;
    for (t, team) in [&world, &column].into_iter().enumerate() {
        for (mode, on_stream) in [(0u64, false), (1, true)] {
            let tag = t as u64 * 2 + mode;
            let run = Run {
                rt,
                team,
                b: &b,
                stream: &stream,
                on_stream,
            };
            run.exchange(tag, |i, j, _| (i * 3 + j * 5 + tag as usize) % 4)
                .map_err(|e| format!("team {t}, stream {on_stream}, uneven: {e}"))?;
            run.exchange(tag + 10, |_, _, _| 0)
                .map_err(|e| format!("team {t}, stream {on_stream}, zero: {e}"))?;
        }
        Run {
            rt,
            team,
            b: &b,
            stream: &stream,
            on_stream: true,
        }
        .too_small()
        .map_err(|e| format!("team {t}: {e}"))?;
    }
    errors(rt, &world, &b, &stream)?;
    rt.barrier_all().or_fail()?;
    column.destroy().or_fail()?;
    row.destroy().or_fail()?;
    b.free(rt)
}

/// The buffers, sized for TEAM_WORLD: `input` of `4 n` rows (every split below 4),
/// `out` of `4 n` rows, `small` of one row.
struct Bufs {
    input: SymBuf<u32>,
    out: SymBuf<u32>,
    small: SymBuf<u32>,
    splits: SymBuf<i64>,
    so: SymBuf<i64>,
}

impl Bufs {
    fn new(rt: &Runtime) -> Result<Self, String> {
        let n = rt.n_pes();
        Ok(Bufs {
            input: rt.calloc::<u32>(4 * n * ROW).or_fail()?,
            out: rt.calloc::<u32>(4 * n * ROW).or_fail()?,
            small: rt.calloc::<u32>(ROW).or_fail()?,
            splits: rt.calloc::<i64>(n).or_fail()?,
            so: rt.calloc::<i64>(2 * n).or_fail()?,
        })
    }

    fn free(self, rt: &Runtime) -> Outcome {
        rt.barrier_all().or_fail()?;
        for b in [self.input, self.out, self.small] {
            rt.free(b).or_fail()?;
        }
        rt.free(self.splits).or_fail()?;
        rt.free(self.so).or_fail()
    }
}

/// One team, one form.
struct Run<'a> {
    rt: &'a Runtime,
    team: &'a Team<'a>,
    b: &'a Bufs,
    stream: &'a Stream,
    on_stream: bool,
}

impl Run<'_> {
    /// Word `k` of row `r` of team PE `i`'s input in call `tag`.
    fn word(tag: u64, i: usize, r: usize, k: usize) -> u32 {
        key(&[tag, i as u64, r as u64, k as u64]) as u32
    }

    /// Stages this PE's input and `splits(i, j, n)` (team PE `i` to `j`), runs the call
    /// into `out`, and checks `out` and the splits and offsets against the model.
    fn exchange(&self, tag: u64, splits: impl Fn(usize, usize, usize) -> usize) -> Outcome {
        let (rt, b) = (self.rt, self.b);
        let (me, n) = (self.team.my_pe(), self.team.n_pes());
        let my_pe = rt.my_pe();
        let input: Vec<u32> = (0..4 * rt.n_pes())
            .flat_map(|r| (0..ROW).map(move |k| Self::word(tag, me, r, k)))
            .collect();
        rt.put(b.input.at(0), &input, my_pe).or_fail()?;
        let mine: Vec<i64> = (0..n).map(|j| splits(me, j, n) as i64).collect();
        rt.put(b.splits.at(0), &mine, my_pe).or_fail()?;
        rt.put(b.out.at(0), &vec![DEAD; b.out.len()], my_pe)
            .or_fail()?;
        rt.put(b.so.at(0), &vec![-1i64; b.so.len()], my_pe)
            .or_fail()?;
        self.call(&b.out).or_fail()?;
        let mut got = vec![0u32; b.out.len()];
        rt.read_local(b.out.at(0), &mut got).or_fail()?;
        let mut so = vec![0i64; b.so.len()];
        rt.read_local(b.so.at(0), &mut so).or_fail()?;
        let mut at = 0;
        for i in 0..n {
            let count = splits(i, me, n);
            let start: usize = (0..me).map(|j| splits(i, j, n)).sum();
            check_eq!(so[i], count as i64, "rows from team PE {i}");
            check_eq!(so[n + i], at as i64, "offset of team PE {i}'s rows");
            for r in 0..count {
                for k in 0..ROW {
                    check_eq!(
                        got[(at + r) * ROW + k],
                        Self::word(tag, i, start + r, k),
                        "row {r} from team PE {i}, word {k}"
                    );
                }
            }
            at += count;
        }
        for (w, g) in got.iter().enumerate().skip(at * ROW) {
            check_eq!(*g, DEAD, "word {w} of out, past the {at} rows received");
        }
        self.rt.barrier_all().or_fail()
    }

    /// The call of this run's form on `out`, complete on return.
    fn call(&self, out: &SymBuf<u32>) -> symmem::Result<()> {
        let b = self.b;
        if self.on_stream {
            self.team
                .alltoallv_on_stream(out, &b.input, &b.splits, &b.so, ROW, self.stream)?;
            self.stream.synchronize()
        } else {
            self.team.alltoallv(out, &b.input, &b.splits, &b.so, ROW)
        }
    }

    /// Every member sends 2 rows to team PE 0, whose `out` holds 1: from the host form
    /// (and the stream form on a CPU PE) the same error on every PE, nothing moved; on a
    /// GPU PE the stream form moves the first row and reports the counts as sent. Then
    /// a negative split: the host form's error on every PE.
    fn too_small(&self) -> Outcome {
        let (rt, b) = (self.rt, self.b);
        let (me, n) = (self.team.my_pe(), self.team.n_pes());
        let tag = 99;
        let input: Vec<u32> = (0..2)
            .flat_map(|r| (0..ROW).map(move |k| Self::word(tag, me, r, k)))
            .collect();
        rt.put(b.input.at(0), &input, rt.my_pe()).or_fail()?;
        let mut mine = vec![0i64; n];
        mine[0] = 2;
        rt.put(b.splits.at(0), &mine, rt.my_pe()).or_fail()?;
        rt.put(b.small.at(0), &[DEAD; ROW], rt.my_pe()).or_fail()?;
        let first = self.team.world_pe(0).or_fail()?;
        let r = self.call(&b.small);
        let mut got = [0u32; ROW];
        rt.read_local(b.small.at(0), &mut got).or_fail()?;
        if rt.is_gpu() {
            r.or_fail()?;
            let mut so = vec![0i64; 2 * n];
            rt.read_local(b.so.at(0), &mut so).or_fail()?;
            let want_first = if me == 0 { 2 } else { 0 };
            check_eq!(so[0], want_first, "rows team PE 0 sent here");
            if me == 0 {
                let want: Vec<u32> = (0..ROW).map(|k| Self::word(tag, 0, 0, k)).collect();
                check_eq!(got.to_vec(), want, "the one row that fits");
                check_eq!(so[2 * n - 1], 2 * (n as i64 - 1), "last offset");
            }
        } else {
            expect_err(
                r,
                "InvalidArgument",
                &[
                    "team_alltoallv_on_stream".into(),
                    format!(
                        "team PE 0 (world PE {first}) receives {} rows but its out holds 1",
                        2 * n
                    ),
                    "every member of the team returns this error".into(),
                ],
            )?;
            check_eq!(got, [DEAD; ROW], "out after the error");
            mine[0] = -1;
            rt.put(b.splits.at(0), &mine, rt.my_pe()).or_fail()?;
            expect_err(
                self.team.alltoallv(&b.out, &b.input, &b.splits, &b.so, ROW),
                "InvalidArgument",
                &[
                    "team_alltoallv".into(),
                    format!("team PE {}", n - 1),
                    "in_splits are negative".into(),
                ],
            )?;
        }
        rt.barrier_all().or_fail()
    }
}

/// The argument errors, returned on every PE before anything moves.
fn errors(rt: &Runtime, world: &Team<'_>, b: &Bufs, stream: &Stream) -> Outcome {
    let n = rt.n_pes();
    let s = |x: &str| x.to_string();
    expect_err(
        world.alltoallv_on_stream(&b.out, &b.input, &b.splits, &b.so, 0, stream),
        "InvalidArgument",
        &[
            s("team_alltoallv_on_stream"),
            s("row must be at least one element"),
        ],
    )?;
    expect_err(
        world.alltoallv(&b.out, &b.out, &b.splits, &b.so, ROW),
        "InvalidArgument",
        &[s("team_alltoallv"), s("out overlaps input")],
    )?;
    expect_err(
        world.alltoallv(&b.out, &b.input, &b.splits, &b.splits, ROW),
        "InvalidArgument",
        &[format!(
            "out_splits_offsets holds {n} words; the team's {n} PEs need {}",
            2 * n
        )],
    )?;
    expect_err(
        world.alltoallv(&b.out, &b.input, &b.so, &b.so, ROW),
        "InvalidArgument",
        &[s("out_splits_offsets overlaps in_splits")],
    )?;
    rt.barrier_all().or_fail()
}
