//! The cold path of every device operation to a PE with no P2P pointer: the request goes
//! through this PE's proxy channel ([`crate::proxy`]) to the proxy thread, which issues it
//! on the remote transport.
//!
//! - Puts and gets carry `local` addresses, which the proxy reads or writes (on CPU PEs
//!   plain host memory; on GPU PEs the proxy thread stages them through a pinned buffer
//!   with copies on its own stream). A blocking put or get waits until the proxy has read
//!   the source or written the destination; `_nbi` forms return once the request is in
//!   the ring, and `quiet` completes them.
//! - Puts and gets on a GPU PE must name global memory (the symmetric heap, or other
//!   device allocations): the proxy copies them with the CUDA driver, which cannot reach a
//!   thread's local or shared memory.
//! - `p` and `g` carry the value inline (`local == 0`, the value in `value` or the slot's
//!   result), 8 bytes per request, so they need no staging and never take the address of
//!   a thread's value.
//! - Warp and block forms: one thread (lane 0, thread 0) submits the whole transfer and
//!   the group barrier follows, so each group transfer is one request.
//! - A failed channel (the transport or a staging copy failed) fails the kernel with
//!   [`error_code::PROXY_FAILED`] and the PE of the failed request; the runtime reports
//!   the transport's error with it.

use crate::arch;
use crate::op_kinds::{AmoKind, SignalOp};
use crate::proxy::{Failed, Ring};
use crate::request::Request;
use crate::state::{error_code, wait_op, WaitSite, ANY_PE};

/// The PE's ring. Only called when `DeviceState::proxy != 0`.
#[inline(always)]
fn ring() -> Ring<'static> {
    // SAFETY: the runtime points `proxy` at a ring it keeps mapped (and capacity set)
    // for as long as kernels of this PE can run.
    unsafe { Ring::from_raw(arch::state().proxy as *mut u8) }
}

/// A wait of the proxy channel for `pe` (a slot, a completion): no one word to name.
#[inline(always)]
fn proxy_wait(op: u32, pe: u32) -> WaitSite {
    WaitSite {
        op,
        cmp: wait_op::NO_CMP,
        pe,
        addr: 0,
        wanted: 0,
    }
}

/// Fails the kernel for a failed channel.
#[cold]
fn failed(f: Failed) -> ! {
    arch::fail(error_code::PROXY_FAILED, f.pe)
}

/// Submits `req`; with `wait`, waits for its completion and returns the result.
#[inline(never)]
#[cold]
pub(crate) fn submit(req: Request, wait: bool) -> u64 {
    let ring = ring();
    let mut backoff = arch::Backoff::new(proxy_wait(wait_op::PROXY_SLOT, ANY_PE));
    let ticket = match ring.submit(&req, wait, || backoff.snooze(0)) {
        Ok(t) => t,
        Err(f) => failed(f),
    };
    if !wait {
        return 0;
    }
    let mut backoff = arch::Backoff::new(proxy_wait(wait_op::PROXY_COMPLETION, req.pe));
    match ring.wait_result(ticket, || backoff.snooze(0)) {
        Ok(v) => v,
        Err(f) => failed(f),
    }
}

/// A put of `len` bytes from local `src` to heap offset `dst` on `pe`.
#[inline(always)]
pub(crate) fn put(pe: u32, dst: u64, src: u64, len: u64, nbi: bool) {
    if len != 0 {
        submit(Request::put(pe, dst, src, len), !nbi);
    }
}

/// A put of `len` bytes from local `src` to heap offset `dst` on `pe`, then the signal
/// update of the u64 at heap offset `sig`: one request, which every transport applies
/// data first.
#[inline(always)]
#[allow(clippy::too_many_arguments)] // the request's fields, one by one
pub(crate) fn put_signal(
    pe: u32,
    dst: u64,
    src: u64,
    len: u64,
    sig: u64,
    op: SignalOp,
    value: u64,
    nbi: bool,
) {
    submit(Request::put_signal(pe, dst, src, len, sig, op, value), !nbi);
}

/// A get of `len` bytes from heap offset `src` on `pe` to local `dst`.
#[inline(always)]
pub(crate) fn get(pe: u32, dst: u64, src: u64, len: u64, nbi: bool) {
    if len != 0 {
        submit(Request::get(pe, dst, src, len), !nbi);
    }
}

/// `p` of the `len` bytes at `value` to heap offset `dst` on `pe`: inline requests of up
/// to 8 bytes each. Never by address: a thread's value lives in registers or, on a GPU,
/// in local memory, which the proxy cannot copy from.
///
/// # Safety
/// `value` must be readable for `len` bytes.
#[inline(always)]
pub(crate) unsafe fn p_bytes(pe: u32, dst: u64, value: *const u8, len: usize) {
    let mut at = 0;
    while at < len {
        let n = (len - at).min(8);
        let mut bits = [0u8; 8];
        // SAFETY: `at + n <= len` bytes of `value` are readable (caller contract).
        unsafe { core::ptr::copy_nonoverlapping(value.add(at), bits.as_mut_ptr(), n) };
        let mut r = Request::put(pe, dst + at as u64, 0, n as u64);
        r.value = u64::from_le_bytes(bits);
        submit(r, false);
        at += n;
    }
}

/// `g` of `len` bytes at heap offset `src` on `pe` into `out`: inline requests of up to 8
/// bytes each (see [`p_bytes`]).
///
/// # Safety
/// `out` must be writable for `len` bytes.
#[inline(always)]
pub(crate) unsafe fn g_bytes(pe: u32, src: u64, out: *mut u8, len: usize) {
    let mut at = 0;
    while at < len {
        let n = (len - at).min(8);
        let bits = submit(Request::get(pe, 0, src + at as u64, n as u64), true).to_le_bytes();
        // SAFETY: `at + n <= len` bytes of `out` are writable (caller contract).
        unsafe { core::ptr::copy_nonoverlapping(bits.as_ptr(), out.add(at), n) };
        at += n;
    }
}

/// An AMO of `width` bytes; waits for (and returns) the old value when `fetch`.
#[inline(always)]
pub(crate) fn amo(
    pe: u32,
    kind: AmoKind,
    width: u8,
    at: u64,
    value: u64,
    compare: u64,
    fetch: bool,
) -> u64 {
    submit(
        Request::amo(pe, kind, width, at, value, compare, fetch as u64),
        fetch,
    )
}

/// A signal update of the u64 at heap offset `sig` on `pe`.
#[inline(always)]
pub(crate) fn signal(pe: u32, sig: u64, op: SignalOp, value: u64) {
    submit(Request::signal(pe, sig, op, value), false);
}

/// `fence`: orders this PE's earlier proxy requests to each PE before later ones.
#[inline(always)]
pub(crate) fn fence() {
    submit(Request::fence(), false);
}

/// `quiet`: returns once every earlier proxy request of this PE is complete at its target.
#[inline(never)]
#[cold]
pub(crate) fn quiet() {
    let ring = ring();
    let mut backoff = arch::Backoff::new(proxy_wait(wait_op::PROXY_SLOT, ANY_PE));
    let ticket = match ring.submit(&Request::quiet(), false, || backoff.snooze(0)) {
        Ok(t) => t,
        Err(f) => failed(f),
    };
    let mut backoff = arch::Backoff::new(proxy_wait(wait_op::PROXY_QUIET, ANY_PE));
    if let Err(f) = ring.wait_quiet(ticket, || backoff.snooze(0)) {
        failed(f)
    }
}
