//! Stream-ordered team collectives (`Team::*_on_stream`): barriers and syncs with their
//! data checked, broadcast (every root), fcollect and alltoall on elements of 8, 2 and 3
//! bytes (the GPU path moves them as u64, u16 and u8 words), reduce (also in place) and
//! reducescatter with every operator on every type, on TEAM_WORLD and the rows and columns
//! of a 2-D split; the argument errors, returned before anything is queued.
//!
//! On CPU PEs a stream is the calling thread and these are the host collectives; on GPU
//! PEs (`scripts/gpu-check.sh`) each call queues a helper kernel, and results are read
//! after `Stream::synchronize`. Inputs are small positive integers, so every model below
//! (computed in i64, then converted) is exact in every type and order.

use std::fmt::Debug;

use symmem::collectives::{And, Max, Min, Or, Prod, ReduceOp, Reducible, Sum, Xor};
use symmem::{Pod, Runtime, Stream, SymBuf, Team};

use super::{check_eq, expect_err, finish, key, OrFail, Outcome};

/// Element counts of the plain collectives and of the sum reductions: one, a few, and
/// more than one 64-word scratch chunk.
const NELEMS: [usize; 3] = [1, 3, 300];

/// The stream collectives on every team: `stream_collectives ok` on every PE.
pub fn stream_collectives(rt: &Runtime) -> Outcome {
    finish(rt, "stream_collectives", inner(rt))
}

fn inner(rt: &Runtime) -> Outcome {
    let stream = rt.create_stream().or_fail()?;
    let world = rt.team_world();
    on_team(rt, &world, &stream, 1)?;
    let (row, column) = world.split_2d(2).or_fail()?;
    on_team(rt, &row, &stream, 2)?;
    on_team(rt, &column, &stream, 3)?;
    row.destroy().or_fail()?;
    column.destroy().or_fail()?;
    rt.barrier_all().or_fail()
}

/// Everything on one team. Every PE calls it the same number of times (it allocates).
fn on_team(rt: &Runtime, team: &Team<'_>, stream: &Stream, tag: u64) -> Outcome {
    barriers(rt, team, stream, tag)?;
    plain::<u64>(rt, team, stream, tag, |v| v)?;
    plain::<u16>(rt, team, stream, tag, |v| v as u16)?;
    plain::<[u8; 3]>(rt, team, stream, tag, |v| {
        [v as u8, (v >> 8) as u8, (v >> 16) as u8]
    })?;
    int::<i32>(rt, team, stream, tag)?;
    int::<i64>(rt, team, stream, tag)?;
    int::<u32>(rt, team, stream, tag)?;
    int::<u64>(rt, team, stream, tag)?;
    arith::<f32>(rt, team, stream, tag)?;
    arith::<f64>(rt, team, stream, tag)?;
    narrow::<symmem::bf16>(rt, team, stream, tag)?;
    narrow::<symmem::f16>(rt, team, stream, tag)
}

/// Rounds of: every PE writes the round's value into its slot on every member, then a
/// `barrier_on_stream` (even rounds) or a host `barrier` (odd rounds, so host and stream
/// barriers continue one epoch); every slot must hold the value; then a `sync_on_stream`
/// before the next round's writes.
fn barriers(rt: &Runtime, team: &Team<'_>, stream: &Stream, tag: u64) -> Outcome {
    let (i, m) = (team.my_pe(), team.n_pes());
    let slots = rt.calloc::<u64>(rt.n_pes()).or_fail()?;
    for round in 1..=4u64 {
        let value = key(&[tag, round]);
        for j in 0..m {
            rt.p(slots.at(i), value, team.world_pe(j).or_fail()?)
                .or_fail()?;
        }
        if round % 2 == 0 {
            team.barrier().or_fail()?;
        } else {
            team.barrier_on_stream(stream).or_fail()?;
            stream.synchronize().or_fail()?;
        }
        let mut got = vec![0u64; m];
        rt.read_local(slots.at(0), &mut got).or_fail()?;
        for (j, g) in got.iter().enumerate() {
            check_eq!(*g, value, "round {round}: slot of team PE {j}");
        }
        team.sync_on_stream(stream).or_fail()?;
        stream.synchronize().or_fail()?;
    }
    rt.barrier_all().or_fail()?;
    rt.free(slots).or_fail()
}

/// Symmetric buffers sized for the world (every PE allocates alike).
struct Bufs<T> {
    src: SymBuf<T>,
    dest: SymBuf<T>,
}

impl<T: Pod> Bufs<T> {
    fn new(rt: &Runtime) -> Result<Self, String> {
        let len = rt.n_pes() * NELEMS[2] + 1;
        Ok(Bufs {
            src: rt.alloc::<T>(len).or_fail()?,
            dest: rt.alloc::<T>(len).or_fail()?,
        })
    }

    fn free(self, rt: &Runtime) -> Outcome {
        rt.barrier_all().or_fail()?;
        rt.free(self.src).or_fail()?;
        rt.free(self.dest).or_fail()
    }

    /// Fills this PE's `dest` with `fill`, so that writes past a collective's range show.
    fn poison(&self, rt: &Runtime, fill: T) -> Outcome {
        rt.put(self.dest.at(0), &vec![fill; self.dest.len()], rt.my_pe())
            .or_fail()
    }

    /// Puts `data` at the start of this PE's `src`.
    fn source(&self, rt: &Runtime, data: &[T]) -> Outcome {
        rt.put(self.src.at(0), data, rt.my_pe()).or_fail()
    }

    /// This PE's `dest`, once `stream` has run.
    fn result(&self, rt: &Runtime, stream: &Stream) -> Result<Vec<T>, String> {
        stream.synchronize().or_fail()?;
        let mut got = vec![T::zeroed(); self.dest.len()];
        rt.read_local(self.dest.at(0), &mut got).or_fail()?;
        Ok(got)
    }
}

/// Broadcast from every root, fcollect and alltoall of `T`s made by `of`.
fn plain<T: Pod + PartialEq + Debug>(
    rt: &Runtime,
    team: &Team<'_>,
    stream: &Stream,
    tag: u64,
    of: fn(u64) -> T,
) -> Outcome {
    let (i, m) = (team.my_pe(), team.n_pes());
    let val = |s: usize, b: usize, k: usize| of(key(&[tag, s as u64, b as u64, k as u64]));
    let dead = of(0xDEAD_BEEF);
    let b = Bufs::<T>::new(rt)?;
    for ne in NELEMS {
        for root in 0..m {
            b.poison(rt, dead)?;
            b.source(rt, &(0..ne).map(|k| val(i, root, k)).collect::<Vec<_>>())?;
            team.broadcast_on_stream(&b.dest, &b.src, ne, root, stream)
                .or_fail()?;
            let got = b.result(rt, stream)?;
            for (k, g) in got[..ne].iter().enumerate() {
                check_eq!(
                    *g,
                    val(root, root, k),
                    "broadcast ne {ne} root {root} [{k}]"
                );
            }
            check_eq!(got[ne], dead, "broadcast ne {ne}: past nelems");
        }
        b.poison(rt, dead)?;
        b.source(rt, &(0..ne).map(|k| val(i, 0, k)).collect::<Vec<_>>())?;
        team.fcollect_on_stream(&b.dest, &b.src, ne, stream)
            .or_fail()?;
        let got = b.result(rt, stream)?;
        for s in 0..m {
            for k in 0..ne {
                check_eq!(
                    got[s * ne + k],
                    val(s, 0, k),
                    "fcollect ne {ne} from team PE {s} [{k}]"
                );
            }
        }
        check_eq!(got[m * ne], dead, "fcollect ne {ne}: past the end");
        b.poison(rt, dead)?;
        let mine: Vec<T> = (0..m * ne).map(|x| val(i, x / ne, x % ne)).collect();
        b.source(rt, &mine)?;
        team.alltoall_on_stream(&b.dest, &b.src, ne, stream)
            .or_fail()?;
        let got = b.result(rt, stream)?;
        for s in 0..m {
            for k in 0..ne {
                check_eq!(
                    got[s * ne + k],
                    val(s, i, k),
                    "alltoall ne {ne} from team PE {s} [{k}]"
                );
            }
        }
        check_eq!(got[m * ne], dead, "alltoall ne {ne}: past the end");
    }
    b.free(rt)
}

/// A reduction type, converted from the models' i64.
trait RT: Reducible + Debug + PartialEq {
    /// `v as Self`.
    fn of(v: i64) -> Self;
}

macro_rules! rt_of {
    ($($t:ty),*) => {$(
        impl RT for $t {
            fn of(v: i64) -> Self {
                v as $t
            }
        }
    )*};
}
rt_of!(i32, i64, u32, u64, f32, f64);

macro_rules! rt_of_narrow {
    ($($t:ident),*) => {$(
        impl RT for symmem::$t {
            fn of(v: i64) -> Self {
                Self::from_f32(v as f32)
            }
        }
    )*};
}
rt_of_narrow!(bf16, f16);

/// Input `k` of block `j` of team PE `s`: 1 to 8, so sums and products of 4 PEs are exact.
fn input(tag: u64, s: usize, j: usize, k: usize) -> i64 {
    (key(&[tag, s as u64, j as u64, k as u64]) % 8) as i64 + 1
}

/// Every operator on an integer type.
fn int<T: RT + symmem::collectives::BitwiseReducible>(
    rt: &Runtime,
    team: &Team<'_>,
    stream: &Stream,
    tag: u64,
) -> Outcome {
    arith::<T>(rt, team, stream, tag)?;
    let b = Bufs::<T>::new(rt)?;
    reductions(rt, team, stream, tag, &b, 3, And, |a, c| a & c)?;
    reductions(rt, team, stream, tag, &b, 3, Or, |a, c| a | c)?;
    reductions(rt, team, stream, tag, &b, 3, Xor, |a, c| a ^ c)?;
    b.free(rt)
}

/// Sum (every size), prod, min and max on `T`.
fn arith<T: RT>(rt: &Runtime, team: &Team<'_>, stream: &Stream, tag: u64) -> Outcome {
    let b = Bufs::<T>::new(rt)?;
    for ne in NELEMS {
        reductions(rt, team, stream, tag, &b, ne, Sum, |a, c| a + c)?;
    }
    reductions(rt, team, stream, tag, &b, 3, Prod, |a, c| a * c)?;
    reductions(rt, team, stream, tag, &b, 3, Min, i64::min)?;
    reductions(rt, team, stream, tag, &b, 3, Max, i64::max)?;
    b.free(rt)
}

/// Sum (every size), min and max on a 16-bit float: exact for the inputs (at most 32),
/// whatever the order of the per-step roundings; a product of four inputs up to 8 may
/// need 12 significand bits (prod is in the host collectives' test, on smaller inputs).
fn narrow<T: RT>(rt: &Runtime, team: &Team<'_>, stream: &Stream, tag: u64) -> Outcome {
    let b = Bufs::<T>::new(rt)?;
    for ne in NELEMS {
        reductions(rt, team, stream, tag, &b, ne, Sum, |a, c| a + c)?;
    }
    reductions(rt, team, stream, tag, &b, 3, Min, i64::min)?;
    reductions(rt, team, stream, tag, &b, 3, Max, i64::max)?;
    b.free(rt)
}

/// `reduce_on_stream` (into `dest`, then in place) and `reducescatter_on_stream` of `ne`
/// elements with `op`, against `model` folded in team order.
#[allow(clippy::too_many_arguments)] // the scenario's context plus the operator and its model
fn reductions<T: RT, O: ReduceOp<T>>(
    rt: &Runtime,
    team: &Team<'_>,
    stream: &Stream,
    tag: u64,
    b: &Bufs<T>,
    ne: usize,
    op: O,
    model: fn(i64, i64) -> i64,
) -> Outcome {
    let (i, m, me) = (team.my_pe(), team.n_pes(), rt.my_pe());
    let name = O::NAME;
    let fold = |j: usize, k: usize| {
        let v = (1..m).fold(input(tag, 0, j, k), |acc, s| {
            model(acc, input(tag, s, j, k))
        });
        T::of(v)
    };
    let dead = T::of(99);
    // reduce: block 0 of every PE.
    b.poison(rt, dead)?;
    b.source(
        rt,
        &(0..ne)
            .map(|k| T::of(input(tag, i, 0, k)))
            .collect::<Vec<_>>(),
    )?;
    team.reduce_on_stream(&b.dest, &b.src, ne, op, stream)
        .or_fail()?;
    let got = b.result(rt, stream)?;
    for k in 0..ne {
        check_eq!(got[k], fold(0, k), "reduce {name} ne {ne} [{k}]");
    }
    check_eq!(got[ne], dead, "reduce {name} ne {ne}: past nelems");
    // In place.
    let mine: Vec<T> = (0..ne).map(|k| T::of(input(tag, i, 0, k))).collect();
    rt.put(b.dest.at(0), &mine, me).or_fail()?;
    team.reduce_on_stream(&b.dest, &b.dest, ne, op, stream)
        .or_fail()?;
    let got = b.result(rt, stream)?;
    for k in 0..ne {
        check_eq!(got[k], fold(0, k), "in-place reduce {name} ne {ne} [{k}]");
    }
    // reducescatter: block j of every PE to team PE j.
    b.poison(rt, dead)?;
    let mine: Vec<T> = (0..m * ne)
        .map(|x| T::of(input(tag, i, x / ne, x % ne)))
        .collect();
    b.source(rt, &mine)?;
    team.reducescatter_on_stream(&b.dest, &b.src, ne, op, stream)
        .or_fail()?;
    let got = b.result(rt, stream)?;
    for k in 0..ne {
        check_eq!(got[k], fold(i, k), "reducescatter {name} ne {ne} [{k}]");
    }
    check_eq!(got[ne], dead, "reducescatter {name} ne {ne}: past nelems");
    Ok(())
}

/// The argument errors of the stream collectives, the same on every PE and before
/// anything is queued; the team works after them.
pub fn stream_collective_errors(rt: &Runtime) -> Outcome {
    finish(rt, "stream_collective_errors", errors_inner(rt))
}

fn errors_inner(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let s = |x: &str| x.to_string();
    let stream = rt.create_stream().or_fail()?;
    let world = rt.team_world();
    let small = rt.calloc::<u64>(2).or_fail()?;
    let big = rt.calloc::<u64>(4 * n).or_fail()?;
    let other = rt.calloc::<u64>(4 * n).or_fail()?;
    expect_err(
        world.broadcast_on_stream(&big, &other, 1, n, &stream),
        "InvalidPe",
        &[s("team_broadcast_on_stream"), s("the root")],
    )?;
    expect_err(
        world.broadcast_on_stream(&big, &small, 3, 0, &stream),
        "InvalidArgument",
        &[
            s("team_broadcast_on_stream"),
            s("src (allocation #"),
            s("3 elements needed"),
        ],
    )?;
    expect_err(
        world.fcollect_on_stream(&small, &big, 3, &stream),
        "InvalidArgument",
        &[
            s("team_fcollect_on_stream"),
            format!("{} elements needed (nelems 3 × {n} PEs of the team)", 3 * n),
        ],
    )?;
    expect_err(
        world.alltoall_on_stream(&big, &big, 1, &stream),
        "InvalidArgument",
        &[s("team_alltoall_on_stream"), s("the same allocation")],
    )?;
    expect_err(
        world.fcollect_on_stream(&big, &big, 1, &stream),
        "InvalidArgument",
        &[s("the same allocation")],
    )?;
    expect_err(
        world.reduce_on_stream(&small, &big, 3, Sum, &stream),
        "InvalidArgument",
        &[s("team_reduce_on_stream"), s("dest (allocation #")],
    )?;
    expect_err(
        world.reducescatter_on_stream(&big, &small, 3, Max, &stream),
        "InvalidArgument",
        &[
            s("team_reducescatter_on_stream"),
            format!("nelems 3 × {n} PEs of the team"),
        ],
    )?;
    if n >= 2 && !rt.is_gpu() {
        one_bad(rt, &stream, &small, &big, &other)?;
    }
    // The team still works: a sum in place.
    rt.put(big.at(0), &[me as u64 + 1], me).or_fail()?;
    world
        .reduce_on_stream(&big, &big, 1, Sum, &stream)
        .or_fail()?;
    stream.synchronize().or_fail()?;
    let mut got = [0u64];
    rt.read_local(big.at(0), &mut got).or_fail()?;
    check_eq!(got[0], (n * (n + 1) / 2) as u64, "sum after the errors");
    world.barrier_on_stream(&stream).or_fail()?;
    stream.synchronize().or_fail()?;
    rt.free(small).or_fail()?;
    rt.free(big).or_fail()?;
    rt.free(other).or_fail()
}

/// On CPU PEs, where a stream call is the host collective: the last PE alone passes a bad
/// argument, and every PE's call fails naming it (a PE that returned on its own would
/// leave the others' collective to pair with its next call); after each, a sum in place
/// must be right on every PE. (A GPU PE returns its own error before queueing: see
/// runtime/src/team/on_stream.rs.)
fn one_bad(
    rt: &Runtime,
    stream: &Stream,
    small: &SymBuf<u64>,
    big: &SymBuf<u64>,
    other: &SymBuf<u64>,
) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let last = n - 1;
    let odd = me == last;
    let world = rt.team_world();
    let names = |op: &str, what: &str| {
        vec![
            format!("{op}: bad arguments on 1 of the team's {n} PEs (team PE {last} (world PE {last}): "),
            what.to_string(),
        ]
    };
    let mut round = 0u64;
    let mut good_sum = || -> Outcome {
        round += 1;
        rt.put(big.at(0), &[me as u64 + 1 + 10 * round], me)
            .or_fail()?;
        world.reduce_on_stream(big, big, 1, Sum, stream).or_fail()?;
        stream.synchronize().or_fail()?;
        let mut got = [0u64];
        rt.read_local(big.at(0), &mut got).or_fail()?;
        check_eq!(
            got[0],
            (n * (n + 1) / 2) as u64 + 10 * round * n as u64,
            "the sum after one PE's bad stream call {round}"
        );
        Ok(())
    };
    let err = |r: symmem::Result<()>, op: &str, what: &str| -> Outcome {
        if odd {
            // This PE's own error, as if it were alone.
            return r
                .err()
                .map(drop)
                .ok_or_else(|| format!("{op}: the bad PE got Ok"));
        }
        expect_err(r, "InvalidArgument", &names(op, what))
    };
    err(
        world.broadcast_on_stream(other, big, 1, if odd { n } else { 0 }, stream),
        "team_broadcast_on_stream",
        &format!("root {n} is not a PE of the team"),
    )?;
    good_sum()?;
    err(
        world.fcollect_on_stream(other, if odd { small } else { big }, 3, stream),
        "team_fcollect_on_stream",
        "src (2 elements) is too small: 3 elements needed",
    )?;
    good_sum()?;
    err(
        world.alltoall_on_stream(if odd { big } else { other }, big, 1, stream),
        "team_alltoall_on_stream",
        "dest and src are the same allocation",
    )?;
    good_sum()?;
    err(
        world.reduce_on_stream(if odd { small } else { other }, big, 3, Sum, stream),
        "team_reduce_on_stream",
        "dest (2 elements) is too small: 3 elements needed",
    )?;
    good_sum()?;
    err(
        world.reducescatter_on_stream(other, if odd { small } else { big }, 2, Max, stream),
        "team_reducescatter_on_stream",
        &format!("src (2 elements) is too small: {} elements needed", 2 * n),
    )?;
    good_sum()
}
