//! Kernel threads as fibers: stackful coroutines ([`corosensei`]) that a worker OS thread
//! resumes one after another. A fiber gives way only at switch points (a barrier, a
//! device wait), with [`suspend`], saying why; the worker decides whom to resume next.
//!
//! Stacks come from a process-wide pool: `mmap`ing a fresh stack (with its guard page)
//! for each of up to 1024 threads of each block would cost more than the kernel.

use std::cell::Cell;
use std::sync::Mutex;

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};

use super::block::Wait;
use super::overflow;

/// Why a fiber gave way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Suspend {
    /// It arrived at a barrier or warp exchange, `at`; `closed` holds the generation to
    /// wait out if it did not open (the worker resumes it once it opens).
    Arrived {
        /// The barrier or exchange.
        at: Wait,
        /// `None` if this arrival opened it, else its generation.
        closed: Option<u64>,
    },
    /// A device wait found its condition false; `first` on the wait's first round.
    Waiting {
        /// The wait's first round: the fiber did something since it last gave way.
        first: bool,
    },
}

impl Suspend {
    /// Whether the fiber did something since it was resumed (the worker need not back
    /// off).
    pub(super) fn made_progress(self) -> bool {
        !matches!(self, Suspend::Waiting { first: false })
    }
}

/// How a fiber ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum End {
    /// Its body returned (or unwound, which the body catches).
    Returned,
    /// It ran past the end of its stack; the stack was discarded without unwinding.
    Overflowed,
}

/// The coroutine of a fiber: resumed with the worker's "back off slowly" flag, it yields
/// why it gave way and returns how it ended.
type Co = Coroutine<bool, Suspend, End, DefaultStack>;

std::thread_local! {
    /// The running fiber's yielder. Each fiber stores its own when it starts and again
    /// each time it is resumed, so while a fiber runs this is always its own.
    static YIELDER: Cell<*const Yielder<bool, Suspend>> = const { Cell::new(std::ptr::null()) };
}

/// One kernel thread's fiber.
pub(super) struct Fiber {
    co: Co,
}

impl Fiber {
    /// A fiber that will run `body` on `stack` when first resumed.
    ///
    /// # Safety
    /// Whatever `body` borrows must stay valid until the fiber has returned or is dropped.
    pub(super) unsafe fn new(stack: DefaultStack, body: impl FnOnce()) -> Fiber {
        // SAFETY: forwarded from the caller.
        let co = unsafe {
            Coroutine::with_stack_unchecked(stack, move |yielder: &Yielder<bool, Suspend>, _| {
                YIELDER.with(|y| y.set(yielder));
                body();
                YIELDER.with(|y| y.set(std::ptr::null()));
                End::Returned
            })
        };
        Fiber { co }
    }

    /// Runs the fiber until it gives way or ends; `slow` tells a waiting fiber that every
    /// fiber of this OS thread has been waiting a while (see `Executor::pause`).
    pub(super) fn resume(&mut self, slow: bool) -> CoroutineResult<Suspend, End> {
        let _armed = overflow::arm(self.co.trap_handler());
        self.co.resume(slow)
    }

    /// The fiber's stack, once it has ended, for the next fiber.
    pub(super) fn into_stack(self) -> DefaultStack {
        self.co.into_stack()
    }
}

/// Suspends the running fiber, telling its worker `why`; returns the worker's "back off
/// slowly" flag when it is resumed.
///
/// # Panics
/// Outside a fiber of the executor.
pub(super) fn suspend(why: Suspend) -> bool {
    let yielder = YIELDER.with(Cell::get);
    assert!(
        !yielder.is_null(),
        "a kernel thread switch point was reached outside the CPU executor's fibers"
    );
    // SAFETY: only a running fiber sets YIELDER (see its doc), to its own yielder, which
    // lives as long as that fiber; so this is the calling fiber's yielder.
    let slow = unsafe { &*yielder }.suspend(why);
    YIELDER.with(|y| y.set(yielder));
    slow
}

/// Stacks of ended fibers, by size. Process-wide, since a stack is plain memory that any
/// runtime's launch can reuse; kept by size because `SYMMEM_EXEC_STACK_SIZE` is per
/// runtime, and two runtimes of one process launching in turns with different sizes must
/// not keep emptying each other's.
struct Pool {
    /// `(size, stacks of that size)`, a few entries at most.
    by_size: Vec<(usize, Vec<DefaultStack>)>,
}

/// Most stacks kept in the pool, of all sizes together: enough for the largest cooperative
/// launch.
const POOL_MAX: usize = super::MAX_COOPERATIVE_THREADS as usize;

impl Pool {
    /// A pooled stack of `size` bytes, if there is one.
    fn take(&mut self, size: usize) -> Option<DefaultStack> {
        self.by_size
            .iter_mut()
            .find(|(s, _)| *s == size)
            .and_then(|(_, stacks)| stacks.pop())
    }

    /// Keeps `stacks` (each of `size` bytes) up to [`POOL_MAX`] in all: stacks of other
    /// sizes make room first (the newest launch's size is the likeliest next), then the
    /// surplus is freed.
    fn put(&mut self, size: usize, stacks: impl IntoIterator<Item = DefaultStack>) {
        let i = match self.by_size.iter().position(|(s, _)| *s == size) {
            Some(i) => i,
            None => {
                self.by_size.push((size, Vec::new()));
                self.by_size.len() - 1
            }
        };
        let mut mine = std::mem::take(&mut self.by_size[i].1);
        let room = POOL_MAX.saturating_sub(mine.len());
        mine.extend(stacks.into_iter().take(room));
        let mut others: usize = self.by_size.iter().map(|(_, v)| v.len()).sum();
        for (_, v) in &mut self.by_size {
            let over = (others + mine.len()).saturating_sub(POOL_MAX).min(v.len());
            v.truncate(v.len() - over);
            others -= over;
        }
        self.by_size[i].1 = mine;
        self.by_size.retain(|(_, v)| !v.is_empty());
    }

    /// How many stacks of `size` bytes are kept.
    #[cfg(test)]
    fn count(&self, size: usize) -> usize {
        self.by_size
            .iter()
            .find(|(s, _)| *s == size)
            .map_or(0, |(_, v)| v.len())
    }
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    by_size: Vec::new(),
});

/// A stack of `size` bytes (plus a guard page), from the pool if it has one.
pub(super) fn take_stack(size: usize) -> std::io::Result<DefaultStack> {
    let pooled = POOL.lock().unwrap_or_else(|p| p.into_inner()).take(size);
    match pooled {
        Some(stack) => Ok(stack),
        None => DefaultStack::new(size),
    }
}

/// Returns the stacks of ended fibers (each of `size` bytes) to the pool.
pub(super) fn give_back(size: usize, stacks: impl IntoIterator<Item = DefaultStack>) {
    POOL.lock()
        .unwrap_or_else(|p| p.into_inner())
        .put(size, stacks);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two runtimes' launches with different stack sizes, in turns, keep both sizes'
    /// stacks; past [`POOL_MAX`] the other size gives way.
    #[test]
    fn the_pool_keeps_each_size_and_caps_the_total() {
        let (small, large) = (64 << 10, 128 << 10);
        let stacks = |size, n| (0..n).map(move |_| DefaultStack::new(size).unwrap());
        let mut pool = Pool {
            by_size: Vec::new(),
        };
        pool.put(small, stacks(small, 3));
        pool.put(large, stacks(large, 2));
        assert_eq!((pool.count(small), pool.count(large)), (3, 2));
        assert!(pool.take(small).is_some());
        assert_eq!(pool.count(small), 2);
        pool.put(large, stacks(large, POOL_MAX - 3));
        assert_eq!((pool.count(small), pool.count(large)), (1, POOL_MAX - 1));
        pool.put(large, stacks(large, 5));
        assert_eq!((pool.count(small), pool.count(large)), (0, POOL_MAX));
        assert!(pool.take(small).is_none());
    }
}
