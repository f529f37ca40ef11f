//! The executor's guarantees, on a single-PE runtime: barriers under several schedules,
//! reproducible seeds, failures naming block, thread and schedule, deadlocked barriers,
//! exited threads, stack overflows.

use std::hint::black_box;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use symmem_device::{sync_threads, sync_warp, thread_rank, Cmp};

use crate::error::Error;
use crate::runtime::Runtime;

/// A single-PE runtime (no launcher in a unit test's environment) with the given lane
/// schedule and stack size.
fn runtime(seed: Option<u64>, stack: usize) -> Runtime {
    let mut rt = crate::init().expect("a single-PE init");
    rt.config.exec_seed = seed;
    rt.config.exec_stack_size = stack;
    rt
}

/// The default stack size.
const STACK: usize = crate::config::DEFAULT_EXEC_STACK;

/// `(block, thread, message)` of a `KernelFailed`.
fn failure(result: crate::error::Result<()>) -> ((u32, u32, u32), (u32, u32, u32), String) {
    match result {
        Err(Error::KernelFailed {
            block,
            thread,
            message,
            ..
        }) => (block, thread, message),
        other => panic!("expected KernelFailed, got {other:?}"),
    }
}

/// Threads of a 3-warp block pass values through memory between barriers, under the
/// default order and several seeds: every read sees the write before the barrier.
#[test]
fn barriers_order_memory_under_every_schedule() {
    const N: usize = 80; // a partial third warp
    for seed in [None, Some(1), Some(2), Some(3), Some(42), Some(u64::MAX)] {
        let rt = runtime(seed, STACK);
        let slots: Vec<AtomicU32> = (0..N).map(|_| AtomicU32::new(0)).collect();
        let out: Vec<AtomicU32> = (0..N).map(|_| AtomicU32::new(0)).collect();
        // SAFETY: the kernel touches only `slots` and `out`, which outlive the launch.
        unsafe {
            rt.launch_closure(2, N as u32, || {
                let me = thread_rank() as usize;
                let warp = me / 32 * 32;
                let width = (N - warp).min(32);
                for round in 1..=3u32 {
                    slots[me].store(round * 1000 + me as u32, Ordering::Relaxed);
                    sync_threads();
                    let next = (me + 1) % N;
                    let got = slots[next].load(Ordering::Relaxed);
                    assert_eq!(got, round * 1000 + next as u32, "block barrier");
                    sync_threads();
                    slots[me].store(round, Ordering::Relaxed);
                    sync_warp();
                    let mate = warp + (me - warp + 1) % width;
                    assert_eq!(slots[mate].load(Ordering::Relaxed), round, "warp barrier");
                    sync_warp();
                }
                out[me].fetch_add(1, Ordering::Relaxed);
            })
        }
        .unwrap_or_else(|e| panic!("seed {seed:?}: {e}"));
        assert!(
            out.iter().all(|o| o.load(Ordering::Relaxed) == 2),
            "seed {seed:?}"
        );
        rt.finalize().unwrap();
    }
}

/// The order in which a block's threads leave each barrier, as they record it.
fn interleaving(seed: Option<u64>) -> Vec<u32> {
    let rt = runtime(seed, STACK);
    let order = Mutex::new(Vec::new());
    // SAFETY: the kernel touches only `order`, which outlives the launch.
    unsafe {
        rt.launch_closure(1, 48, || {
            for _ in 0..4 {
                sync_threads();
                order.lock().unwrap().push(thread_rank());
            }
        })
    }
    .unwrap();
    rt.finalize().unwrap();
    order.into_inner().unwrap()
}

/// Thread index order by default; a seed replays its interleaving exactly, and different
/// seeds give different ones.
#[test]
fn seeds_replay_their_interleaving() {
    let index_order: Vec<u32> = (0..4).flat_map(|_| 0..48).collect();
    assert_eq!(interleaving(None), index_order);
    let runs: Vec<Vec<u32>> = (1..=4).map(|s| interleaving(Some(s))).collect();
    for (s, run) in runs.iter().enumerate() {
        assert_eq!(
            *run,
            interleaving(Some(s as u64 + 1)),
            "seed {} replays",
            s + 1
        );
        assert_ne!(*run, index_order, "seed {} shuffles", s + 1);
    }
    assert!(runs.windows(2).all(|w| w[0] != w[1]), "seeds differ");
}

/// A panicking thread fails the launch naming its block, its thread and the schedule;
/// its siblings, waiting at a barrier and in a device wait, unwind.
#[test]
fn a_panic_names_block_thread_and_schedule() {
    for (seed, schedule) in [
        (Some(5), "[lane schedule: SYMMEM_EXEC_SEED=5]"),
        (
            None,
            "[lane schedule: thread index order (SYMMEM_EXEC_SEED unset)]",
        ),
    ] {
        let rt = runtime(seed, STACK);
        let never = AtomicU32::new(0);
        let kernel = || {
            if symmem_device::block_idx().x != 1 {
                return;
            }
            match thread_rank() {
                7 => panic!("deliberate"),
                0 => {
                    // SAFETY: `never` is a live, aligned u32.
                    unsafe { symmem_device::wait_until(never.as_ptr(), Cmp::Ne, 0) };
                }
                _ => sync_threads(),
            }
        };
        // SAFETY: the kernel touches only `never`, which outlives the launch.
        let result = unsafe { rt.launch_closure(3, 64, kernel) };
        let (block, thread, message) = failure(result);
        assert_eq!((block, thread), ((1, 0, 0), (7, 0, 0)));
        assert!(
            message.starts_with("deliberate") && message.ends_with(schedule),
            "{message}"
        );
        rt.finalize().unwrap();
    }
}

/// A barrier some threads skip can never open: the launch fails at once naming a waiting
/// thread, instead of hanging.
#[test]
fn a_skipped_barrier_fails_instead_of_hanging() {
    let rt = runtime(None, STACK);
    // SAFETY: the kernel touches no memory.
    let result = unsafe {
        rt.launch_closure(2, 64, || {
            if symmem_device::block_idx().x == 1 {
                match thread_rank() {
                    0 => sync_threads(),
                    1..32 => sync_warp(),
                    40..64 => {}
                    _ => sync_threads(),
                }
            }
        })
    };
    let (block, thread, message) = failure(result);
    assert_eq!((block, thread), ((1, 0, 0), (0, 0, 0)));
    assert!(
        message.contains("deadlock: this thread waits in sync_threads")
            && message
                .contains("(9 at sync_threads, 31 at sync_warp, 0 in warp intrinsics, 24 exited)"),
        "{message}"
    );
    rt.finalize().unwrap();
}

/// Threads that return count as arrived at their block's and warp's later barriers.
#[test]
fn exited_threads_count_as_arrived() {
    let rt = runtime(Some(9), STACK);
    let passed = AtomicU32::new(0);
    // SAFETY: the kernel touches only `passed`, which outlives the launch.
    unsafe {
        rt.launch_closure(2, 96, || {
            if thread_rank().is_multiple_of(3) {
                return;
            }
            sync_warp();
            sync_threads();
            sync_threads();
            passed.fetch_add(1, Ordering::Relaxed);
        })
    }
    .unwrap();
    assert_eq!(passed.load(Ordering::Relaxed), 2 * 64);
    rt.finalize().unwrap();
}

/// Recurses with a 4 KiB frame.
fn deep(n: u64) -> u64 {
    let frame = black_box([n; 512]);
    if n == 0 {
        0
    } else {
        deep(n - 1).wrapping_add(frame[7])
    }
}

/// A thread that overflows its stack fails the launch as a stack overflow naming its
/// block and thread; the executor (and the stack, back in the pool) works afterwards.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn a_stack_overflow_fails_the_launch_as_such() {
    let rt = runtime(None, 64 << 10);
    // SAFETY: the kernel touches no memory but its stack.
    let result = unsafe {
        rt.launch_closure(2, 32, || {
            let depth = if symmem_device::block_idx().x == 1 && thread_rank() == 3 {
                1 << 20
            } else {
                4
            };
            black_box(deep(black_box(depth)));
            sync_threads();
        })
    };
    let (block, thread, message) = failure(result);
    assert_eq!((block, thread), ((1, 0, 0), (3, 0, 0)));
    assert!(
        message.starts_with(
            "stack overflow: the kernel thread ran past the end of its 65536 byte stack"
        ),
        "{message}"
    );
    let ran = AtomicU32::new(0);
    // SAFETY: the kernel touches only `ran`, which outlives the launch.
    unsafe {
        rt.launch_closure(2, 32, || {
            black_box(deep(black_box(2)));
            ran.fetch_add(1, Ordering::Relaxed);
        })
    }
    .unwrap();
    assert_eq!(ran.load(Ordering::Relaxed), 64);
    rt.finalize().unwrap();
}

/// A cooperative launch runs blocks that wait for each other through device waits,
/// whichever worker each block is on.
#[test]
fn cooperative_blocks_wait_for_each_other() {
    for seed in [None, Some(3)] {
        let rt = runtime(seed, STACK);
        let flags: Vec<AtomicU32> = (0..8).map(|_| AtomicU32::new(0)).collect();
        let kernel = || {
            let b = symmem_device::block_idx().x as usize;
            if thread_rank() == 0 {
                if b > 0 {
                    // SAFETY: the flags are live, aligned u32s.
                    unsafe { symmem_device::wait_until(flags[b - 1].as_ptr(), Cmp::Eq, 1) };
                }
                flags[b].store(1, Ordering::Release);
            }
            sync_threads();
        };
        // SAFETY: the kernel touches only `flags`, which outlive the launch.
        unsafe { rt.launch_closure_cooperative(8, 64, kernel) }.unwrap();
        assert!(flags.iter().all(|f| f.load(Ordering::Relaxed) == 1));
        rt.finalize().unwrap();
    }
}

/// A device wait that outlasts `WAIT_RECORD_AFTER_MS` publishes itself in the PE's wait
/// record (two threads wait; one owns the record), refreshes the value it sees, and
/// clears and releases the record when the wait ends.
#[test]
fn a_slow_device_wait_publishes_its_record_and_clears_it() {
    use std::cell::UnsafeCell;
    use std::sync::atomic::AtomicU64;
    use std::time::{Duration, Instant};
    use symmem_device::state::{wait_op, WaitRecord, ANY_PE, WAIT_RECORD_AFTER_MS};

    use crate::device_waits::read;

    let mut rt = runtime(None, STACK);
    let record: Box<UnsafeCell<WaitRecord>> =
        Box::new(UnsafeCell::new(bytemuck::Zeroable::zeroed()));
    let at = record.get() as usize;
    rt.device_state.wait_record = at as u64;
    // SAFETY (both reads): the record outlives the launch; the kernel writes it only
    // through atomics.
    let read_record = || unsafe { read(at as *const WaitRecord) }.expect("a stable record");
    let word = AtomicU64::new(0);
    let published = std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            let deadline = Instant::now() + Duration::from_secs(30);
            let first = loop {
                let r = read_record();
                if r.wait != 0 {
                    break r;
                }
                assert!(Instant::now() < deadline, "the wait never published itself");
                std::thread::sleep(Duration::from_millis(1));
            };
            // The owner refreshes its time while it waits.
            while read_record().now_ns == first.now_ns {
                assert!(Instant::now() < deadline, "the record is never refreshed");
                std::thread::sleep(Duration::from_millis(1));
            }
            word.store(7, Ordering::Release);
            first
        });
        // SAFETY: the kernel reads only `word`, which outlives the launch.
        unsafe {
            rt.launch_closure(1, 2, || {
                symmem_device::wait_until(word.as_ptr(), Cmp::Eq, 7);
            })
        }
        .unwrap();
        watcher.join().unwrap()
    });
    assert_eq!(published.owner, 1);
    assert_eq!(published.seq % 2, 0);
    assert_eq!(
        published.wait,
        wait_op::WAIT_UNTIL as u64 | (Cmp::Eq as u64) << 32
    );
    assert_eq!(published.pe, ANY_PE as u64);
    assert_eq!(published.addr, word.as_ptr() as u64);
    assert_eq!((published.wanted, published.seen), (7, 0));
    assert!(published.now_ns - published.since_ns >= WAIT_RECORD_AFTER_MS * 1_000_000);
    let after = read_record();
    assert_eq!((after.owner, after.wait), (0, 0), "{after:?}");
    assert!(after.seq > published.seq && after.seq % 2 == 0, "{after:?}");
    rt.finalize().unwrap();
}
