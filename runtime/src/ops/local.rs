//! Looking at this PE's own copy of symmetric memory while peers may write into it.
//!
//! Peers write this PE's heap from other processes at any time, so a plain `&[T]` into it
//! would let the compiler assume the memory does not change, which breaks Rust's aliasing
//! rules the moment a peer writes. The sound options, from safest:
//!
//! - **copies**: `get(buf.at(i), &mut out, my_pe)` (or [`Runtime::read_local`]) copies out;
//! - **atomics**: [`Runtime::local_atomic`] gives a `&AtomicU64` (etc.) to one element,
//!   sound under concurrent writes by construction;
//! - **slices**: [`Runtime::local_slice`] / [`Runtime::local_slice_mut`] are `unsafe`: the
//!   caller promises that no peer writes (or, for `_mut`, reads) the allocation while the
//!   slice lives, typically because a barrier or signal protocol says so.

use crate::error::Result;
use crate::runtime::Runtime;
use crate::sym::{SymBuf, SymRef};
use symmem_transport::int::SymInt;

impl Runtime {
    /// Copies elements from `src` of this PE's own copy into `dst`.
    pub fn read_local<T: bytemuck::Pod>(&self, src: SymRef<'_, T>, dst: &mut [T]) -> Result<()> {
        self.path.read("read_local", src, dst, self.my_pe())
    }

    /// An atomic view of one element of this PE's own copy. Sound while peers update the
    /// element concurrently through AMOs, signals or puts.
    pub fn local_atomic<'a, T: SymInt>(&'a self, r: SymRef<'a, T>) -> Result<&'a T::Atomic> {
        let p = self.path.target("local_atomic", r, 1, self.my_pe())?;
        // SAFETY: in bounds, aligned, mapped while `self` lives; atomics tolerate
        // concurrent access from any process.
        Ok(unsafe { T::atomic(p) })
    }

    /// This PE's own copy of `buf` as a slice.
    ///
    /// # Safety
    /// No PE may write any element of `buf` on this PE while the slice lives (for example
    /// between two barriers during which peers only read).
    pub unsafe fn local_slice<'a, T: bytemuck::Pod>(
        &'a self,
        buf: &'a SymBuf<T>,
    ) -> Result<&'a [T]> {
        let p = self
            .path
            .target("local_slice", buf.at(0), buf.len(), self.my_pe())?;
        // SAFETY: the range is the whole allocation in this PE's mapped heap; the caller
        // guarantees no concurrent writer.
        Ok(unsafe { std::slice::from_raw_parts(p, buf.len()) })
    }

    /// This PE's own copy of `buf` as a mutable slice. The `&mut SymBuf` keeps this
    /// thread from handing out a second view.
    ///
    /// # Safety
    /// No PE may read or write any element of `buf` on this PE while the slice lives.
    pub unsafe fn local_slice_mut<'a, T: bytemuck::Pod>(
        &'a self,
        buf: &'a mut SymBuf<T>,
    ) -> Result<&'a mut [T]> {
        let p = self
            .path
            .target("local_slice_mut", buf.at(0), buf.len(), self.my_pe())?;
        // SAFETY: as in `local_slice`, with no concurrent reader either; `&mut buf`
        // prevents a second view through this handle.
        Ok(unsafe { std::slice::from_raw_parts_mut(p, buf.len()) })
    }
}
