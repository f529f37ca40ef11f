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

/// Stacks of ended fibers, all of [`Pool::size`] bytes.
struct Pool {
    size: usize,
    stacks: Vec<DefaultStack>,
}

/// Most stacks kept in the pool: enough for the largest cooperative launch.
const POOL_MAX: usize = super::MAX_COOPERATIVE_THREADS as usize;

static POOL: Mutex<Pool> = Mutex::new(Pool {
    size: 0,
    stacks: Vec::new(),
});

/// A stack of `size` bytes (plus a guard page), from the pool if it has one.
pub(super) fn take_stack(size: usize) -> std::io::Result<DefaultStack> {
    let pooled = {
        let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
        if pool.size == size {
            pool.stacks.pop()
        } else {
            None
        }
    };
    match pooled {
        Some(stack) => Ok(stack),
        None => DefaultStack::new(size),
    }
}

/// Returns the stacks of ended fibers (each of `size` bytes) to the pool.
pub(super) fn give_back(size: usize, stacks: impl IntoIterator<Item = DefaultStack>) {
    let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
    if pool.size != size {
        // SYMMEM_EXEC_STACK_SIZE is per runtime; the newest size wins.
        pool.stacks.clear();
        pool.size = size;
    }
    let room = POOL_MAX.saturating_sub(pool.stacks.len());
    pool.stacks.extend(stacks.into_iter().take(room));
}
