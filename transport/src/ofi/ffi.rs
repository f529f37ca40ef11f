//! The C shim's interface (`shim.c`, compiled by the build script and linked with
//! libfabric): opaque endpoints, and calls that return 0 (or a count) or a negative
//! libfabric error code.

use std::ffi::{c_char, c_int, c_void};

/// An open endpoint with its fabric, domain, address vector, CQ, counter and MRs.
#[repr(C)]
pub(super) struct SymmemOfi {
    _private: [u8; 0],
}

/// What the endpoint was opened with.
#[repr(C)]
pub(super) struct Attrs {
    /// The provider's name (`tcp;ofi_rxm`).
    pub provider: [c_char; 64],
    /// The fabric's name.
    pub fabric: [c_char; 64],
    /// The domain's name.
    pub domain: [c_char; 64],
    /// The heap registration's key.
    pub heap_key: u64,
    /// The domain's `FI_MR_*` mode bits.
    pub mr_mode: u64,
    /// Whether the provider needs the application to drive progress.
    pub manual_progress: c_int,
    /// The largest message (one write or read).
    pub max_msg_size: usize,
    /// The largest injected message.
    pub inject_size: usize,
    /// The `FI_ORDER_RMA_*`, `FI_ORDER_ATOMIC_*` and generic `FI_ORDER_RAR/RAW/WAR/WAW`
    /// bits the provider promises (transmit and receive side alike): which RMA and atomic
    /// operations to a peer stay in order, within each kind and across them.
    pub order: u64,
    /// Whether completions mean delivery (`FI_DELIVERY_COMPLETE` granted).
    pub delivery_complete: c_int,
    /// The CQ's wait object (a file descriptor that polls readable when progress has work),
    /// or -1.
    pub wait_fd: c_int,
    /// The largest operations whose data the provider places in order after an earlier
    /// operation's: read after write, write after read, write after write
    /// (`max_order_{raw,war,waw}_size`).
    pub max_order_size: [usize; 3],
    /// Whether sends to a peer are received in order (`FI_ORDER_SAS`).
    pub sends_in_order: c_int,
    /// Whether the endpoint has messages (`FI_MSG`).
    pub messages: c_int,
    /// Whether receive completions name their source (`FI_SOURCE`).
    pub sources: c_int,
    /// Bytes of a memory key the application may choose (`mr_key_size`).
    pub mr_key_size: usize,
    /// Whether operations may carry `FI_FENCE` (the endpoint was opened with it).
    pub fence: c_int,
}

impl Default for Attrs {
    fn default() -> Self {
        Attrs {
            provider: [0; 64],
            fabric: [0; 64],
            domain: [0; 64],
            heap_key: 0,
            mr_mode: 0,
            manual_progress: 0,
            max_msg_size: 0,
            inject_size: 0,
            order: 0,
            delivery_complete: 0,
            wait_fd: -1,
            max_order_size: [0; 3],
            sends_in_order: 0,
            messages: 0,
            sources: 0,
            mr_key_size: 0,
            fence: 0,
        }
    }
}

/// `FI_MR_LOCAL`: every local buffer must be registered (the bounce buffer is).
pub(super) const FI_MR_LOCAL: u64 = 1 << 2;
/// `FI_MR_PROV_KEY`: the provider picks memory keys (the heap's random key is ignored).
pub(super) const FI_MR_PROV_KEY: u64 = 1 << 6;
/// `FI_MR_VIRT_ADDR`: remote addresses are the target's virtual addresses (else offsets).
pub(super) const FI_MR_VIRT_ADDR: u64 = 1 << 4;
/// `FI_ORDER_RMA_RAR`: RMA reads after RMA reads stay in order; the next three bits are
/// `RMA_RAW`, `RMA_WAR`, `RMA_WAW`, then the same four for atomics (`FI_ORDER_ATOMIC_*`).
pub(super) const ORDER_RMA_RAR: u64 = 1 << 32;
/// `FI_ORDER_ATOMIC_RAR`.
pub(super) const ORDER_ATOMIC_RAR: u64 = 1 << 36;
/// Offsets from a kind's `RAR` bit: read after write, write after read, write after write.
pub(super) const RAW: u32 = 1;
/// See [`RAW`].
pub(super) const WAR: u32 = 2;
/// See [`RAW`].
pub(super) const WAW: u32 = 3;
/// `FI_ORDER_RAR`: reads after reads stay in order, RMA and atomics alike; the next bits
/// are `FI_ORDER_RAW` (bit 1), `FI_ORDER_WAR` (bit 3) and `FI_ORDER_WAW` (bit 4).
pub(super) const ORDER_RAR: u64 = 1 << 0;
/// `FI_ORDER_RAW`.
pub(super) const ORDER_RAW: u64 = 1 << 1;
/// `FI_ORDER_WAR`.
pub(super) const ORDER_WAR: u64 = 1 << 3;
/// `FI_ORDER_WAW`.
pub(super) const ORDER_WAW: u64 = 1 << 4;
/// `-FI_EAGAIN`: the endpoint is busy; progress and retry.
pub(super) const EAGAIN: isize = -11;
/// `-FI_ENODATA`: no provider matches.
pub(super) const ENODATA: c_int = -61;
/// `enum fi_op` (rdma/fi_domain.h): `FI_SUM`.
pub(super) const OP_SUM: c_int = 2;
/// `FI_BOR`.
pub(super) const OP_BOR: c_int = 6;
/// `FI_BAND`.
pub(super) const OP_BAND: c_int = 7;
/// `FI_BXOR`.
pub(super) const OP_BXOR: c_int = 9;
/// `FI_ATOMIC_READ`.
pub(super) const OP_ATOMIC_READ: c_int = 10;
/// `FI_ATOMIC_WRITE`.
pub(super) const OP_ATOMIC_WRITE: c_int = 11;

extern "C" {
    pub(super) fn symmem_ofi_providers(out: *mut c_char, len: usize) -> c_int;
    pub(super) fn symmem_ofi_open(
        prov: *const c_char,
        domain: *const c_char,
        fabric: *const c_char,
        heap: *mut c_void,
        heap_len: usize,
        heap_cuda_device: c_int,
        bounce: *mut c_void,
        bounce_len: usize,
        ordered_bytes: usize,
        wait: c_int,
        heap_key: u64,
        out: *mut *mut SymmemOfi,
        attrs: *mut Attrs,
        err: *mut c_char,
        errlen: usize,
    ) -> c_int;
    pub(super) fn symmem_ofi_hmem(prov: *const c_char) -> c_int;
    pub(super) fn symmem_ofi_domains(
        prov: *const c_char,
        hmem: c_int,
        out: *mut c_char,
        len: usize,
    ) -> c_int;
    pub(super) fn symmem_ofi_known(prov: *const c_char) -> c_int;
    pub(super) fn symmem_ofi_close(o: *mut SymmemOfi);
    pub(super) fn symmem_ofi_trywait(o: *mut SymmemOfi) -> c_int;
    pub(super) fn symmem_ofi_name(o: *mut SymmemOfi, buf: *mut c_void, len: *mut usize) -> c_int;
    pub(super) fn symmem_ofi_insert(
        o: *mut SymmemOfi,
        addrs: *const c_void,
        addrlen: usize,
        n: usize,
        err: *mut c_char,
        errlen: usize,
    ) -> c_int;
    pub(super) fn symmem_ofi_read(
        o: *mut SymmemOfi,
        op: u64,
        local: *mut c_void,
        bounce: c_int,
        len: usize,
        pe: usize,
        raddr: u64,
        key: u64,
    ) -> isize;
    pub(super) fn symmem_ofi_recv(
        o: *mut SymmemOfi,
        context: u64,
        buf: *mut c_void,
        len: usize,
    ) -> isize;
    pub(super) fn symmem_ofi_send(
        o: *mut SymmemOfi,
        op: u64,
        buf: *const c_void,
        len: usize,
        pe: usize,
    ) -> isize;
    pub(super) fn symmem_ofi_inject(
        o: *mut SymmemOfi,
        buf: *const c_void,
        len: usize,
        pe: usize,
    ) -> isize;
    #[allow(clippy::too_many_arguments)] // libfabric's own operands
    pub(super) fn symmem_ofi_write_ex(
        o: *mut SymmemOfi,
        op: u64,
        local: *const c_void,
        bounce: c_int,
        len: usize,
        pe: usize,
        raddr: u64,
        key: u64,
        at_delivery: c_int,
        inject: c_int,
        fence: c_int,
    ) -> isize;
    #[allow(clippy::too_many_arguments)] // libfabric's own operands
    pub(super) fn symmem_ofi_read_ex(
        o: *mut SymmemOfi,
        op: u64,
        local: *mut c_void,
        bounce: c_int,
        len: usize,
        pe: usize,
        raddr: u64,
        key: u64,
        fence: c_int,
    ) -> isize;
    #[allow(clippy::too_many_arguments)] // libfabric's own operands
    pub(super) fn symmem_ofi_atomic_ex(
        o: *mut SymmemOfi,
        id: u64,
        operand: *const c_void,
        width: c_int,
        op: c_int,
        pe: usize,
        raddr: u64,
        key: u64,
        fence: c_int,
    ) -> isize;
    #[allow(clippy::too_many_arguments)] // libfabric's own operands
    pub(super) fn symmem_ofi_fetch_atomic_ex(
        o: *mut SymmemOfi,
        id: u64,
        operand: *const c_void,
        result: *mut c_void,
        width: c_int,
        op: c_int,
        pe: usize,
        raddr: u64,
        key: u64,
        fence: c_int,
    ) -> isize;
    #[allow(clippy::too_many_arguments)] // libfabric's own operands
    pub(super) fn symmem_ofi_compare_atomic_ex(
        o: *mut SymmemOfi,
        id: u64,
        operand: *const c_void,
        compare: *const c_void,
        result: *mut c_void,
        width: c_int,
        pe: usize,
        raddr: u64,
        key: u64,
        fence: c_int,
    ) -> isize;
    #[allow(clippy::too_many_arguments)] // the completions' fields, then the error's
    pub(super) fn symmem_ofi_completed_from(
        o: *mut SymmemOfi,
        ops: *mut u64,
        lens: *mut usize,
        sources: *mut u64,
        max: usize,
        failed_op: *mut u64,
        err: *mut c_char,
        errlen: usize,
    ) -> i64;
}

/// The text the shim wrote into `buf`.
pub(super) fn text(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}
