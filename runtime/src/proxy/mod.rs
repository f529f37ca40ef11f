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
//! calling `transport.progress()` only while it spins. When the transport or a staging copy
//! fails, the thread records the error (naming this PE, the operation, its target PE and
//! size, and what failed), marks the ring failed so every waiting and later device
//! operation fails instead of hanging, and stops.
//!
//! # Memory
//! The ring lives in [`RingMemory`]: host memory both sides reach. On a CPU PE that is
//! ordinary memory of this process ([`HostMemory`]). On a GPU PE it is
//! `cuMemHostAlloc(DEVICEMAP | PORTABLE)` memory (`cuda::MappedHost`): the kernels see it at
//! the address from `cuMemHostGetDevicePointer` (that is `DeviceState::proxy`), the proxy
//! thread at the host address. Mapped pinned memory is coherent at system scope: the
//! producers publish with `st.release.sys` and wait with `ld.acquire.sys`, and this thread
//! uses acquire loads and release stores. Only the producers (threads of this PE's GPU)
//! take tickets, with a GPU-scope RMW (`symmem_device::proxy`).
//!
//! A request's payload is at its `local` address, in host memory on a CPU PE and in GPU
//! memory on a GPU PE, where the thread stages it through a pinned buffer in chunks
//! ([`payload`]).

mod payload;

use std::alloc::Layout;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use symmem_device::proxy::{ring_bytes, Failed, Header, Ring};
use symmem_device::{Opcode, Request};
use symmem_sync::Backoff;

use crate::counters::ProxyStats;
use crate::error::{Error, Result};
use crate::transport::{Io, Transport};

use payload::Failure;
pub(crate) use payload::Payloads;
#[cfg(feature = "cuda")]
pub(crate) use payload::{Staging, STAGING_BYTES};

/// Memory a ring lives in: at least [`ring_bytes`] of the ring's capacity, zeroed,
/// 128-byte aligned, reachable by the proxy thread at [`RingMemory::host`] and by the
/// producers at [`RingMemory::device`], for as long as the value lives.
pub(crate) trait RingMemory: Send + Sync {
    /// The proxy thread's (this process's) address of the memory.
    fn host(&self) -> *mut u8;
    /// The producers' address of the memory: `DeviceState::proxy`.
    fn device(&self) -> u64;
}

/// A CPU PE's ring memory: zeroed, 128-byte aligned host memory, freed on drop.
pub(crate) struct HostMemory {
    base: *mut u8,
    layout: Layout,
}

// SAFETY: the memory is only accessed through `Ring`, whose words are atomics.
unsafe impl Send for HostMemory {}
// SAFETY: as above.
unsafe impl Sync for HostMemory {}

impl HostMemory {
    /// Memory for a ring of `slots` slots.
    pub(crate) fn new(slots: usize) -> Self {
        let layout = Layout::from_size_align(ring_bytes(slots), 128).expect("ring layout");
        // SAFETY: the layout has a nonzero size.
        let base = unsafe { std::alloc::alloc_zeroed(layout) };
        if base.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        HostMemory { base, layout }
    }
}

impl RingMemory for HostMemory {
    fn host(&self) -> *mut u8 {
        self.base
    }

    fn device(&self) -> u64 {
        self.base as u64
    }
}

impl Drop for HostMemory {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; the proxy thread has been joined.
        unsafe { std::alloc::dealloc(self.base, self.layout) }
    }
}

/// Writes the header's `capacity` word of a ring in zeroed `memory`; the rest, zero, is
/// an empty ring of lap 0.
fn init_ring(memory: &dyn RingMemory, slots: usize) {
    let at = std::mem::offset_of!(Header, capacity);
    // SAFETY: the memory is aligned and holds the header; no ring exists yet.
    unsafe { memory.host().add(at).cast::<u64>().write(slots as u64) };
}

/// One PE's proxy channel: the ring and the thread that drains it.
pub(crate) struct ProxyChannel {
    memory: Arc<dyn RingMemory>,
    stop: Arc<AtomicBool>,
    error: Arc<Mutex<Option<String>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// What the thread took off the ring, and the ring's high-water mark.
    stats: Arc<ProxyStats>,
}

impl ProxyChannel {
    /// Starts the channel of PE `me` with a ring of `slots` slots in `memory` (zeroed,
    /// [`ring_bytes`]`(slots)` bytes), issuing on `transport` with the payloads where
    /// `payloads` says they live.
    pub(crate) fn start(
        me: usize,
        slots: usize,
        memory: Arc<dyn RingMemory>,
        payloads: Payloads,
        transport: Arc<dyn Transport>,
    ) -> Result<Self> {
        init_ring(&*memory, slots);
        let stop = Arc::new(AtomicBool::new(false));
        let error = Arc::new(Mutex::new(None));
        let stats = Arc::new(ProxyStats::default());
        let thread = {
            let (memory, stop, error) = (memory.clone(), stop.clone(), error.clone());
            let stats = stats.clone();
            std::thread::Builder::new()
                .name(format!("symmem-proxy-{me}"))
                .spawn(move || {
                    // SAFETY: initialized above; `memory` lives as long as this thread.
                    let ring = unsafe { Ring::from_raw(memory.host()) };
                    run(me, ring, payloads, &*transport, &stop, &error, &stats)
                })
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
            stats,
        })
    }

    /// The channel's counters (for `Runtime::counters`).
    pub(crate) fn stats(&self) -> &ProxyStats {
        &self.stats
    }

    /// The ring's address as the producers see it, for `DeviceState::proxy`.
    pub(crate) fn address(&self) -> u64 {
        self.memory.device()
    }

    fn ring(&self) -> Ring<'_> {
        // SAFETY: initialized by `start`; alive as long as `self`.
        unsafe { Ring::from_raw(self.memory.host()) }
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
        let ring = self.ring();
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
    mut payloads: Payloads,
    transport: &dyn Transport,
    stop: &AtomicBool,
    error: &Mutex<Option<String>>,
    stats: &ProxyStats,
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
        stats.took(&req, ring.header());
        match issue(transport, &mut payloads, &req) {
            Ok(result) => {
                if !waited {
                    transport.nbi_issued(&req);
                }
                ring.complete(&req, waited, result)
            }
            Err(f) => {
                let msg = describe(me, &req, transport.name(), &f);
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

/// The channel's error for a request whose issue failed: this PE, the operation, its
/// target PE and size, and what failed.
fn describe(me: usize, req: &Request, transport: &str, f: &Failure) -> String {
    let op = Opcode::from_u8(req.opcode).map_or("invalid request", Opcode::name);
    let what = match Opcode::from_u8(req.opcode) {
        Some(Opcode::Fence | Opcode::Quiet) => String::new(),
        Some(Opcode::Put | Opcode::PutSignal | Opcode::Get) => {
            format!(" of {} bytes to PE {}", req.len, req.pe)
        }
        _ => format!(" to PE {}", req.pe),
    };
    match f {
        Failure::Transport(e) => format!(
            "PE {me}'s proxy thread: device-initiated {op}{what} failed on the {transport} transport: {e}"
        ),
        Failure::Staging { what: copy, error } => format!(
            "PE {me}'s proxy thread: device-initiated {op}{what} failed {copy}: {error}"
        ),
    }
}

/// Issues one request; returns the fetched value (inline `g`, fetching AMOs), else 0.
fn issue(
    transport: &dyn Transport,
    payloads: &mut Payloads,
    req: &Request,
) -> std::result::Result<u64, Failure> {
    let len = req.len as usize;
    match Opcode::from_u8(req.opcode) {
        Some(Opcode::Put | Opcode::PutSignal) if req.local == 0 => {
            let bytes = req.value.to_le_bytes();
            Ok(transport.submit(req, Io::Src(&bytes[..len.min(8)]))?)
        }
        Some(Opcode::Put | Opcode::PutSignal) => payloads.put(transport, req).map(|()| 0),
        Some(Opcode::Get) if req.local == 0 => {
            let mut bytes = [0u8; 8];
            transport.submit(req, Io::Dst(&mut bytes[..len.min(8)]))?;
            Ok(u64::from_le_bytes(bytes))
        }
        Some(Opcode::Get) => payloads.get(transport, req).map(|()| 0),
        Some(Opcode::Amo | Opcode::Signal) => Ok(transport.submit(req, Io::None)?),
        Some(Opcode::Fence) => Ok(transport.fence().map(|()| 0)?),
        Some(Opcode::Quiet) => Ok(transport.quiet().map(|()| 0)?),
        None => Err(Failure::Transport(Error::InvalidArgument {
            op: "proxy",
            reason: format!("invalid opcode {} in the proxy ring", req.opcode),
        })),
    }
}

#[cfg(test)]
mod tests {
    //! The thread with a fake GPU's staging and a fake transport: requests submitted to
    //! the ring as a kernel would, completed in order, failures named.

    use symmem_device::SignalOp;

    use super::payload::tests::{FakeGpu, FakeTransport, GPU_BASE};
    use super::*;

    fn channel(gpu: FakeGpu, transport: Arc<FakeTransport>) -> ProxyChannel {
        let memory: Arc<dyn RingMemory> = Arc::new(HostMemory::new(4));
        ProxyChannel::start(5, 4, memory, Payloads::Device(Box::new(gpu)), transport).unwrap()
    }

    fn producer(ch: &ProxyChannel) -> Ring<'_> {
        // SAFETY: a CPU-side producer sees the ring at its device address, which for
        // host memory is the host address.
        unsafe { Ring::from_raw(ch.address() as *mut u8) }
    }

    /// Staged put_signal, get and inline `g`, then quiet: issued in ticket order, data
    /// before signal, the get's bytes in "GPU memory" when its producer's wait ends.
    #[test]
    fn staged_requests_complete_in_order() {
        let gpu = FakeGpu::new(4096, 1000);
        let memory = gpu.memory.clone();
        let t = Arc::new(FakeTransport::default());
        let ch = channel(gpu, t.clone());
        let ring = producer(&ch);
        let put = Request::put_signal(2, 0, GPU_BASE, 2500, 9000, SignalOp::Set, 1);
        let tk = ring.submit(&put, true, std::thread::yield_now).unwrap();
        ring.wait_result(tk, std::thread::yield_now).unwrap();
        let get = Request::get(2, GPU_BASE + 3000, 50, 1000);
        let tk = ring.submit(&get, true, std::thread::yield_now).unwrap();
        ring.wait_result(tk, std::thread::yield_now).unwrap();
        let mem = memory.lock().unwrap().clone();
        let want: Vec<u8> = (50..1050).map(|i| i as u8).collect();
        assert_eq!(&mem[3000..4000], &want[..]);
        let g = Request::get(2, 0, 8, 8);
        let tk = ring.submit(&g, true, std::thread::yield_now).unwrap();
        assert_eq!(
            ring.wait_result(tk, std::thread::yield_now).unwrap(),
            u64::from_le_bytes(std::array::from_fn(|i| 8 + i as u8))
        );
        let tk = ring
            .submit(&Request::quiet(), false, std::thread::yield_now)
            .unwrap();
        ring.wait_quiet(tk, std::thread::yield_now).unwrap();
        ch.drain(5, "fake", Some(Duration::from_secs(10))).unwrap();
        let ops: Vec<(u8, u64, u64)> = t
            .sent
            .lock()
            .unwrap()
            .iter()
            .map(|(r, _)| (r.opcode, r.remote, r.len))
            .collect();
        let (p, ps, gt) = (
            Opcode::Put as u8,
            Opcode::PutSignal as u8,
            Opcode::Get as u8,
        );
        assert_eq!(
            ops,
            [
                (p, 0, 1000),
                (p, 1000, 1000),
                (ps, 2000, 500),
                (gt, 50, 1000),
                (gt, 8, 8)
            ]
        );
        assert!(ch.failure().is_none());
        ch.shutdown();
    }

    /// A copy that fails fails the channel: the waiting producer sees it, and the
    /// channel's error names this PE, the op, the target PE, the size and the copy.
    #[test]
    fn a_failed_copy_fails_the_channel_naming_pe_op_and_size() {
        let mut gpu = FakeGpu::new(64, 16);
        gpu.fail_at = Some(0);
        let ch = channel(gpu, Arc::new(FakeTransport::default()));
        let ring = producer(&ch);
        let tk = ring
            .submit(
                &Request::put(3, 0, GPU_BASE, 40),
                true,
                std::thread::yield_now,
            )
            .unwrap();
        let f = ring.wait_result(tk, std::thread::yield_now).unwrap_err();
        assert_eq!((f.pe, f.opcode), (3, Opcode::Put as u8));
        let msg = ch.failure().unwrap();
        for needle in [
            "PE 5's proxy thread",
            "put of 40 bytes to PE 3",
            "bytes 0..16",
            "ILLEGAL_ADDRESS",
        ] {
            assert!(msg.contains(needle), "{needle:?} missing from {msg}");
        }
        let err = ch.drain(5, "fake", None).unwrap_err().to_string();
        assert!(err.contains("PE 3"), "{err}");
    }
}
