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
//! A view is not an allocation: a [`SymView`] derefs to the [`SymBuf`] that operations
//! take, with the id [`VIEW_ID`], but it cannot be passed to [`Runtime::free`] (which
//! takes an owned `SymBuf`), and dropping it frees nothing.

use std::marker::PhantomData;
use std::ops::Deref;
use std::sync::atomic::Ordering;

use crate::allocator::MIN_ALIGN;
use crate::error::{Error, Result};
use crate::heap::RESERVED;
use crate::runtime::Runtime;
use crate::sym::SymBuf;
use crate::team_state::TeamState;

/// The allocation id of every view made by [`Runtime::view_at`] (errors print it as
/// "allocation #18446744073709551615").
pub const VIEW_ID: u64 = u64::MAX;

/// Symmetric heap memory named by address ([`Runtime::view_at`]): use it as the
/// [`SymBuf`] it derefs to (`view.at(i)`, `&view`). It is not an allocation, so it
/// cannot be freed:
///
/// ```compile_fail
/// # fn f(rt: &symmem_runtime::Runtime, view: symmem_runtime::SymView<u64>) {
/// rt.free(view).unwrap(); // expected `SymBuf<_>`, found `SymView<u64>`
/// # }
/// ```
#[derive(Debug)]
pub struct SymView<T>(SymBuf<T>);

impl<T> Deref for SymView<T> {
    type Target = SymBuf<T>;
    fn deref(&self) -> &SymBuf<T> {
        &self.0
    }
}

impl Runtime {
    /// This PE's heap as this process sees it: `(address, length)` of the whole mapping,
    /// the runtime's reserved start included. On a GPU PE the address is a device address.
    pub fn heap_local_range(&self) -> (usize, usize) {
        let base = self
            .path
            .heap()
            .base(self.my_pe())
            .expect("own heap is always mapped") as usize;
        (base, self.path.heap().len())
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
    /// names the operation in errors. An access through it may span neighbouring
    /// allocations, never the runtime's reserve or the end of the heap.
    ///
    /// Fails with [`Error::InvalidArgument`] naming the address, the size, this PE and its
    /// heap's range when the elements are not all inside the allocatable part of the heap,
    /// or when `addr` is not aligned for `T`.
    pub fn view_at<T>(&self, op: &'static str, addr: *const T, len: usize) -> Result<SymView<T>> {
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
        Ok(SymView(SymBuf {
            runtime: self.path.runtime_id(),
            id: VIEW_ID,
            offset,
            len,
            _elem: PhantomData,
        }))
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
        if let Some(cb) = self.path.heap().control(self.my_pe()) {
            cb.finalizing.0.store(1, Ordering::Release);
        }
        self.bootstrap.abort(reason);
    }
}

#[cfg(test)]
mod tests {
    use crate::error::Error;

    /// Views on a one-PE runtime: the view of an allocation's address has its offset and
    /// reaches its memory; addresses outside the allocatable heap, overlong ranges and
    /// misaligned addresses are refused with the address in the message.
    #[test]
    fn views_map_addresses_to_heap_offsets_and_refuse_the_rest() {
        let rt = crate::init().expect("a one-PE runtime");
        let buf = rt.calloc::<u64>(4).expect("calloc");
        let (base, len) = rt.heap_local_range();
        let addr = base + buf.offset();
        assert_eq!(rt.heap_offset_of(addr), Some(buf.offset()));
        let view = rt
            .view_at("test", (addr + 8) as *const u64, 2)
            .expect("view");
        assert_eq!(view.offset(), buf.offset() + 8);
        assert_eq!(view.id(), super::VIEW_ID);
        rt.put(view.at(1), &[42], 0).expect("put through the view");
        let mut got = [0u64; 4];
        rt.get(buf.at(0), &mut got, 0).expect("get");
        assert_eq!(got, [0, 0, 42, 0]);

        let refused = |addr: usize, n: usize| match rt.view_at("test", addr as *const u64, n) {
            Err(Error::InvalidArgument { reason, .. }) => reason,
            other => panic!("view of {addr:#x} × {n}: {other:?}"),
        };
        // The runtime's reserve (control words, team area) is not allocatable.
        assert!(refused(base, 1).contains(&format!("{base:#x}")));
        assert_eq!(rt.heap_offset_of(base), None);
        // Past the end, and a range that runs past it.
        assert!(refused(base + len, 1).contains("is not inside the symmetric heap of PE 0"));
        assert!(refused(base + len - 8, 2).contains("2 elements of 8 bytes"));
        // Misaligned for u64.
        assert!(refused(addr + 4, 1).contains("is not aligned to 8 bytes"));
        rt.free(buf).expect("free");
    }
}
