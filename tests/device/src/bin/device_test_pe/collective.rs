//! Device collectives on a team (`team_barrier`/`team_sync`, `broadcast`, `fcollect`,
//! `collect`, `alltoall`, `reduce` and `reducescatter` with every operator on every type
//! (bf16 and f16 too, whose per-step roundings the models repeat in team order),
//! in place and not) at thread, warp and block scope, on TEAM_WORLD and on the columns of
//! a 2-D split (strided teams starting at PE 0 and at PE 1), checked exactly; host and
//! device barriers alternate on each team.

use symmem::collectives::{And, Max, Min, Or, Prod, ReduceOp, Reducible, Sum, Xor};
use symmem::device::{DeviceTeam, Kernel, KernelArgs};
use symmem::{Module, Pod, Runtime, SymBuf, Team};
use symmem_test_kernels::collective::{self as k, coll_value, reduce_input, THREADS};
use symmem_test_kernels::PTX;

use super::{check_eq, e2s, ensure, expect_kernel_failed, read_all, sym, Outcome};

/// Elements per block: more than one scratch chunk of u64s (64) and of u32s (128), so the
/// all-gather reduce runs several chunks and both scratch halves.
const NE: usize = 150;

/// Device barrier rounds per launch, host barrier rounds between launches.
const DEVICE_ROUNDS: u32 = 40;
const HOST_ROUNDS: u64 = 10;

/// The scopes: thread, warp, block (see the kernels' docs).
const SCOPES: [u32; 3] = [0, 1, 2];

/// A combining function.
type Apply<T> = fn(T, T) -> T;

/// The reduction element types, made from the kernels' i64 inputs with `as`.
trait Elem: Reducible + std::fmt::Debug {
    /// The bitwise operators the kernel runs after sum, prod, min, max: and, or, xor on
    /// integers, none on floats.
    const BITWISE: &'static [(&'static str, Apply<Self>)];
    fn from_i64(v: i64) -> Self;
}

macro_rules! elem {
    (int: $($t:ty),*) => {$(
        impl Elem for $t {
            const BITWISE: &'static [(&'static str, Apply<Self>)] = &[
                ("and", <And as ReduceOp<$t>>::apply),
                ("or", <Or as ReduceOp<$t>>::apply),
                ("xor", <Xor as ReduceOp<$t>>::apply),
            ];
            fn from_i64(v: i64) -> Self {
                v as $t
            }
        }
    )*};
    (float: $($t:ty),*) => {$(
        impl Elem for $t {
            const BITWISE: &'static [(&'static str, Apply<Self>)] = &[];
            fn from_i64(v: i64) -> Self {
                v as $t
            }
        }
    )*};
}
elem!(int: i32, i64, u32, u64);
elem!(float: f32, f64);

macro_rules! elem_narrow {
    ($($t:ident),*) => {$(
        impl Elem for symmem::$t {
            const BITWISE: &'static [(&'static str, Apply<Self>)] = &[];
            fn from_i64(v: i64) -> Self {
                Self::from_f32(v as f32)
            }
        }
    )*};
}
elem_narrow!(bf16, f16);

/// The buffers of one run, allocated on every PE (sized for TEAM_WORLD).
struct Bufs {
    slots: SymBuf<u64>,
    out: SymBuf<u64>,
    src: SymBuf<u64>,
    dest: SymBuf<u64>,
}

pub fn team_collectives(rt: &Runtime) -> Outcome {
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let n = rt.n_pes();
    let world = rt.team_world();
    // The columns of a 2-D split with 2 columns: PEs {0, 2, …} and {1, 3, …}, strided
    // teams that start at 0 and at 1 and run side by side in one slot.
    let (row, column) = world.split_2d(2).map_err(e2s)?;
    let bufs = Bufs {
        slots: rt.calloc::<u64>(n).map_err(e2s)?,
        out: rt.calloc::<u64>(1).map_err(e2s)?,
        src: rt.calloc::<u64>(NE * n).map_err(e2s)?,
        dest: rt.calloc::<u64>(NE * n).map_err(e2s)?,
    };
    let reduce_bufs = (
        ReduceBufs::<i32>::new(rt)?,
        ReduceBufs::<i64>::new(rt)?,
        ReduceBufs::<u32>::new(rt)?,
        ReduceBufs::<u64>::new(rt)?,
        ReduceBufs::<f32>::new(rt)?,
        ReduceBufs::<f64>::new(rt)?,
        ReduceBufs::<symmem::bf16>::new(rt)?,
        ReduceBufs::<symmem::f16>::new(rt)?,
    );
    for (t, team) in [&world, &column].into_iter().enumerate() {
        for scope in SCOPES {
            let run = Run {
                rt,
                m: &m,
                team,
                scope,
                case: t as u32 * 3 + scope,
            };
            let what = |e: String| format!("team {t} (of {}), scope {scope}: {e}", team.n_pes());
            run.barriers(&bufs).map_err(what)?;
            run.broadcast(&bufs).map_err(what)?;
            run.fcollect(&bufs).map_err(what)?;
            run.alltoall(&bufs).map_err(what)?;
            run.collect(&bufs).map_err(what)?;
            // In place selects the all-gather reduce instead of the direct-load one; when
            // some member is not mapped here, both run the all-gather reduce: once is enough.
            let modes: &[u32] = if run.all_mapped(&bufs)? {
                &[0, k::IN_PLACE, k::SCATTER, k::SCATTER | k::IN_PLACE]
            } else {
                &[0, k::SCATTER]
            };
            for &mode in modes {
                let (a, b, c, d, e, f, g, h) = &reduce_bufs;
                run.reduce(a, k::coll_reduce_i32::KERNEL, mode)
                    .map_err(what)?;
                run.reduce(b, k::coll_reduce_i64::KERNEL, mode)
                    .map_err(what)?;
                run.reduce(c, k::coll_reduce_u32::KERNEL, mode)
                    .map_err(what)?;
                run.reduce(d, k::coll_reduce_u64::KERNEL, mode)
                    .map_err(what)?;
                run.reduce(e, k::coll_reduce_f32::KERNEL, mode)
                    .map_err(what)?;
                run.reduce(f, k::coll_reduce_f64::KERNEL, mode)
                    .map_err(what)?;
                run.reduce(g, k::coll_reduce_bf16::KERNEL, mode)
                    .map_err(what)?;
                run.reduce(h, k::coll_reduce_f16::KERNEL, mode)
                    .map_err(what)?;
            }
            // A host reduction right after the device ones, through the same scratch.
            run.host_reduce(&reduce_bufs.3).map_err(what)?;
        }
    }
    rt.barrier_all().map_err(e2s)?;
    column.destroy().map_err(e2s)?;
    row.destroy().map_err(e2s)
}

/// A reduction's source (`NE` per PE, for reducescatter) and destination (7 blocks, one
/// per operator, of `NE` per PE: room for an in-place reducescatter).
struct ReduceBufs<T> {
    src: SymBuf<T>,
    dest: SymBuf<T>,
}

impl<T: Elem> ReduceBufs<T> {
    fn new(rt: &Runtime) -> Result<Self, String> {
        Ok(ReduceBufs {
            src: rt.calloc::<T>(NE * rt.n_pes()).map_err(e2s)?,
            dest: rt.calloc::<T>(7 * NE * rt.n_pes()).map_err(e2s)?,
        })
    }
}

/// One team at one scope; `case` makes every run's values distinct, so that a result
/// left from an earlier run never passes.
struct Run<'a> {
    rt: &'a Runtime,
    m: &'a Module,
    team: &'a Team<'a>,
    scope: u32,
    case: u32,
}

impl Run<'_> {
    /// Device barriers (two launches) around host barriers on the same team, the values
    /// continuing: a barrier of either kind that let a PE through early shows a stale slot.
    fn barriers(&self, b: &Bufs) -> Outcome {
        let (rt, team) = (self.rt, self.team);
        let (me, n) = (team.my_pe(), team.n_pes());
        let dt = team.device().map_err(e2s)?;
        let (s, o) = (sym(rt, &b.slots)?, sym(rt, &b.out)?);
        let mut base = self.case as u64 * 1000 + 1000;
        for part in 0..2 {
            rt.put(b.out.at(0), &[u64::MAX], rt.my_pe()).map_err(e2s)?;
            // SAFETY: `s` and `o` are symmetric addresses of `n_pes` u64s and one u64.
            unsafe {
                rt.launch(
                    self.m,
                    k::coll_barrier::KERNEL,
                    1,
                    THREADS,
                    (dt, s, base, DEVICE_ROUNDS, self.scope, o),
                )
            }
            .map_err(e2s)?;
            let stale = read_all(rt, &b.out)?[0];
            ensure(stale == 0, || {
                format!("device barriers (part {part}): {stale} stale slots")
            })?;
            base += DEVICE_ROUNDS as u64;
            for k in 1..=HOST_ROUNDS {
                let value = base + k;
                for j in 0..n {
                    rt.p(b.slots.at(me), value, team.world_pe(j).map_err(e2s)?)
                        .map_err(e2s)?;
                }
                team.barrier().map_err(e2s)?;
                check_eq(
                    &format!("slots after host barrier {k} (part {part})"),
                    &read_all(rt, &b.slots)?[..n],
                    &vec![value; n],
                )?;
                team.sync().map_err(e2s)?;
            }
            base += HOST_ROUNDS;
        }
        Ok(())
    }

    /// Whether every member's heap is mapped here (the device reductions then load
    /// directly).
    fn all_mapped(&self, b: &Bufs) -> Result<bool, String> {
        for j in 0..self.team.n_pes() {
            let pe = self.team.world_pe(j).map_err(e2s)?;
            if self.rt.ptr(&b.src, pe).map_err(e2s)?.is_none() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Fills this PE's `buf` with `data` (a kernel's input; only this PE reads it before
    /// the collective's entry barrier).
    fn fill<T: Pod>(&self, buf: &SymBuf<T>, data: &[T]) -> Outcome {
        self.rt.put(buf.at(0), data, self.rt.my_pe()).map_err(e2s)
    }

    /// Launches a u64 push collective `(team, dest, src, NE, extra…, scope)`.
    fn launch_push<A: KernelArgs>(&self, kernel: Kernel<A>, args: A) -> Outcome {
        // SAFETY: the caller passes symmetric addresses sized for the collective.
        unsafe { self.rt.launch(self.m, kernel, 1, THREADS, args) }.map_err(e2s)
    }

    fn broadcast(&self, b: &Bufs) -> Outcome {
        let (rt, team) = (self.rt, self.team);
        let (me, n) = (team.my_pe() as u32, team.n_pes() as u32);
        let (tag, root) = (100 + self.case, n - 1);
        self.fill(
            &b.src,
            &(0..NE).map(|i| coll_value(me, tag, i)).collect::<Vec<_>>(),
        )?;
        let dt = team.device().map_err(e2s)?;
        let (d, s) = (sym(rt, &b.dest)?, sym(rt, &b.src)?.cast_const());
        self.launch_push(k::coll_broadcast::KERNEL, (dt, d, s, NE, root, self.scope))?;
        let want: Vec<u64> = (0..NE).map(|i| coll_value(root, tag, i)).collect();
        check_eq("broadcast", &read_all(rt, &b.dest)?[..NE], &want)
    }

    fn fcollect(&self, b: &Bufs) -> Outcome {
        let (rt, team) = (self.rt, self.team);
        let (me, n) = (team.my_pe() as u32, team.n_pes() as u32);
        let tag = 200 + self.case;
        self.fill(
            &b.src,
            &(0..NE).map(|i| coll_value(me, tag, i)).collect::<Vec<_>>(),
        )?;
        let dt = team.device().map_err(e2s)?;
        let (d, s) = (sym(rt, &b.dest)?, sym(rt, &b.src)?.cast_const());
        self.launch_push(k::coll_fcollect::KERNEL, (dt, d, s, NE, self.scope))?;
        let want: Vec<u64> = (0..n)
            .flat_map(|j| (0..NE).map(move |i| coll_value(j, tag, i)))
            .collect();
        check_eq(
            "fcollect",
            &read_all(rt, &b.dest)?[..NE * n as usize],
            &want,
        )
    }

    /// Collect with `20 + 37 * i` elements from team PE `i`.
    fn collect(&self, b: &Bufs) -> Outcome {
        let (rt, team) = (self.rt, self.team);
        let (me, n) = (team.my_pe() as u32, team.n_pes() as u32);
        let tag = 400 + self.case;
        let len = |j: u32| 20 + 37 * j as usize;
        self.fill(
            &b.src,
            &(0..len(me))
                .map(|i| coll_value(me, tag, i))
                .collect::<Vec<_>>(),
        )?;
        let dt = team.device().map_err(e2s)?;
        let (d, s) = (sym(rt, &b.dest)?, sym(rt, &b.src)?.cast_const());
        self.launch_push(k::coll_collect::KERNEL, (dt, d, s, len(me), self.scope))?;
        let want: Vec<u64> = (0..n)
            .flat_map(|j| (0..len(j)).map(move |i| coll_value(j, tag, i)))
            .collect();
        check_eq("collect", &read_all(rt, &b.dest)?[..want.len()], &want)
    }

    fn alltoall(&self, b: &Bufs) -> Outcome {
        let (rt, team) = (self.rt, self.team);
        let (me, n) = (team.my_pe() as u32, team.n_pes() as u32);
        let tag = |to: u32| (300 + self.case) * 16 + to;
        let src: Vec<u64> = (0..n)
            .flat_map(|j| (0..NE).map(move |i| coll_value(me, tag(j), i)))
            .collect();
        self.fill(&b.src, &src)?;
        let dt = team.device().map_err(e2s)?;
        let (d, s) = (sym(rt, &b.dest)?, sym(rt, &b.src)?.cast_const());
        self.launch_push(k::coll_alltoall::KERNEL, (dt, d, s, NE, self.scope))?;
        let want: Vec<u64> = (0..n)
            .flat_map(|j| (0..NE).map(move |i| coll_value(j, tag(me), i)))
            .collect();
        check_eq(
            "alltoall",
            &read_all(rt, &b.dest)?[..NE * n as usize],
            &want,
        )
    }

    /// The host `Team::reduce` (u64 sum) on the buffers the device reductions just used:
    /// host and device collectives share the team's barrier and scratch.
    fn host_reduce(&self, bufs: &ReduceBufs<u64>) -> Outcome {
        let (me, n) = (self.team.my_pe() as u32, self.team.n_pes() as u32);
        let salt = self.case * 4 + 3;
        let input = |j: u32| (0..NE).map(move |i| reduce_input(j, salt, i) as u64);
        self.fill(&bufs.src, &input(me).collect::<Vec<_>>())?;
        self.team
            .reduce(&bufs.dest, &bufs.src, NE, Sum)
            .map_err(e2s)?;
        let want: Vec<u64> = (0..NE)
            .map(|i| {
                (0..n).fold(0u64, |acc, j| {
                    acc.wrapping_add(reduce_input(j, salt, i) as u64)
                })
            })
            .collect();
        check_eq(
            "host sum reduce after device reductions",
            &read_all(self.rt, &bufs.dest)?[..NE],
            &want,
        )
    }

    /// Every operator of a reduction kernel on `T` (sum, prod, min, max, then
    /// [`Elem::BITWISE`]), as `mode` says (reduce or reducescatter, in place or not). Expected values fold the same inputs in team order with the
    /// same operators in the same type, so float results match bit for bit.
    fn reduce<T: Elem>(
        &self,
        bufs: &ReduceBufs<T>,
        kernel: Kernel<(DeviceTeam, *mut T, *const T, usize, u32, u32)>,
        mode: u32,
    ) -> Outcome {
        let (rt, team) = (self.rt, self.team);
        let (me, n) = (team.my_pe() as u32, team.n_pes() as u32);
        let salt = self.case * 4 + mode;
        let scatter = mode & k::SCATTER != 0;
        // Where this PE's result comes from in every PE's input, and how far apart the
        // kernel puts the operators' blocks.
        let (from, stride) = if scatter {
            (me as usize * NE, n as usize * NE)
        } else {
            (0, NE)
        };
        let input = |j: u32| -> Vec<T> {
            (0..NE * n as usize)
                .map(|i| T::from_i64(reduce_input(j, salt, i)))
                .collect()
        };
        self.fill(&bufs.src, &input(me))?;
        let dt = team.device().map_err(e2s)?;
        let (d, s) = (sym(rt, &bufs.dest)?, sym(rt, &bufs.src)?.cast_const());
        // SAFETY: `d` and `s` are symmetric addresses of 7 * NE and NE elements.
        unsafe { rt.launch(self.m, kernel, 1, THREADS, (dt, d, s, NE, self.scope, mode)) }
            .map_err(e2s)?;
        let inputs: Vec<Vec<T>> = (0..n).map(input).collect();
        let got = read_all(rt, &bufs.dest)?;
        let ops: [(&str, Apply<T>); 4] = [
            ("sum", <Sum as ReduceOp<T>>::apply),
            ("prod", <Prod as ReduceOp<T>>::apply),
            ("min", <Min as ReduceOp<T>>::apply),
            ("max", <Max as ReduceOp<T>>::apply),
        ];
        for (k, (name, apply)) in ops.iter().chain(T::BITWISE).enumerate() {
            let want: Vec<T> = (0..NE)
                .map(|i| {
                    inputs[1..]
                        .iter()
                        .fold(inputs[0][from + i], |acc, x| apply(acc, x[from + i]))
                })
                .collect();
            check_eq(
                &format!(
                    "{name} {} of {} (in place: {})",
                    if scatter { "reducescatter" } else { "reduce" },
                    std::any::type_name::<T>(),
                    mode & k::IN_PLACE != 0
                ),
                &got[k * stride..k * stride + NE],
                &want,
            )?;
        }
        Ok(())
    }
}

/// Misuse fails the launch with `KernelFailed` naming the thread, before any barrier or
/// copy: a broadcast root outside the team, and a team handle that does not describe a
/// team of this PE. The team's barriers still work afterwards. Prints each error as
/// `ERROR (expected): …`.
pub fn team_collective_errors(rt: &Runtime) -> Outcome {
    let m = rt.load_module(&PTX).map_err(e2s)?;
    let world = rt.team_world();
    let n = world.n_pes() as u32;
    let src = rt.calloc::<u64>(NE).map_err(e2s)?;
    let dest = rt.calloc::<u64>(NE).map_err(e2s)?;
    let (d, s) = (sym(rt, &dest)?, sym(rt, &src)?.cast_const());
    let dt = world.device().map_err(e2s)?;
    // SAFETY: `d` and `s` are symmetric addresses of NE u64s; the launch fails before
    // touching them.
    let r = unsafe {
        rt.launch(
            &m,
            k::coll_broadcast::KERNEL,
            1,
            THREADS,
            (dt, d, s, NE, n, 0),
        )
    };
    let needle = format!("team PE {n}, which is not in the team");
    let text = expect_kernel_failed(rt, r, (0, 0, 0), (0, 0, 0), &[&needle])
        .map_err(|e| format!("broadcast from root {n}: {e}"))?;
    println!("ERROR (expected): {text}");
    let mut foreign = dt;
    foreign.my_index = n;
    let (slots, out) = (sym(rt, &src)?, sym(rt, &dest)?);
    // SAFETY: as above.
    let r = unsafe {
        rt.launch(
            &m,
            k::coll_barrier::KERNEL,
            1,
            THREADS,
            (foreign, slots, 0, 1, 2, out),
        )
    };
    let text = expect_kernel_failed(
        rt,
        r,
        (0, 0, 0),
        (0, 0, 0),
        &["team handle that does not describe a team of this PE"],
    )
    .map_err(|e| format!("barrier with a foreign handle: {e}"))?;
    println!("ERROR (expected): {text}");
    check_eq(
        "dest after refused collectives",
        &read_all(rt, &dest)?,
        &[0; NE],
    )?;
    world.barrier().map_err(e2s)?;
    rt.free(src).map_err(e2s)?;
    rt.free(dest).map_err(e2s)
}
