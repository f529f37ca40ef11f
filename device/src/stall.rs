//! How a slow device wait publishes itself in its PE's [`WaitRecord`] for the hang report
//! (the protocol is described there): one owner at a time, claimed with a compare-and-swap,
//! its fields written under a sequence lock the host reads.
//!
//! The same code runs on a GPU (system-scope PTX through [`crate::arch`]: relaxed stores,
//! `fence.sc.sys`, a release store, a relaxed system-scope CAS) and on the CPU executor
//! (Rust atomics). Not named `*wait*`: the PTX check holds functions so named to the rules
//! of waits, and these are not waits.

use core::ptr::addr_of_mut;

use crate::arch;
use crate::state::{WaitRecord, WaitSite, WAIT_RECORD_AFTER_MS};

/// One wait's part in its PE's record: whether it owns it.
pub(crate) struct Stall {
    /// The record this wait owns (its address), 0 while it owns none.
    owned: u64,
}

impl Stall {
    /// A wait that owns no record.
    #[inline(always)]
    pub(crate) const fn new() -> Self {
        Stall { owned: 0 }
    }

    /// A slow round of a wait for `site` that began to back off at device time `since_ns`
    /// and last saw `seen`, at device time `now_ns`, on a PE whose record is at `rec` (0:
    /// none). Once the wait has lasted [`WAIT_RECORD_AFTER_MS`] it claims the record if it
    /// is free and fills it; the owner refreshes the value seen and the time.
    #[inline(always)]
    pub(crate) fn note(
        &mut self,
        rec: u64,
        site: &WaitSite,
        seen: u64,
        since_ns: u64,
        now_ns: u64,
    ) {
        if rec == 0 || now_ns.wrapping_sub(since_ns) < WAIT_RECORD_AFTER_MS * 1_000_000 {
            return;
        }
        let rec = rec as *mut WaitRecord;
        if self.owned != 0 {
            // SAFETY: the state's record, which this wait owns.
            unsafe { refresh(rec, seen, now_ns) };
        // SAFETY: the state's record: host-provided, aligned, reachable by the device.
        } else if unsafe { claim(rec, site, seen, since_ns, now_ns) } {
            self.owned = rec as u64;
        }
    }

    /// The wait ended (or unwinds): clears and releases the record if it owns it.
    #[inline(always)]
    pub(crate) fn end(&mut self) {
        if self.owned != 0 {
            // SAFETY: the record this wait claimed and still owns.
            unsafe { release(self.owned as *mut WaitRecord) };
            self.owned = 0;
        }
    }
}

/// Claims the record at `rec` for a wait for `site` and fills it; false if another wait
/// owns it.
///
/// # Safety
/// `rec` must be the state's [`WaitRecord`]: aligned, and reachable by this thread.
#[cold]
#[inline(never)]
unsafe fn claim(
    rec: *mut WaitRecord,
    site: &WaitSite,
    seen: u64,
    since_ns: u64,
    now_ns: u64,
) -> bool {
    // SAFETY: the caller's contract.
    unsafe {
        let owner = addr_of_mut!((*rec).owner);
        // A relaxed read first: the record is usually taken by the first slow thread, and
        // a read does not contend as a CAS does.
        if arch::load_relaxed_u64(owner) != 0 || arch::atom_cas_u64(owner, 0, 1) != 0 {
            return false;
        }
        // With the previous owner's release of `owner`, which the CAS read, this fence
        // makes its last `seq` visible: the sequence goes on from there and never repeats
        // a value the host may hold.
        arch::fence_sys();
        write(rec, |r| {
            arch::store_relaxed_u64(
                addr_of_mut!((*r).wait),
                site.op as u64 | (site.cmp as u64) << 32,
            );
            arch::store_relaxed_u64(addr_of_mut!((*r).pe), site.pe as u64);
            arch::store_relaxed_u64(addr_of_mut!((*r).addr), site.addr);
            arch::store_relaxed_u64(addr_of_mut!((*r).wanted), site.wanted);
            arch::store_relaxed_u64(addr_of_mut!((*r).seen), seen);
            arch::store_relaxed_u64(addr_of_mut!((*r).since_ns), since_ns);
            arch::store_relaxed_u64(addr_of_mut!((*r).now_ns), now_ns);
        });
    }
    true
}

/// The owner's refresh of the value seen and the time.
///
/// # Safety
/// `rec` must be the state's [`WaitRecord`], owned by the calling wait.
#[cold]
#[inline(never)]
unsafe fn refresh(rec: *mut WaitRecord, seen: u64, now_ns: u64) {
    // SAFETY: the caller's contract.
    unsafe {
        write(rec, |r| {
            arch::store_relaxed_u64(addr_of_mut!((*r).seen), seen);
            arch::store_relaxed_u64(addr_of_mut!((*r).now_ns), now_ns);
        })
    }
}

/// Clears the record (no wait) and gives it up.
///
/// # Safety
/// `rec` must be the state's [`WaitRecord`], owned by the calling wait.
#[cold]
#[inline(never)]
unsafe fn release(rec: *mut WaitRecord) {
    // SAFETY: the caller's contract.
    unsafe {
        write(rec, |r| arch::store_relaxed_u64(addr_of_mut!((*r).wait), 0));
        // Release: the next owner's CAS reads this store, and its fence then sees `seq`.
        arch::store_release_u64(addr_of_mut!((*rec).owner), 0);
    }
}

/// The owner's write of some fields, `fields`, under the sequence lock: `seq` odd, a
/// system fence (the host must not see a field before the odd `seq`), the fields, then
/// `seq` even with a release store (the fields before it). A `seq` left odd (a kernel
/// that trapped while writing) is taken as it is, so that the write still ends even.
///
/// # Safety
/// `rec` must be the state's [`WaitRecord`], owned by the calling wait; `fields` writes
/// only its fields other than `owner` and `seq`.
#[inline(always)]
unsafe fn write(rec: *mut WaitRecord, fields: impl FnOnce(*mut WaitRecord)) {
    // SAFETY: the caller's contract; only the owner writes `seq`.
    unsafe {
        let seq = addr_of_mut!((*rec).seq);
        let odd = arch::load_relaxed_u64(seq) | 1;
        arch::store_relaxed_u64(seq, odd);
        arch::fence_sys();
        fields(rec);
        arch::store_release_u64(seq, odd.wrapping_add(1));
    }
}
