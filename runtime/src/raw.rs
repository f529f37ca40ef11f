//! Raw addresses into the symmetric heap, for the C API (`symmem-capi`).
//!
//! C names symmetric memory by plain pointers: `shmem_long_put(dest, src, n, pe)` passes
//! `dest` as an address in the caller's own copy of the heap. [`Runtime::view_at`] turns
//! such an address and an element count into a [`SymBuf`] *view*: a handle on the same
//! heap range, which every typed operation then checks and routes as usual. A view is
//! bounds-checked against the part of the heap that allocations use (not against one
//! allocation: OpenSHMEM lets an access span neighbouring allocations), so it can never
//! reach the runtime's reserve, the team area, or anything outside the mapping.
//!
//! A view is not an allocation: it has the id [`VIEW_ID`], and dropping it frees
//! nothing. Passing one to [`Runtime::free`] is refused by the allocation check.

use std::marker::PhantomData;
use std::sync::atomic::Ordering;

use crate::allocator::MIN_ALIGN;
use crate::error::{Error, Result};
use crate::heap::RESERVED;
use crate::runtime::Runtime;
use crate::sym::SymBuf;
use crate::team::TeamState;

/// The allocation id of every view made by [`Runtime::view_at`] (errors print it as
/// "allocation #18446744073709551615").
pub const VIEW_ID: u64 = u64::MAX;

impl Runtime {
    /// This PE's heap as this process sees it: `(address, length)` of the whole mapping,
    /// the runtime's reserved start included. On a GPU PE the address is a device address.
    pub fn heap_local_range(&self) -> (usize, usize) {
        let base = self
            .heap
            .base(self.my_pe())
            .expect("own heap is always mapped") as usize;
        (base, self.heap.len())
    }

    /// The heap offset where allocations start: after the runtime's reserve and the team
    /// area (the same computation as the allocator's base at init).
    fn user_start(&self) -> usize {
        RESERVED
            + TeamState::area_bytes(self.config.max_teams, self.n_pes()).next_multiple_of(MIN_ALIGN)
    }

    /// The heap offset of `addr` if it lies in the part of this PE's heap that allocations
    /// use, else `None`.
    pub fn heap_offset_of(&self, addr: usize) -> Option<usize> {
        let (base, len) = self.heap_local_range();
        let off = addr.checked_sub(base)?;
        (off >= self.user_start() && off < len).then_some(off)
    }

    /// A view of `len` elements of `T` at `addr` in this PE's heap (the symmetric address
    /// of the same elements on every PE), for operations that take a [`SymBuf`]. `op`
    /// names the operation in errors.
    ///
    /// Fails with [`Error::InvalidArgument`] naming the address, the size, this PE and its
    /// heap's range when the elements are not all inside the allocatable part of the heap,
    /// or when `addr` is not aligned for `T`.
    pub fn view_at<T>(&self, op: &'static str, addr: *const T, len: usize) -> Result<SymBuf<T>> {
        let size = std::mem::size_of::<T>();
        let addr = addr as usize;
        let (base, heap_len) = self.heap_local_range();
        let start = self.user_start();
        let bytes = len.checked_mul(size);
        let inside = addr
            .checked_sub(base)
            .filter(|&off| off >= start)
            .and_then(|off| Some((off, off.checked_add(bytes?)?)))
            .filter(|&(_, end)| end <= heap_len);
        let Some((offset, _)) = inside else {
            return Err(Error::InvalidArgument {
                op,
                reason: format!(
                    "address {addr:#x} ({len} elements of {size} bytes) is not inside the symmetric heap of PE {} ({:#x}..{:#x})",
                    self.my_pe(),
                    base + start,
                    base + heap_len
                ),
            });
        };
        if !addr.is_multiple_of(std::mem::align_of::<T>()) {
            return Err(Error::InvalidArgument {
                op,
                reason: format!(
                    "address {addr:#x} on PE {} is not aligned to {} bytes, as its element type ({size} bytes) needs",
                    self.my_pe(),
                    std::mem::align_of::<T>()
                ),
            });
        }
        Ok(SymBuf {
            runtime: self.id,
            id: VIEW_ID,
            offset,
            len,
            _elem: PhantomData,
        })
    }

    /// Waits until `ready` returns true, under the runtime's one wait policy: the shared
    /// backoff, the checks for dead or departed peers, and `SYMMEM_TIMEOUT` (whose error
    /// names the operation `op` and `waiting_for()`). For waits on words the typed waits
    /// do not cover (the C API's 2-byte ivars).
    pub fn wait_local(
        &self,
        op: &'static str,
        waiting_for: impl Fn() -> String,
        ready: impl FnMut() -> bool,
    ) -> Result<()> {
        self.wait_for(op, waiting_for, ready)
    }

    /// Tells every PE that this one is ending the job (`shmem_global_exit`): records the
    /// failure cause, marks this PE as finalizing so that same-node peers waiting on it
    /// fail at once, and aborts the bootstrap with `reason`, which the other PEs' waits
    /// then report. The caller exits the process afterwards.
    pub fn abort_job(&self, reason: &str) {
        self.record_failure_cause();
        if let Some(cb) = self.heap.control(self.my_pe()) {
            cb.finalizing.0.store(1, Ordering::Release);
        }
        self.bootstrap.abort(reason);
    }
}
