//! The OFI (libfabric) transport (feature `ofi`): one reliable-datagram (RDM) endpoint per
//! PE, the whole heap registered once, and every request as a libfabric RMA or atomic
//! operation, on whichever provider the job picks (`SYMMEM_OFI_PROVIDER`: `tcp;ofi_rxm`,
//! `shm`, `verbs;ofi_rxm`, `efa`, `cxi`, …; when unset, the first fabric provider with RMA and
//! atomics, else the first provider with them).
//!
//! # Connecting
//! Each PE opens its endpoint on the libfabric domain nearest it ([`driver::placement`];
//! `SYMMEM_OFI_DOMAIN` pins one) (`shim.c`: `fi_getinfo` with `FI_RMA | FI_ATOMIC` on an RDM
//! endpoint, every memory-registration mode the transport can honour, and delivery
//! complete as the completion level), checks that the provider has every atomic the
//! transport issues (`fi_query_atomic`), registers its heap and a bounce buffer, and
//! allgathers its address, heap base and key (or why it failed, so every PE fails with the
//! reason; [`exchange`](protocol::exchange)). Then every PE's address goes into the address vector. Before
//! that, one round tells each PE how many PEs share its machine, for
//! `SYMMEM_OFI_PROGRESS=auto`, and its rank among those near the same NUMA nodes, for
//! placement ([`driver::machine`]).
//!
//! # Issuing and completing
//! Atomics take their operands from the registered bounce buffer; a put is copied into
//! bounce slots and posted, so it is locally complete when posted, except that from
//! `DIRECT_PUT_BYTES` up (`DIRECT_STREAM_BYTES` for puts that stream to a peer), where
//! the provider needs no registered local buffers (no `FI_MR_LOCAL`), it goes straight
//! from the caller's buffer and waits for its completion; a get reads straight into the caller's buffer there (else through a slot)
//! and, like a fetching atomic or a compare-and-swap, waits for its completion. Every
//! operation completes at delivery (`FI_DELIVERY_COMPLETE`: the data is visible at the
//! target) with a completion entry carrying its number ([`completions`](protocol::completions): entries come in
//! any order), so `quiet` and `fence` wait until every operation issued completed;
//! except writes that stream to a peer where the provider keeps reads and writes behind
//! writes: those complete at transmit, and a read to that peer makes them visible before
//! anything needs them to be ([`deliveries`](protocol::deliveries)). An
//! operation waits for an earlier one to the same peer only where the provider does not
//! keep their order (`FI_ORDER_*`: a kind's own bits, and across RMA and atomics the
//! generic ones up to `max_order_*_size`, asked for at `fi_getinfo`), and where the
//! provider offers `FI_FENCE` it goes at once with that flag instead
//! ([`protocol::ordering`]; operations to other peers never wait for each other): so a
//! put_signal's signal goes out behind its data at once on `shm`. Puts of up to the
//! provider's inject size go with `FI_INJECT` (copied before the call returns, so from no
//! bounce slot) and still complete with an entry of their own, at delivery.
//! `SYMMEM_OFI_ASSUME_ORDER=weakest` relies on efa's order (sends after sends only)
//! whatever the provider keeps ([`assume`]). Where the provider keeps no order between a write
//! and an atomic after it (`tcp;ofi_rxm`), a put_signal's signal would wait for its data
//! to complete: there a put_signal of up to 8 KiB, or a signal alone, goes as one message
//! that the target's progress applies, data then signal, and acknowledges ([`messages`];
//! such an operation completes with the acknowledgement). Every such message is sealed
//! under the job's key and checked before anything in it is applied
//! ([`protocol::auth`]); the heap's memory key, which alone guards RMA and atomics, is
//! drawn at random where the provider lets the application choose it. A failed completion
//! (`fi_cq_readerr`) fails the waiting operation and every later one, naming the peer,
//! the provider's message and its error number. `SYMMEM_TIMEOUT` bounds every wait.
//!
//! On `shm`, non-fetching atomics are issued as fetching ones: libfabric's shm frees the
//! buffer of a delivery-complete non-fetching atomic twice (see `shim.c`).
//!
//! # Progress
//! Waits drive the provider's progress themselves. Where the provider needs manual
//! progress, a thread of the transport drives it while no application thread calls in:
//! it stands aside while one does (two pollers only contend: with libfabric's own
//! progress thread, `FI_PROGRESS_AUTO`, which wakes on every arrival, round trips took
//! 1.3–1.6x as long here), checking back less often the longer they keep calling in.
//! Otherwise it blocks on the CQ's wait object until the provider has work, then keeps
//! polling for a while, so that peers' operations on this PE's heap complete while its
//! application computes or sleeps, and a stream of them pays no wake-up each; or, where
//! it polls (`SYMMEM_OFI_PROGRESS`), the CQ has no wait object, which the provider would
//! signal for each completion, and the thread polls all the time, yielding its CPU.
//!
//! # Layout
//! As quinn splits its protocol from its I/O: [`protocol`] is pure (no FFI, no threads,
//! unit-tested without libfabric): the message and exchange codecs, the messages' seal and
//! check, the ordering per peer, the completions, deliveries at transmit, acknowledgements
//! due and bounce slots; completions and bytes in, decisions out. [`driver`] touches
//! libfabric, sysfs and threads: probing, placement, the machine round, opening, the
//! progress thread, the key. This file joins them: the endpoint's state under its lock and
//! the [`Transport`] calls; the state's work is in three files beside it: [`posting`]
//! (operations through the shim, `ffi` and `shim.c`), [`completing`] (completions,
//! received messages, acknowledgements) and [`waiting`] (waits, liveness probes, drains and
//! flushes).

mod assume;
mod completing;
mod driver;
mod entry;
mod ffi;
mod posting;
// Crate-visible for the fuzzing decoders (`crate::fuzzing`).
pub(crate) mod protocol;
#[cfg(test)]
mod stranger_tests;
mod waiting;

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use symmem_device::{AmoKind, Opcode, Request, SignalOp};
use symmem_sync::Backoff;

use self::driver::open::{addresses, log_endpoint, open, piece_bytes, share_endpoints};
use self::driver::probe::{probe, probe_fabric, probe_hmem};
use self::driver::progress::{progress_mode, start_progress, Activity};
use self::driver::{machine, placement};
use self::protocol::acks::DueAcks;
use self::protocol::completions::Completions;
use self::protocol::deliveries::Deliveries;
use self::protocol::exchange::PeerHeap;
use self::protocol::messages::{
    self, Message, Signal, ACK_BYTES, HEADER, MAX_DATA, RECV_BYTES, RECV_SLOTS,
};
use self::protocol::ordering::{Access, Admission, Kept, PeerOrder};
use self::protocol::slots::Slots;
use crate::error::{Error, Result};
use crate::interface::{Io, Setup, Transport};
use crate::registry::{counted, Driver, Entry};

/// The ofi transport in the registry: `auto` takes it where libfabric offers a fabric
/// provider (not tcp, udp, sockets or shm, where the socket transport is faster), and its
/// provider registers the heap (a GPU heap needs `FI_HMEM` with CUDA, or host staging).
pub(crate) const ENTRY: Entry = entry::ENTRY.with_driver(Driver {
    probe: |config| probe(config.ofi_provider.as_deref()),
    auto: Some(|_| probe_fabric().map(|provider| format!("libfabric provider {provider}"))),
    gpu_registration: Some(|setup| probe_hmem(setup.config.ofi_provider.as_deref()).map(drop)),
    connect: |setup| Ok(counted(setup, ENTRY.name, OfiTransport::connect(setup)?)),
});

/// Bytes of one bounce slot: the largest piece of a put or get (512 KiB pieces moved
/// 2-3x the bytes of 64 KiB ones over tcp;ofi_rxm here).
const SLOT_BYTES: usize = 512 << 10;
/// Puts of at least this many bytes go straight from the caller's buffer where the
/// provider allows (no `FI_MR_LOCAL`), and wait for their completion.
const DIRECT_PUT_BYTES: usize = 1 << 20;
/// Puts of at least this many bytes that stream to a peer (complete at transmit,
/// [`deliveries`](protocol::deliveries)) go straight from the caller's buffer where the provider allows, and
/// wait for their transmit completion: the provider then copies them once, into its
/// socket, instead of a bounce copy first. Over tcp;ofi_rxm here 256 KiB puts moved
/// 3.4-3.7 GB/s so against 2.3-3.5 through bounce slots, and 32 KiB ones 2.0-2.3 against
/// 2.7-2.9 (each wait polls the provider: a few µs a put).
const DIRECT_STREAM_BYTES: usize = 128 << 10;
/// Bounce slots: how many pieces can be in flight.
const SLOTS: usize = 16;
/// How long a failed put or get waits for pieces still posted from or into the caller's
/// buffer where `SYMMEM_TIMEOUT` is unset, before the endpoint is closed.
const SETTLE_LIMIT: Duration = Duration::from_secs(60);
/// How long a wait goes without its operation completing before it probes the peers, and
/// how often slow waits probe them ([`State::probe_peers`]).
const PROBE_AFTER: Duration = Duration::from_secs(1);
/// A drain with nothing outstanding polls the provider unless a poll ran this recently
/// ([`State::drain`]): a loop of fences still applies peers' messages within this, and a
/// barrier's quiets cost no poll each (two polls added 4-5 µs to a barrier over
/// tcp;ofi_rxm here).
const POLL_FRESH: Duration = Duration::from_micros(20);
/// How long a PE shutting its endpoint down drives progress so that its goodbyes leave.
const GOODBYE_WAIT: Duration = Duration::from_millis(2);

/// An open endpoint; closed when dropped.
struct Endpoint(*mut ffi::SymmemOfi);

// SAFETY: the endpoint is used only under the transport's lock (FI_THREAD_DOMAIN: the
// application serializes access).
unsafe impl Send for Endpoint {}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // SAFETY: opened by symmem_ofi_open, closed once.
        unsafe { ffi::symmem_ofi_close(self.0) }
    }
}

/// The bounce buffer: registered, in 16-byte words so that every slot is aligned; its
/// [`SLOTS`] slots, then the [`RECV_SLOTS`] receive buffers of messages, then the
/// [`FLUSH_BYTES`] that flushes read into.
struct Bounce(Box<[u128]>);

/// Bytes a flush reads (see [`deliveries`](protocol::deliveries)); where they land, the bytes are not looked at.
const FLUSH_BYTES: usize = 16;

impl Bounce {
    fn new() -> Self {
        let bytes = SLOTS * SLOT_BYTES + RECV_SLOTS * RECV_BYTES + FLUSH_BYTES;
        Bounce(vec![0u128; bytes / 16].into_boxed_slice())
    }

    /// Where flushes read into: every flush at once, as their bytes are not used.
    fn flush(&mut self) -> *mut u8 {
        // SAFETY: the last FLUSH_BYTES of the buffer.
        unsafe {
            self.0
                .as_mut_ptr()
                .cast::<u8>()
                .add(SLOTS * SLOT_BYTES + RECV_SLOTS * RECV_BYTES)
        }
    }

    fn slot(&mut self, i: usize) -> *mut u8 {
        // SAFETY: `i < SLOTS`, so the slot lies inside the buffer.
        unsafe { self.0.as_mut_ptr().cast::<u8>().add(i * SLOT_BYTES) }
    }

    fn receive(&mut self, i: usize) -> *mut u8 {
        debug_assert!(i < RECV_SLOTS);
        // SAFETY: `i < RECV_SLOTS`, so the receive buffer lies inside the buffer.
        unsafe {
            self.0
                .as_mut_ptr()
                .cast::<u8>()
                .add(SLOTS * SLOT_BYTES + i * RECV_BYTES)
        }
    }
}

/// The largest message injected (where the provider's inject size allows): a signal with
/// up to 72 bytes of data.
const INJECTED_BYTES: usize = HEADER + 72;

/// The completion context of receive buffer `i` (operations are numbered from 1 up, far
/// below this bit).
const RECEIVE: u64 = 1 << 63;

/// Posts receive buffer `i` of `bounce` on `ep`.
fn post_receive(ep: &Endpoint, bounce: &mut Bounce, i: usize) -> isize {
    // SAFETY: an open endpoint; the buffer lies in the registered bounce buffer, which
    // outlives the endpoint's receives (the endpoint closes first).
    unsafe {
        ffi::symmem_ofi_recv(
            ep.0,
            RECEIVE | i as u64,
            bounce.receive(i).cast(),
            RECV_BYTES,
        )
    }
}

/// Everything the endpoint's work needs, under one lock.
struct State {
    /// Declared before the bounce buffer: its registration goes first.
    ep: Endpoint,
    bounce: Bounce,
    /// The bounce slots, taken in turn ([`protocol::slots`]).
    slots: Slots,
    /// The operations posted, and which completed.
    ops: Completions,
    /// Whether the provider needs every local buffer registered (`FI_MR_LOCAL`): then
    /// every payload goes through the bounce buffer.
    local_mr: bool,
    /// The first failure; every later operation fails with it.
    failure: Option<String>,
    /// The target of the operation that failed, where the provider said.
    failed_pe: Option<usize>,
    peers: Vec<Option<PeerHeap>>,
    /// Per peer, what a new operation must not overtake where the provider does not keep
    /// its order ([`kept_order`]: `FI_ORDER_RMA_*` and `FI_ORDER_ATOMIC_*` within each
    /// kind, the generic ones across them; `FI_ORDER_SAS` among messages): it waits for
    /// the earlier one, or goes with `FI_FENCE` where the provider offers that.
    order: PeerOrder,
    /// Which writes completed at transmit, and what makes them visible ([`deliveries`](protocol::deliveries)).
    deliveries: Deliveries,
    /// This PE.
    me: usize,
    /// This PE's heap, where peers' messages apply (`addr` 0 where it takes none).
    heap: LocalHeap,
    /// The sealing of this PE's messages and the check of those it receives.
    auth: driver::auth::Auth,
    /// Acknowledgements still to send ([`protocol::acks`]).
    acks: DueAcks,
    /// Receive buffers the provider was busy to take back.
    unposted: Vec<usize>,
    /// The provider's inject size: messages up to it go without a send completion; puts
    /// up to it go from no bounce slot ([`Self::put_pieces`]).
    inject: usize,
    /// The largest piece of a put or get: a slot, or less where the provider's messages
    /// are smaller.
    piece: usize,
    /// Operations of the current put or get posted straight from or into the caller's
    /// buffer: waited for even when the call fails ([`Self::settle`]).
    caller_buffer_ops: Vec<u64>,
    /// The liveness probes of [`Self::probe_peers`] still in flight, and when the last
    /// round went out.
    liveness: (Vec<u64>, Option<Instant>),
    /// Per peer: since when the provider has refused operations to it (`EAGAIN`), which
    /// is how `tcp;ofi_rxm` answers for a peer whose connection is gone, and when last.
    refused_since: Vec<Option<(Instant, Instant)>>,
    /// Per peer: whether it said goodbye (shut its endpoint down in order).
    departed: Vec<bool>,
    /// `SYMMEM_DEAD_PEER_TIMEOUT`: how long a peer may refuse operations before it is
    /// taken for dead; `None` = never.
    dead_peer_timeout: Option<Duration>,
    /// When [`Self::poll`] last ran.
    last_poll: Instant,
    /// How many times [`Self::poll`] ran: an application call that polled marks the
    /// transport active (the progress thread stands aside); one that only posted does not.
    polls: u64,
}

/// This PE's heap, as messages apply to it.
#[derive(Debug, Clone, Copy)]
struct LocalHeap {
    /// Its address in this process (0 where it takes no messages).
    addr: usize,
    /// Its length.
    len: u64,
}

impl Access {
    /// The completions the operation waits for: a message's send (unless injected: sent
    /// from no slot), and its target's acknowledgement.
    fn parts(self, slot: Option<usize>) -> u8 {
        if self == Access::Message && slot.is_some() {
            2
        } else {
            1
        }
    }
}

/// The OFI transport of one PE.
pub(crate) struct OfiTransport {
    me: usize,
    /// "tcp;ofi_rxm on eth0", for logs and errors.
    describe: String,
    timeout: Option<Duration>,
    state: Arc<Mutex<Option<State>>>,
    /// When a thread of the application last called in (the progress thread stands
    /// aside while one does).
    activity: Arc<Activity>,
    stop: Arc<AtomicBool>,
    progress: Mutex<Option<JoinHandle<()>>>,
    /// Whether peers' operations complete while no application thread calls in: a
    /// progress thread runs, or the provider progresses on its own and takes no messages.
    serves_while_idle: bool,
    /// Calls whose wait is slow, for the hang report.
    blocked: crate::blocked::BlockedCalls,
}

impl OfiTransport {
    /// Opens this PE's endpoint and connects it to every PE `setup.remote` names.
    /// Collective: every PE calls it.
    pub(crate) fn connect(setup: &Setup<'_>) -> Result<Self> {
        let me = setup.me;
        let n = setup.remote.len();
        let b = setup.bootstrap;
        let near = placement::this_pe(setup.gpu_pci_bus_id);
        let neighbours = machine::learn(setup, &near.key())?;
        let mode = progress_mode(setup, neighbours.machine_pes);
        let key = driver::auth::transport_key(b)?;
        let opened = open(setup, mode.polls, &near, neighbours.near_rank);
        let all = share_endpoints(setup, &opened)?;
        // A PE whose endpoint did not open fails with its own error; the others name it.
        let mut opened = opened?;
        let (names, addrlen, peers) = addresses(setup, &all)?;
        let mut err = [0 as c_char; 256];
        // SAFETY: `names` holds `n` addresses of `addrlen` bytes; a writable error buffer.
        let rc = unsafe {
            ffi::symmem_ofi_insert(
                opened.ep.0,
                names.as_ptr().cast(),
                addrlen,
                n,
                err.as_mut_ptr(),
                err.len(),
            )
        };
        if rc != 0 {
            return Err(Error::Transport {
                transport: "ofi",
                op: "init",
                me,
                pe: me,
                detail: ffi::text(&err),
            });
        }
        let describe = format!(
            "{} on {} ({})",
            ffi::text(&opened.attrs.provider),
            ffi::text(&opened.attrs.domain),
            ffi::text(&opened.attrs.fabric)
        );
        let manual = opened.attrs.manual_progress != 0;
        let piece = piece_bytes(&opened.attrs);
        let order = kept_order(&opened.attrs, piece);
        let flushes = flushes_writes(&opened.attrs, order);
        log_endpoint(
            me,
            &opened.attrs,
            order,
            opened.takes_messages,
            flushes,
            &mode,
            &describe,
        );
        let auth = driver::auth::Auth::new(&key, me, n, opened.attrs.sources != 0);
        if opened.takes_messages {
            tracing::info!(target: "init::transport", "PE {me}: ofi {}", auth.describe());
        }
        let state = Arc::new(Mutex::new(Some(State {
            ep: std::mem::replace(&mut opened.ep, Endpoint(std::ptr::null_mut())),
            bounce: std::mem::replace(&mut opened.bounce, Bounce(Box::new([]))),
            slots: Slots::new(SLOTS),
            ops: Completions::new(),
            local_mr: opened.attrs.mr_mode & ffi::FI_MR_LOCAL != 0,
            failure: None,
            failed_pe: None,
            deliveries: Deliveries::new(peers.len(), flushes),
            order: PeerOrder::new(
                peers.len(),
                Kept {
                    order,
                    sends_in_order: opened.attrs.sends_in_order != 0,
                },
                opened.attrs.fence != 0,
                flushes,
            ),
            peers,
            piece,
            me,
            heap: LocalHeap {
                addr: if opened.takes_messages {
                    setup.heap.base as usize
                } else {
                    0
                },
                len: setup.heap.len as u64,
            },
            auth,
            acks: DueAcks::default(),
            unposted: Vec::new(),
            inject: opened.attrs.inject_size,
            polls: 0,
            last_poll: Instant::now(),
            caller_buffer_ops: Vec::new(),
            liveness: (Vec::new(), None),
            refused_since: vec![None; n],
            departed: vec![false; n],
            dead_peer_timeout: setup.config.dead_peer_timeout,
        })));
        // Nobody issues before every peer's address vector is complete.
        b.barrier()?;
        let stop = Arc::new(AtomicBool::new(false));
        let activity = Arc::new(Activity::new());
        let wait_fd = opened.attrs.wait_fd;
        // Messages are applied by whoever reads the CQ, also where the provider progresses
        // on its own: the thread reads it while the application does not.
        let progress = (mode.thread && (manual || opened.takes_messages))
            .then(|| {
                start_progress(
                    me,
                    state.clone(),
                    activity.clone(),
                    wait_fd,
                    mode.polls,
                    stop.clone(),
                )
            })
            .transpose()?;
        Ok(OfiTransport {
            me,
            describe,
            timeout: setup.config.timeout,
            state,
            activity,
            stop,
            serves_while_idle: progress.is_some() || !(manual || opened.takes_messages),
            progress: Mutex::new(progress),
            blocked: Default::default(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Option<State>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn err(&self, op: &'static str, pe: usize, detail: impl Into<String>) -> Error {
        Error::Transport {
            transport: "ofi",
            op,
            me: self.me,
            pe,
            detail: detail.into(),
        }
    }

    /// Runs `f` on the live state, with errors naming `op` and `pe`. A call that polled the
    /// provider marks the transport active, so that the progress thread stands aside
    /// while the application's threads drive progress; a call that only posted does not
    /// (a thread that issues, tests and fences in a loop never reads the CQ itself).
    fn with_state<R>(
        &self,
        op: &'static str,
        pe: usize,
        f: impl FnOnce(&mut State, &Waiter) -> std::result::Result<R, String>,
    ) -> Result<R> {
        let mut g = self.lock();
        let st = g
            .as_mut()
            .ok_or_else(|| self.err(op, pe, "the ofi transport is shut down"))?;
        if let Some(why) = &st.failure {
            let at = st.failed_pe.unwrap_or(pe);
            return Err(self.err(
                op,
                at,
                format!("an earlier operation to PE {at} failed: {why}"),
            ));
        }
        let started = Instant::now();
        let waiter = Waiter {
            deadline: self.timeout.map(|t| started + t),
            timeout: self.timeout,
            call: Some(Call {
                op,
                pe: (pe != self.me).then_some(pe),
                started,
                blocked: &self.blocked,
            }),
        };
        let polls = st.polls;
        let result = f(st, &waiter);
        if st.polls != polls {
            self.activity.mark();
        }
        result.map_err(|why| {
            // A failed completion names its own target, which may not be `pe` (a quiet).
            self.err(
                op,
                st.failed_pe.unwrap_or(pe),
                format!("{why} ({})", self.describe),
            )
        })
    }
}

/// How long the waits of one call may take (`SYMMEM_TIMEOUT`), and the call, which its
/// waits publish once slow.
struct Waiter<'a> {
    deadline: Option<Instant>,
    timeout: Option<Duration>,
    call: Option<Call<'a>>,
}

/// The application's call a wait belongs to ([`Waiter::call`]); `None` for the
/// transport's own probes.
struct Call<'a> {
    op: &'static str,
    /// The target, when the call has one other than this PE.
    pe: Option<usize>,
    started: Instant,
    blocked: &'a crate::blocked::BlockedCalls,
}

/// The order bits of `attrs` the transport may rely on for operations of up to `piece`
/// bytes. Across RMA and atomics (the generic bits), a write after a write (or a read
/// after a write, a write after a read) keeps its order only up to the provider's
/// `max_order_*_size` for it; the bits of one kind are taken as the provider reports them
/// (providers report those sizes only when asked, and tcp;ofi_rxm, asked, offers no
/// order across RMA and atomics at all).
fn kept_order(attrs: &ffi::Attrs, piece: usize) -> u64 {
    let sized = [
        (ffi::ORDER_RAW, attrs.max_order_size[0]),
        (ffi::ORDER_WAR, attrs.max_order_size[1]),
        (ffi::ORDER_WAW, attrs.max_order_size[2]),
    ];
    sized
        .iter()
        .filter(|&&(_, size)| size < piece)
        .fold(attrs.order, |order, &(bits, _)| order & !bits)
}

/// Whether `order` keeps an operation behind an earlier one of the same kind: `base` is
/// the kind's `RAR` bit (`FI_ORDER_RMA_RAR` or `FI_ORDER_ATOMIC_RAR`), `offset` picks
/// `RAR`, `RAW`, `WAR` or `WAW` after it, `generic` is the matching `FI_ORDER_*` bit.
fn order_kept(order: u64, base: u64, offset: u32, generic: u64) -> bool {
    order & generic != 0 || order & (base << offset) != 0
}

/// Whether writes that stream to a peer may complete at transmit ([`deliveries`](protocol::deliveries)): the
/// endpoint completes at delivery by default, the provider keeps a read and a write
/// behind an earlier write (RMA RAW and WAW), and it is one known to apply a peer's
/// operations in that order ([`applies_in_order`]), so that a later read or
/// delivery-complete write covers them.
fn flushes_writes(attrs: &ffi::Attrs, order: u64) -> bool {
    attrs.delivery_complete != 0
        && order_kept(order, ffi::ORDER_RMA_RAR, ffi::RAW, ffi::ORDER_RAW)
        && order_kept(order, ffi::ORDER_RMA_RAR, ffi::WAW, ffi::ORDER_WAW)
        && applies_in_order(&ffi::text(&attrs.provider))
}

/// Whether `provider` applies each peer's operations at the target in the order they
/// were posted, so that a read behind writes to other addresses returns only once they
/// are visible. libfabric's order bits promise that order for transmission, and for data
/// only at the same address; these providers keep it for data too (read in libfabric
/// 1.17's sources): `tcp` carries a peer's operations over one socket and applies each
/// as it arrives, and `shm` takes them off one command queue (its fast RMA path, which
/// bypasses the queue, is off when order is asked for, as here). Others, never run here,
/// keep delivery completion on every write.
fn applies_in_order(provider: &str) -> bool {
    matches!(provider.split(';').next(), Some("tcp" | "shm"))
}

/// Whether signals to this PE should come as messages: where the endpoint has them, the
/// provider keeps no order between a write and an atomic after it (else the atomic goes
/// out behind the data at once) and offers no `FI_FENCE` (else the atomic goes fenced), the heap is host memory (the target's CPU applies them)
/// and acknowledgements fit an inject.
fn wants_messages(attrs: &ffi::Attrs, heap_host: bool) -> bool {
    attrs.messages != 0
        && kept_order(attrs, piece_bytes(attrs)) & ffi::ORDER_WAW == 0
        && attrs.fence == 0
        && heap_host
        && attrs.inject_size >= ACK_BYTES
        && attrs.max_msg_size >= RECV_BYTES
}

/// A libfabric atomic.
#[derive(Clone, Copy)]
enum Atomic {
    /// `enum fi_op`.
    Op(i32),
    /// `FI_CSWAP`.
    Compare,
}

impl Transport for OfiTransport {
    fn name(&self) -> &'static str {
        "ofi"
    }

    fn submit(&self, req: &Request, io: Io<'_>) -> Result<u64> {
        let pe = req.pe as usize;
        let Some(opcode) = req.opcode() else {
            return Err(self.err("submit", pe, format!("unknown opcode {}", req.opcode)));
        };
        let op = opcode.name();
        match (opcode, io) {
            (Opcode::Fence | Opcode::Quiet, _) => self.quiet().map(|()| 0),
            (Opcode::Put, Io::Src(src)) => {
                self.with_state(op, pe, |st, w| st.put(pe, req.remote, src, w).map(|()| 0))
            }
            (Opcode::PutSignal, Io::Src(src)) => self.with_state(op, pe, |st, w| {
                if st.by_message(pe, src.len()) {
                    let sig_op = signal_op(req)?;
                    return st.message(pe, req.remote, src, req.signal, req.value, sig_op, w);
                }
                st.put(pe, req.remote, src, w)?;
                // The signal lands after the data: the provider keeps writes in order
                // (FI_ORDER_WAW up to max_order_waw_size), or `post` waits for the data.
                signal(st, pe, req.signal, req, w)
            }),
            (Opcode::Get, Io::Dst(dst)) => {
                self.with_state(op, pe, |st, w| st.get(pe, req.remote, dst, w).map(|()| 0))
            }
            (Opcode::Signal, _) => self.with_state(op, pe, |st, w| {
                if st.by_message(pe, 0) {
                    let sig_op = signal_op(req)?;
                    return st.message(pe, req.remote, &[], req.remote, req.value, sig_op, w);
                }
                signal(st, pe, req.remote, req, w)
            }),
            (Opcode::Amo, _) => {
                let Some(kind) = req.amo_kind() else {
                    return Err(self.err(op, pe, format!("unknown AMO kind {}", req.amo)));
                };
                let wanted = req.local != 0;
                let (atomic, fetch) = match kind {
                    AmoKind::Fetch => (Atomic::Op(ffi::OP_ATOMIC_READ), true),
                    AmoKind::Set => (Atomic::Op(ffi::OP_ATOMIC_WRITE), false),
                    AmoKind::Swap => (Atomic::Op(ffi::OP_ATOMIC_WRITE), true),
                    AmoKind::CompareSwap => (Atomic::Compare, true),
                    AmoKind::FetchAdd => (Atomic::Op(ffi::OP_SUM), wanted),
                    AmoKind::FetchAnd => (Atomic::Op(ffi::OP_BAND), true),
                    AmoKind::FetchOr => (Atomic::Op(ffi::OP_BOR), true),
                    AmoKind::FetchXor => (Atomic::Op(ffi::OP_BXOR), true),
                };
                self.with_state(op, pe, |st, w| {
                    st.atomic(
                        pe,
                        req.remote,
                        req.width,
                        atomic,
                        req.value,
                        req.compare,
                        fetch,
                        w,
                    )
                })
            }
            (Opcode::Put | Opcode::PutSignal | Opcode::Get, _) => {
                Err(self.err(op, pe, "the payload buffer is missing"))
            }
        }
    }

    fn fence(&self) -> Result<()> {
        // Waiting for every earlier operation to complete (and for the writes that
        // completed at transmit to be covered: a flush) orders them.
        self.quiet()
    }

    fn quiet(&self) -> Result<()> {
        let me = self.me;
        self.with_state("quiet", me, |st, w| st.drain(w))
    }

    fn progress(&self) -> Result<()> {
        let me = self.me;
        self.with_state("progress", me, |st, _| st.poll())
    }

    fn serves_while_idle(&self) -> bool {
        self.serves_while_idle
    }

    fn blocked(&self) -> Option<crate::blocked::Blocked> {
        self.blocked.oldest()
    }

    fn failed_peer(&self) -> Option<(usize, String)> {
        // Never waits for the lock (the progress thread may hold it): a busy state is
        // asked again at the next slow round of the caller's wait. Only a failure whose
        // target the provider named is a lost peer; while there is none, peers are
        // probed now and then, so that a dead one becomes such a failure.
        let mut g = self.state.try_lock().ok()?;
        let st = g.as_mut()?;
        if st.failure.is_none() {
            let _ = st.probe_peers();
        }
        Some((st.failed_pe?, st.failure.clone()?))
    }

    fn shutdown(&self) {
        self.say_goodbye();
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self
            .progress
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            let _ = t.join();
        }
        // Closes the endpoint (and its registrations) before the heap goes.
        self.lock().take();
    }
}

impl OfiTransport {
    /// Tells every peer, where messages travel, that this PE shuts its endpoint down in
    /// order, so that a peer that then finds it refusing operations names it as having
    /// left, and one that probes its peers for liveness leaves it alone. Best effort: a
    /// goodbye the provider cannot take at once (or after a failure) is not sent, and the
    /// sends get [`GOODBYE_WAIT`] to leave before the endpoint closes.
    fn say_goodbye(&self) {
        let mut g = self.lock();
        let Some(st) = g.as_mut() else {
            return;
        };
        if st.heap.addr == 0 || st.ep.0.is_null() {
            return;
        }
        for pe in 0..st.peers.len() {
            if pe == st.me || st.peers[pe].is_none() {
                continue;
            }
            let mut bye = messages::encode_goodbye(st.me);
            st.auth.seal(&mut bye, pe);
            // SAFETY: an open endpoint; ACK_BYTES fit its inject size (`wants_messages`).
            let _ = unsafe { ffi::symmem_ofi_inject(st.ep.0, bye.as_ptr().cast(), bye.len(), pe) };
        }
        let until = Instant::now() + GOODBYE_WAIT;
        while Instant::now() < until {
            let _ = st.poll_completions();
            std::thread::yield_now();
        }
    }
}

impl Drop for OfiTransport {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The signal operation of `req`.
fn signal_op(req: &Request) -> std::result::Result<SignalOp, String> {
    req.signal_kind()
        .ok_or_else(|| format!("unknown signal op {}", req.signal_op))
}

/// The signal of `req` at heap offset `off` of `pe`: an atomic write or add of 8 bytes.
fn signal(
    st: &mut State,
    pe: usize,
    off: u64,
    req: &Request,
    w: &Waiter,
) -> std::result::Result<u64, String> {
    let code = match signal_op(req)? {
        SignalOp::Set => ffi::OP_ATOMIC_WRITE,
        SignalOp::Add => ffi::OP_SUM,
    };
    st.atomic(pe, off, 8, Atomic::Op(code), req.value, 0, false, w)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Orders across RMA and atomics count only up to the provider's data-order sizes;
    /// a kind's own orders are kept as reported.
    #[test]
    fn orders_across_kinds_are_kept_only_up_to_their_data_sizes() {
        let within = ffi::ORDER_RMA_RAR << ffi::WAW | ffi::ORDER_ATOMIC_RAR << ffi::WAW;
        let across = ffi::ORDER_RAR | ffi::ORDER_RAW | ffi::ORDER_WAR | ffi::ORDER_WAW;
        let attrs = |sizes: [usize; 3]| ffi::Attrs {
            order: within | across,
            max_order_size: sizes,
            ..ffi::Attrs::default()
        };
        let piece = 512 << 10;
        assert_eq!(kept_order(&attrs([usize::MAX; 3]), piece), within | across);
        assert_eq!(kept_order(&attrs([piece; 3]), piece), within | across);
        // tcp;ofi_rxm reports no sizes unless asked: only reads after reads stay ordered
        // across kinds, and a kind's own orders stand.
        assert_eq!(kept_order(&attrs([0; 3]), piece), within | ffi::ORDER_RAR);
        assert_eq!(
            kept_order(&attrs([piece, 0, piece - 1]), piece),
            within | ffi::ORDER_RAR | ffi::ORDER_RAW
        );
    }

    /// Signals come as messages only where the endpoint has them, the provider does not
    /// keep an atomic behind a write, the heap is host memory and an ack fits an inject.
    #[test]
    fn signals_come_as_messages_only_where_they_must_and_can() {
        let tcp = ffi::Attrs {
            messages: 1,
            inject_size: 64,
            max_msg_size: usize::MAX,
            order: ffi::ORDER_RMA_RAR << ffi::WAW | ffi::ORDER_ATOMIC_RAR << ffi::WAW,
            ..ffi::Attrs::default()
        };
        assert!(wants_messages(&tcp, true));
        assert!(!wants_messages(&tcp, false), "a GPU heap");
        let without = ffi::Attrs { messages: 0, ..tcp };
        assert!(!wants_messages(&without, true), "no FI_MSG");
        let tiny = ffi::Attrs {
            inject_size: 8,
            ..tcp
        };
        assert!(
            !wants_messages(&tiny, true),
            "an ack does not fit an inject"
        );
        let ordered = ffi::Attrs {
            order: tcp.order | ffi::ORDER_WAW,
            max_order_size: [usize::MAX; 3],
            ..tcp
        };
        assert!(!wants_messages(&ordered, true), "shm keeps every order");
    }

    /// Streamed writes complete at transmit only on providers known to apply a peer's
    /// operations in order, that keep reads and writes behind writes, at delivery by
    /// default.
    #[test]
    fn writes_complete_at_transmit_only_where_a_read_covers_them() {
        let named = |name: &str| {
            let mut provider = [0 as c_char; 64];
            for (p, b) in provider.iter_mut().zip(name.bytes()) {
                *p = b as c_char;
            }
            ffi::Attrs {
                provider,
                delivery_complete: 1,
                ..ffi::Attrs::default()
            }
        };
        let kept = ffi::ORDER_RMA_RAR << ffi::RAW | ffi::ORDER_RMA_RAR << ffi::WAW;
        assert!(flushes_writes(&named("tcp;ofi_rxm"), kept));
        assert!(flushes_writes(
            &named("shm"),
            ffi::ORDER_RAW | ffi::ORDER_WAW
        ));
        assert!(
            !flushes_writes(&named("tcp;ofi_rxm"), ffi::ORDER_RMA_RAR << ffi::WAW),
            "no read behind a write"
        );
        assert!(
            !flushes_writes(&named("tcp;ofi_rxm"), ffi::ORDER_RMA_RAR << ffi::RAW),
            "no write behind a write"
        );
        assert!(
            !flushes_writes(&named("efa"), kept),
            "not known to apply in order"
        );
        assert!(!flushes_writes(&named("verbs;ofi_rxm"), kept));
        let default_level = ffi::Attrs {
            delivery_complete: 0,
            ..named("tcp;ofi_rxm")
        };
        assert!(!flushes_writes(&default_level, kept), "not at delivery");
    }
}
