//! Stack overflows of kernel threads, reported as such.
//!
//! Each fiber's stack ends in a guard page (corosensei's `DefaultStack`), so running past
//! it raises SIGSEGV at an address inside the stack's own mapping, which nothing else can
//! fault on (the rest of the mapping is read-write). A SIGSEGV handler, on the thread's
//! alternate signal stack, checks that the fault hit the running fiber's stack; if so it
//! uses corosensei's trap handler to make the fiber return [`End::Overflowed`]: its frames
//! are discarded without running destructors (whatever they owned leaks, as when a GPU
//! thread traps), and the executor fails the launch with a stack-overflow error naming
//! the block and thread. Any other SIGSEGV goes to the handler that was there before
//! (Rust's own reports overflows of OS thread stacks).
//!
//! Only on x86-64 Linux, where the handler knows the register layout; elsewhere an
//! overflowing fiber ends the process with SIGSEGV.

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub(super) use imp::{arm, prepare_thread};

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
pub(super) use fallback::{arm, prepare_thread};

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod imp {
    use std::cell::Cell;
    use std::sync::OnceLock;

    use corosensei::trap::CoroutineTrapHandler;

    use super::super::fiber::End;

    std::thread_local! {
        /// The trap handler of the fiber this thread is running, while it runs.
        static ARMED: Cell<Option<CoroutineTrapHandler<End>>> = const { Cell::new(None) };
        /// An alternate signal stack this module installed for this thread, if it had
        /// none (threads not started by Rust's std).
        static ALT_STACK: AltStack = const { AltStack(Cell::new(None)) };
    }

    /// The SIGSEGV disposition before ours, for faults that are not fiber overflows.
    static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

    /// Bytes of an alternate signal stack installed here.
    const ALT_STACK_SIZE: usize = 64 << 10;

    /// Keeps the fiber's trap handler armed while it runs.
    pub(in super::super) struct Armed(());

    impl Drop for Armed {
        fn drop(&mut self) {
            ARMED.with(|a| a.set(None));
        }
    }

    /// Arms `handler` for the fiber about to be resumed on this thread.
    #[inline]
    pub(in super::super) fn arm(handler: CoroutineTrapHandler<End>) -> Armed {
        ARMED.with(|a| a.set(Some(handler)));
        Armed(())
    }

    /// Installs the SIGSEGV handler (once per process) and makes sure this thread has an
    /// alternate signal stack to run it on; call on each thread before it runs fibers.
    pub(in super::super) fn prepare_thread() {
        PREVIOUS.get_or_init(install);
        ALT_STACK.with(AltStack::ensure);
    }

    /// Installs [`on_fault`]; returns the disposition it replaces.
    fn install() -> libc::sigaction {
        // SAFETY: plain sigaction calls with zero-initialised structs; `on_fault` has the
        // SA_SIGINFO signature.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_fault as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            let mut previous: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGSEGV, &action, &mut previous) != 0 {
                tracing::warn!(
                    "cannot install the SIGSEGV handler that reports kernel stack overflows: {}",
                    std::io::Error::last_os_error()
                );
            }
            previous
        }
    }

    /// An alternate signal stack owned by this module, freed when its thread ends.
    struct AltStack(Cell<Option<(*mut libc::c_void, usize)>>);

    impl AltStack {
        /// Installs an alternate signal stack unless the thread has one.
        fn ensure(&self) {
            // SAFETY: sigaltstack with a valid out-pointer; mmap of fresh anonymous memory,
            // handed to the kernel only after it succeeded.
            unsafe {
                let mut current: libc::stack_t = std::mem::zeroed();
                if libc::sigaltstack(std::ptr::null(), &mut current) != 0
                    || current.ss_flags & libc::SS_DISABLE == 0
                {
                    return;
                }
                let mem = libc::mmap(
                    std::ptr::null_mut(),
                    ALT_STACK_SIZE,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                if mem == libc::MAP_FAILED {
                    return;
                }
                let stack = libc::stack_t {
                    ss_sp: mem,
                    ss_flags: 0,
                    ss_size: ALT_STACK_SIZE,
                };
                if libc::sigaltstack(&stack, std::ptr::null_mut()) == 0 {
                    self.0.set(Some((mem, ALT_STACK_SIZE)));
                } else {
                    libc::munmap(mem, ALT_STACK_SIZE);
                }
            }
        }
    }

    impl Drop for AltStack {
        fn drop(&mut self) {
            if let Some((mem, size)) = self.0.get() {
                // SAFETY: the stack was installed by `ensure` on this (ending) thread;
                // disable it before unmapping it.
                unsafe {
                    let off = libc::stack_t {
                        ss_sp: std::ptr::null_mut(),
                        ss_flags: libc::SS_DISABLE,
                        ss_size: 0,
                    };
                    libc::sigaltstack(&off, std::ptr::null_mut());
                    libc::munmap(mem, size);
                }
            }
        }
    }

    /// The SIGSEGV handler: turns a fault in the running fiber's guard page into the
    /// fiber returning [`End::Overflowed`]; passes anything else on.
    extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, uctx: *mut libc::c_void) {
        // `try_with`: the thread-local may already be gone on an ending thread.
        let armed = ARMED.try_with(Cell::get).ok().flatten();
        // SAFETY: the kernel passes a valid siginfo and ucontext to an SA_SIGINFO handler.
        let (addr, regs) = unsafe {
            (
                (*info).si_addr() as usize,
                &mut (*uctx.cast::<libc::ucontext_t>()).uc_mcontext.gregs,
            )
        };
        let sp = regs[libc::REG_RSP as usize] as usize;
        if let Some(handler) = armed {
            // A fault address inside the stack's mapping can only be its guard page.
            if handler.stack_ptr_in_bounds(addr) && handler.stack_ptr_in_bounds(sp) {
                // SAFETY: the fault happened on this fiber's stack (checked above), and we
                // update the interrupted context's registers as corosensei requires. The
                // fiber's frames are abandoned without destructors (see the module doc).
                let to = unsafe { handler.setup_trap_handler(|| End::Overflowed) };
                regs[libc::REG_RIP as usize] = to.rip as i64;
                regs[libc::REG_RSP as usize] = to.rsp as i64;
                regs[libc::REG_RBP as usize] = to.rbp as i64;
                regs[libc::REG_RDI as usize] = to.rdi as i64;
                regs[libc::REG_RSI as usize] = to.rsi as i64;
                return;
            }
        }
        pass_on(sig, info, uctx);
    }

    /// Hands a fault that is not a fiber overflow to the previous disposition.
    fn pass_on(sig: libc::c_int, info: *mut libc::siginfo_t, uctx: *mut libc::c_void) {
        let previous = PREVIOUS.get().map(|p| (p.sa_sigaction, p.sa_flags));
        match previous {
            Some((f, flags)) if f != libc::SIG_DFL && f != libc::SIG_IGN => {
                if flags & libc::SA_SIGINFO != 0 {
                    // SAFETY: an SA_SIGINFO disposition holds a handler of this type.
                    let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                        unsafe { std::mem::transmute(f) };
                    f(sig, info, uctx);
                } else {
                    // SAFETY: a plain disposition holds a handler of this type.
                    let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(f) };
                    f(sig);
                }
            }
            _ => {
                // Default action: restore it and return, so the fault happens again and
                // kills the process as it would have without this handler.
                // SAFETY: plain sigaction call (async-signal-safe).
                unsafe {
                    let mut dfl: libc::sigaction = std::mem::zeroed();
                    dfl.sa_sigaction = libc::SIG_DFL;
                    libc::sigaction(libc::SIGSEGV, &dfl, std::ptr::null_mut());
                }
            }
        }
    }
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
mod fallback {
    use corosensei::trap::CoroutineTrapHandler;

    use super::super::fiber::End;

    /// Nothing is armed here: overflows end the process (see the module doc).
    pub(in super::super) struct Armed;

    /// Nothing to arm: overflows end the process (see the module doc).
    #[inline]
    pub(in super::super) fn arm(_handler: CoroutineTrapHandler<End>) -> Armed {
        Armed
    }

    /// Nothing to prepare (see the module doc).
    pub(in super::super) fn prepare_thread() {}
}
