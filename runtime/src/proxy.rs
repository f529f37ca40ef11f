//! The proxy channel: device-initiated requests to PEs without a P2P path go through a
//! lock-free ring ([`symmem_device::proxy`]) to this PE's proxy thread, which issues them
//! on the remote [`Transport`].
//!
//! # The thread
//! It takes requests in ticket order and issues each one: puts and gets with the payload
//! at the request's `local` address (or inline, `local == 0`, for `p`/`g` of up to 8 bytes),
//! AMOs and signals as they are, Fence as `transport.fence()`, Quiet as `transport.quiet()`
//! before the ring's `quieted` counter advances. While the ring is empty it backs off with
//! the shared [`Backoff`] (spin, yield, sleep: the machines here have 2 cores for 4 PEs),
//! calling `transport.progress()` only while it spins. When the transport fails, the thread records
//! the error (naming the PE and the operation), marks the ring failed so every waiting and
//! later device operation fails instead of hanging, and stops.
//!
//! # Memory
//! On CPU PEs the ring is host memory of this process and `local` addresses are host
//! addresses the proxy reads and writes directly. GPU PEs are not served yet (their
//! `DeviceState::proxy` stays 0, so device operations to remote PEs fail visibly as
//! unreachable): they need the ring in `cuMemHostAlloc(DEVICEMAP)` memory and the payloads
//! staged through a non-blocking stream, which cannot be run without a GPU.

use std::alloc::Layout;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use symmem_device::proxy::{ring_bytes, Failed, Header, Ring};
use symmem_device::{Opcode, Request};
use symmem_sync::Backoff;

use crate::error::{Error, Result};
use crate::transport::{Io, Transport};

/// The ring's memory: zeroed, 128-byte aligned host memory, freed on drop.
struct RingMemory {
    base: *mut u8,
    layout: Layout,
}

// SAFETY: the memory is only accessed through `Ring`, whose words are atomics.
unsafe impl Send for RingMemory {}
// SAFETY: as above.
unsafe impl Sync for RingMemory {}

impl RingMemory {
    fn new(slots: usize) -> Self {
        let layout = Layout::from_size_align(ring_bytes(slots), 128).expect("ring layout");
        // SAFETY: the layout has a nonzero size.
        let base = unsafe { std::alloc::alloc_zeroed(layout) };
        if base.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // The header's `capacity` word; the rest starts zeroed: lap 0, empty.
        let at = std::mem::offset_of!(Header, capacity);
        // SAFETY: `base` is aligned and holds the header; no ring exists yet.
        unsafe { base.add(at).cast::<u64>().write(slots as u64) };
        RingMemory { base, layout }
    }

    fn ring(&self) -> Ring<'_> {
        // SAFETY: the memory is a zeroed ring with its capacity, alive as long as `self`.
        unsafe { Ring::from_raw(self.base) }
    }
}

impl Drop for RingMemory {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; the proxy thread has been joined.
        unsafe { std::alloc::dealloc(self.base, self.layout) }
    }
}

/// One PE's proxy channel: the ring and the thread that drains it.
pub(crate) struct ProxyChannel {
    memory: Arc<RingMemory>,
    stop: Arc<AtomicBool>,
    error: Arc<Mutex<Option<String>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl ProxyChannel {
    /// Starts the channel of PE `me` with `slots` slots, issuing on `transport`.
    pub(crate) fn start(me: usize, slots: usize, transport: Arc<dyn Transport>) -> Result<Self> {
        let memory = Arc::new(RingMemory::new(slots));
        let stop = Arc::new(AtomicBool::new(false));
        let error = Arc::new(Mutex::new(None));
        let thread = {
            let (memory, stop, error) = (memory.clone(), stop.clone(), error.clone());
            std::thread::Builder::new()
                .name(format!("symmem-proxy-{me}"))
                .spawn(move || run(me, memory.ring(), &*transport, &stop, &error))
                .map_err(|e| Error::Io {
                    context: format!("PE {me}: starting the proxy thread"),
                    source: e,
                })?
        };
        Ok(ProxyChannel {
            memory,
            stop,
            error,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// The ring's address, for `DeviceState::proxy`.
    pub(crate) fn address(&self) -> u64 {
        self.memory.base as u64
    }

    /// Why the channel failed, if it did: the transport's error, naming the PE and op.
    pub(crate) fn failure(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Waits until the proxy thread has issued every request already in the ring, so a
    /// host `quiet` after a kernel also completes the kernel's `_nbi` requests. Fails with
    /// the channel's error, or after `timeout` (`SYMMEM_TIMEOUT`; a launch stopped while a
    /// thread waited for a slot leaves a ticket that is never published).
    pub(crate) fn drain(
        &self,
        me: usize,
        transport: &'static str,
        timeout: Option<Duration>,
    ) -> Result<()> {
        let ring = self.memory.ring();
        let h = ring.header();
        let start = Instant::now();
        let mut backoff = Backoff::new();
        let error = |pe: usize, detail: String| Error::Transport {
            transport,
            op: "quiet (device requests in the proxy ring)",
            me,
            pe,
            detail,
        };
        loop {
            if let Some(f) = ring.failed() {
                return Err(error(f.pe as usize, self.failure().unwrap_or_default()));
            }
            let (head, reserve) = (
                h.head.load(Ordering::Acquire),
                h.reserve.load(Ordering::Acquire),
            );
            if head >= reserve {
                return Ok(());
            }
            if timeout.is_some_and(|t| start.elapsed() > t) {
                let detail = format!(
                    "the proxy thread issued requests up to ticket {head} of {reserve} within SYMMEM_TIMEOUT ({:?})",
                    start.elapsed()
                );
                return Err(error(me, detail));
            }
            backoff.snooze();
        }
    }

    /// Stops the thread once the requests already in the ring are issued, and joins it.
    /// Idempotent. Called before the transport shuts down.
    pub(crate) fn shutdown(&self) {
        self.stop.store(true, Ordering::Release);
        let handle = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = handle {
            // A panic in the proxy thread was already recorded as its failure; a join
            // error has nothing more to say, and shutdown must not panic (it runs in drop).
            let _ = h.join();
        }
    }
}

impl Drop for ProxyChannel {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The proxy thread: drains `ring` until `stop` is set and the ring is empty.
fn run(
    me: usize,
    ring: Ring<'_>,
    transport: &dyn Transport,
    stop: &AtomicBool,
    error: &Mutex<Option<String>>,
) {
    let mut idle = Backoff::new();
    loop {
        let Some((req, waited)) = ring.peek() else {
            if stop.load(Ordering::Acquire) {
                return;
            }
            // Serve the transport while spinning, as waits do (progress errors, a dead
            // peer, surface on the next request to it). Once idle long enough to sleep,
            // leave the sockets to the transport's own thread: a sleeping caller of
            // progress would hold it off and delay every peer's request by the sleep.
            if !idle.is_slow() {
                let _ = transport.progress();
            }
            idle.snooze();
            continue;
        };
        idle = Backoff::new();
        match issue(transport, &req) {
            Ok(result) => {
                if !waited {
                    transport.nbi_issued(&req);
                }
                ring.complete(&req, waited, result)
            }
            Err(e) => {
                let op = Opcode::from_u8(req.opcode).map_or("invalid request", Opcode::name);
                let what = match Opcode::from_u8(req.opcode) {
                    Some(Opcode::Fence | Opcode::Quiet) => String::new(),
                    _ => format!(" to PE {}", req.pe),
                };
                let msg = format!(
                    "PE {me}'s proxy thread: device-initiated {op}{what} failed on the {} transport: {e}",
                    transport.name()
                );
                tracing::error!("{msg}");
                *error.lock().unwrap_or_else(|p| p.into_inner()) = Some(msg);
                ring.fail(Failed {
                    pe: req.pe,
                    opcode: req.opcode,
                });
                return;
            }
        }
    }
}

/// Issues one request on the transport; returns the fetched value (inline `g`, fetching
/// AMOs), else 0.
fn issue(transport: &dyn Transport, req: &Request) -> Result<u64> {
    let len = req.len as usize;
    match Opcode::from_u8(req.opcode) {
        Some(Opcode::Put | Opcode::PutSignal) if req.local == 0 => {
            let bytes = req.value.to_le_bytes();
            transport.submit(req, Io::Src(&bytes[..len.min(8)]))
        }
        Some(Opcode::Put | Opcode::PutSignal) => {
            // SAFETY: the device operation guarantees `local` holds `len` readable bytes
            // until the request completes (blocking) or the next quiet (nbi).
            let src = unsafe { std::slice::from_raw_parts(req.local as *const u8, len) };
            transport.submit(req, Io::Src(src))
        }
        Some(Opcode::Get) if req.local == 0 => {
            let mut bytes = [0u8; 8];
            transport.submit(req, Io::Dst(&mut bytes[..len.min(8)]))?;
            Ok(u64::from_le_bytes(bytes))
        }
        Some(Opcode::Get) => {
            // SAFETY: the device operation guarantees `local` holds `len` writable bytes
            // that nothing else accesses until the request completes.
            let dst = unsafe { std::slice::from_raw_parts_mut(req.local as *mut u8, len) };
            transport.submit(req, Io::Dst(dst))?;
            Ok(0)
        }
        Some(Opcode::Amo | Opcode::Signal) => transport.submit(req, Io::None),
        Some(Opcode::Fence) => transport.fence().map(|()| 0),
        Some(Opcode::Quiet) => transport.quiet().map(|()| 0),
        None => Err(Error::InvalidArgument {
            op: "proxy",
            reason: format!("invalid opcode {} in the proxy ring", req.opcode),
        }),
    }
}
