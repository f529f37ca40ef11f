//! The host/device contract: one `DeviceState` per PE, read by every device operation.
//!
//! On the GPU it is the `#[no_mangle]` global `SYMMEM_DEVICE_STATE` ([`STATE_SYMBOL`]) of
//! the PTX module, filled by the host with `cuModuleGetGlobal` + a copy before launch. On
//! the CPU executor the same struct is installed for each kernel thread. There is exactly one definition,
//! here, so host and device cannot disagree on the layout; [`DEVICE_STATE_VERSION`] and a
//! layout test guard changes.
//!
//! ```text
//! offset  field
//!  0      version       u32   DEVICE_STATE_VERSION
//!  4      my_pe         u32
//!  8      n_pes         u32
//! 12      wait_timeout_ms u32 how long a device wait may last, 0 = no limit
//! 16      heap_base     u64   this PE's heap: symmetric addresses point into it
//! 24      heap_size     u64
//! 32      peer_bases    u64   -> [u64; n_pes]: each PE's heap in this address space, 0 = no P2P path
//! 40      barrier_off   u64   heap offset of the device barrier flags
//! 48      epoch_off     u64   heap offset of this PE's device barrier epoch counter
//! 56      error         u64   -> ErrorRecord the device fills before trapping, 0 = none
//! 64      proxy         u64   -> proxy channel for PEs without P2P, 0 = none yet
//! 72      wait_record   u64   -> WaitRecord a slow device wait fills for the hang report, 0 = none
//! 80                          (size)
//! ```

pub use crate::panic_record::PanicRecord;

/// Version of the [`DeviceState`] layout and of the [`ErrorRecord`] and [`WaitRecord`] it
/// points to. Bump on any change.
pub const DEVICE_STATE_VERSION: u32 = 4;

/// Per-PE state every device operation reads.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct DeviceState {
    /// [`DEVICE_STATE_VERSION`]; 0 means "not initialized".
    pub version: u32,
    /// This PE.
    pub my_pe: u32,
    /// Number of PEs.
    pub n_pes: u32,
    /// Milliseconds a device wait (signal, wait_until, barrier, collective, proxy
    /// completion) may last before it fails the kernel naming what it waited for; 0 = no
    /// limit.
    pub wait_timeout_ms: u32,
    /// Address of this PE's symmetric heap; symmetric addresses point into it.
    pub heap_base: u64,
    /// Heap size in bytes.
    pub heap_size: u64,
    /// Address of `n_pes` u64s: each PE's heap base in this address space, 0 if there is
    /// no direct (P2P) path to it.
    pub peer_bases: u64,
    /// Heap offset of the device barrier flags (one 64-byte line per round).
    pub barrier_off: u64,
    /// Heap offset of this PE's device barrier epoch counter.
    pub epoch_off: u64,
    /// Address of an [`ErrorRecord`] the device fills before trapping; 0 = none.
    pub error: u64,
    /// Address of the proxy channel for PEs without P2P; 0 = no proxy (yet).
    pub proxy: u64,
    /// Address of this PE's [`WaitRecord`], where a device wait that has been slow for
    /// [`WAIT_RECORD_AFTER_MS`] says what it waits for (the hang report reads it while the
    /// kernel runs); 0 = none (the hang report is off).
    pub wait_record: u64,
}

// The layout table above is the contract with every PTX module ever built: check it.
const _: () = {
    use core::mem::{align_of, offset_of, size_of};
    assert!(size_of::<DeviceState>() == 80);
    assert!(align_of::<DeviceState>() == 8);
    assert!(offset_of!(DeviceState, version) == 0);
    assert!(offset_of!(DeviceState, my_pe) == 4);
    assert!(offset_of!(DeviceState, n_pes) == 8);
    assert!(offset_of!(DeviceState, wait_timeout_ms) == 12);
    assert!(offset_of!(DeviceState, heap_base) == 16);
    assert!(offset_of!(DeviceState, heap_size) == 24);
    assert!(offset_of!(DeviceState, peer_bases) == 32);
    assert!(offset_of!(DeviceState, barrier_off) == 40);
    assert!(offset_of!(DeviceState, epoch_off) == 48);
    assert!(offset_of!(DeviceState, error) == 56);
    assert!(offset_of!(DeviceState, proxy) == 64);
    assert!(offset_of!(DeviceState, wait_record) == 72);
};

/// The name of the module's state in PTX (and of the global the host fills).
pub const STATE_SYMBOL: &str = "SYMMEM_DEVICE_STATE";

/// The PTX module's copy of the state, filled by the host before launch.
///
/// The compiler declares it in the `.global` state space; the PTX build
/// (`symmem-ptx-build`) moves it to `.const`, as NVSHMEM keeps its device state in
/// `__constant__` memory: kernels read it through the constant cache, which a system fence
/// does not empty. Device code reads it only by name, in `arch::state` (never by address,
/// which would name the `.global` space), so it is kept with `#[used]`.
#[cfg(target_arch = "nvptx64")]
#[no_mangle]
#[used]
pub static mut SYMMEM_DEVICE_STATE: DeviceState = DeviceState {
    version: 0,
    my_pe: 0,
    n_pes: 0,
    wait_timeout_ms: 0,
    heap_base: 0,
    heap_size: 0,
    peer_bases: 0,
    barrier_off: 0,
    epoch_off: 0,
    error: 0,
    proxy: 0,
    wait_record: 0,
};

/// What a kernel reports before it traps, at [`DeviceState::error`] (host-mapped memory):
/// `word` last (code in the low 32 bits, the PE involved in the high 32), after the
/// details of a [`error_code::WAIT_TIMEOUT`] or a [`error_code::PANIC`].
///
/// ```text
/// offset  field
///  0      word         u64
///  8      wait         u64
/// 16      addr         u64
/// 24      seen         u64
/// 32      wanted       u64
/// 40      peer_failed  u64
/// 48      panic        PanicRecord (280 bytes)
/// 328                  (size)
/// ```
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ErrorRecord {
    /// An [`error_code`] and a PE; 0 = no error.
    pub word: u64,
    /// A timed-out wait: its [`wait_op`] in the low 32 bits, its [`crate::op_kinds::Cmp`] code (or
    /// [`wait_op::NO_CMP`]) in the high 32.
    pub wait: u64,
    /// A timed-out wait: the address it polled (0 when not one word).
    pub addr: u64,
    /// A timed-out wait: the value it last saw.
    pub seen: u64,
    /// A timed-out wait: the value it waited for.
    pub wanted: u64,
    /// Written by the host, never by the device: 1 + a PE that died while this PE's
    /// kernel ran (`u64::MAX`: a failure not pinned on one PE), 0 while all are alive.
    /// Device waits read it in their sleeping phase and fail with
    /// [`error_code::PEER_FAILED`].
    pub peer_failed: u64,
    /// A [`error_code::PANIC`]: where the kernel panicked.
    pub panic: PanicRecord,
}

// Part of the contract with every PTX module, as `DeviceState` is.
const _: () = {
    use core::mem::{align_of, offset_of, size_of};
    assert!(size_of::<ErrorRecord>() == 328);
    assert!(align_of::<ErrorRecord>() == 8);
    assert!(offset_of!(ErrorRecord, word) == 0);
    assert!(offset_of!(ErrorRecord, peer_failed) == 40);
    assert!(offset_of!(ErrorRecord, panic) == 48);
};

impl Default for ErrorRecord {
    fn default() -> Self {
        bytemuck::Zeroable::zeroed()
    }
}

/// The PE field of a timed-out wait that waited for any PE (a signal anyone may send).
pub const ANY_PE: u32 = u32::MAX;

/// What a device wait waits for, named in its timeout error.
pub mod wait_op {
    /// `wait_until`, `signal_wait_until`, and the collectives built on them.
    pub const WAIT_UNTIL: u32 = 1;
    /// A round of `sync_all`/`barrier_all`: the flag of the PE in the error's PE field.
    pub const SYNC_ALL: u32 = 2;
    /// A free slot of the proxy ring (the host's proxy thread must take requests).
    pub const PROXY_SLOT: u32 = 3;
    /// The completion of a proxy request to the PE in the error's PE field.
    pub const PROXY_COMPLETION: u32 = 4;
    /// `quiet` through the proxy: completion of every earlier request.
    pub const PROXY_QUIET: u32 = 5;
    /// `wait_until_all[_vector]`: the error's word is the first element.
    pub const WAIT_UNTIL_ALL: u32 = 6;
    /// `wait_until_any[_vector]`: the error's word is the first element.
    pub const WAIT_UNTIL_ANY: u32 = 7;
    /// `wait_until_some[_vector]`: the error's word is the first element.
    pub const WAIT_UNTIL_SOME: u32 = 8;
    /// The comparison field of a wait without one.
    pub const NO_CMP: u32 = u32::MAX;

    /// The name of wait `op` in messages.
    pub fn name(op: u32) -> &'static str {
        match op {
            WAIT_UNTIL => "wait_until",
            SYNC_ALL => "sync_all",
            PROXY_SLOT => "proxy ring slot",
            PROXY_COMPLETION => "proxy request completion",
            PROXY_QUIET => "proxy quiet",
            WAIT_UNTIL_ALL => "wait_until_all",
            WAIT_UNTIL_ANY => "wait_until_any",
            WAIT_UNTIL_SOME => "wait_until_some",
            _ => "wait",
        }
    }
}

/// What a device wait waits for: reported if it outlasts [`DeviceState::wait_timeout_ms`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitSite {
    /// A [`wait_op`].
    pub op: u32,
    /// The [`crate::op_kinds::Cmp`] code of the condition, or [`wait_op::NO_CMP`].
    pub cmp: u32,
    /// The PE whose write ends the wait, or [`ANY_PE`].
    pub pe: u32,
    /// The polled word's address (0: not one word).
    pub addr: u64,
    /// The value waited for.
    pub wanted: u64,
}

/// How long a device wait waits before it publishes itself in the [`WaitRecord`]: waits
/// that end sooner (nearly all) never touch it. Well below the hang report's shortest
/// delay (a second).
pub const WAIT_RECORD_AFTER_MS: u64 = 10;

/// One slow device wait of a PE, at [`DeviceState::wait_record`] (host-mapped memory on a
/// GPU PE): what it waits for, published while the kernel runs so that the host can name
/// it in a hang report.
///
/// **One record per PE, one owner.** Many threads may wait at once; the first whose wait
/// has lasted [`WAIT_RECORD_AFTER_MS`] claims the record (compare-and-swap of `owner` from
/// 0 to 1), fills it, refreshes `seen` and `now_ns` while it waits, and clears it and
/// releases `owner` when its wait ends. Another slow wait claims it then, at its next
/// check. The hang report names one wait per PE anyway (its oldest); the others wait for
/// the same hang, or behind the recorded one. A kernel that traps leaves its record
/// claimed: its context is lost with it.
///
/// **A sequence lock for the host.** The owner makes `seq` odd, fences, writes the fields,
/// then makes `seq` even with a release store; the host reads `seq`, the fields, fences
/// (acquire) and reads `seq` again, and keeps what it read only if both reads are the same
/// even number.
///
/// ```text
/// offset  field
///  0      owner    u64   0 = free, 1 = claimed by the thread whose wait it holds
///  8      seq      u64   sequence lock: odd while the owner writes
/// 16      wait     u64   the wait's wait_op (low 32 bits) and Cmp code or NO_CMP (high 32); 0 = none
/// 24      pe       u64   the PE whose write ends the wait, or ANY_PE
/// 32      addr     u64   the polled word (0: not one word)
/// 40      wanted   u64   the value waited for
/// 48      seen     u64   the value last seen
/// 56      since_ns u64   device clock (ns) when the wait began to back off
/// 64      now_ns   u64   device clock (ns) at the owner's last write: now_ns - since_ns is how long it has waited
/// 72               (size)
/// ```
///
/// The device clock is `%globaltimer` on a GPU and nanoseconds since a process-wide origin
/// on the CPU executor: the host uses only the difference of the two stamps.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct WaitRecord {
    /// 0 = free; 1 = claimed by the thread whose wait the record holds.
    pub owner: u64,
    /// Sequence lock: odd while the owner writes the fields below.
    pub seq: u64,
    /// The wait's [`wait_op`] (low 32 bits) and [`crate::op_kinds::Cmp`] code or
    /// [`wait_op::NO_CMP`] (high 32 bits); 0 = no wait recorded.
    pub wait: u64,
    /// The PE whose write ends the wait, or [`ANY_PE`].
    pub pe: u64,
    /// The polled word's address (0: not one word).
    pub addr: u64,
    /// The value waited for.
    pub wanted: u64,
    /// The value last seen.
    pub seen: u64,
    /// Device clock (ns) when the wait began to back off.
    pub since_ns: u64,
    /// Device clock (ns) at the owner's last write.
    pub now_ns: u64,
}

// Part of the contract with every PTX module, as `DeviceState` is.
const _: () = {
    use core::mem::{align_of, offset_of, size_of};
    assert!(size_of::<WaitRecord>() == 72);
    assert!(align_of::<WaitRecord>() == 8);
    assert!(offset_of!(WaitRecord, owner) == 0);
    assert!(offset_of!(WaitRecord, seq) == 8);
    assert!(offset_of!(WaitRecord, wait) == 16);
    assert!(offset_of!(WaitRecord, pe) == 24);
    assert!(offset_of!(WaitRecord, addr) == 32);
    assert!(offset_of!(WaitRecord, wanted) == 40);
    assert!(offset_of!(WaitRecord, seen) == 48);
    assert!(offset_of!(WaitRecord, since_ns) == 56);
    assert!(offset_of!(WaitRecord, now_ns) == 64);
};

impl WaitRecord {
    /// The recorded wait, as a [`WaitSite`], with the value last seen and how long it has
    /// waited (ns); `None` when the record holds no wait.
    pub fn site(&self) -> Option<(WaitSite, u64, u64)> {
        (self.wait != 0).then(|| {
            let site = WaitSite {
                op: self.wait as u32,
                cmp: (self.wait >> 32) as u32,
                pe: self.pe as u32,
                addr: self.addr,
                wanted: self.wanted,
            };
            (site, self.seen, self.now_ns.saturating_sub(self.since_ns))
        })
    }
}

/// Error codes the device writes to [`DeviceState::error`] before trapping. The low 32
/// bits hold the code, the high 32 bits the PE involved.
pub mod error_code {
    /// A device operation targeted a PE with no P2P path and no proxy channel.
    pub const UNREACHABLE_PE: u32 = 1;
    /// A device operation named a PE outside `0..n_pes`.
    pub const INVALID_PE: u32 = 2;
    /// A device operation ran with no initialized `DeviceState`.
    pub const NOT_INITIALIZED: u32 = 3;
    /// The proxy channel failed (the remote transport could not issue a request to the
    /// PE in the high bits); the runtime holds the transport's error.
    pub const PROXY_FAILED: u32 = 4;
    /// A device collective named a team PE (the root of a broadcast) outside its team;
    /// the high bits hold that team PE number.
    pub const INVALID_TEAM_PE: u32 = 5;
    /// A device collective got a team handle that does not describe a team of this PE
    /// (not from `Team::device`, or another PE's); the high bits hold this PE.
    pub const INVALID_TEAM: u32 = 6;
    /// A device wait outlasted [`super::DeviceState::wait_timeout_ms`]; the high bits
    /// hold the PE it waited for ([`super::ANY_PE`]: any), the rest of the
    /// [`super::ErrorRecord`] what it waited for.
    pub const WAIT_TIMEOUT: u32 = 7;
    /// A device wait stopped because the host found a failed peer
    /// ([`super::ErrorRecord::peer_failed`]); the high bits hold the PE it waited for,
    /// the rest of the record what it waited for, as for [`WAIT_TIMEOUT`].
    pub const PEER_FAILED: u32 = 8;
    /// A kernel thread panicked; the high bits hold this PE, the record's
    /// [`super::ErrorRecord::panic`] where and which thread.
    pub const PANIC: u32 = 9;
}
