//! Blocking one-sided put and get between PEs.
//!
//! A put to a mapped PE is a `memcpy` into that PE's heap mapping; a get is a `memcpy`
//! out of it. The copy is complete when the call returns. Visibility to the target's
//! *reads* is ordered by synchronization: `barrier_all`, or (later) signals with Release/
//! Acquire ordering. The heap is shared with other processes, which Rust's compiler cannot
//! see, so plain copies through raw pointers are the honest model: the runtime never hands
//! out references into memory that peers may write.

use crate::error::{Error, Result};
use crate::runtime::Runtime;
use crate::sym::SymBuf;

impl Runtime {
    /// Address of elements `at..at + count` of `buf` on `pe`, after every check.
    fn target<T>(
        &self,
        op: &'static str,
        buf: &SymBuf<T>,
        at: usize,
        count: usize,
        pe: usize,
    ) -> Result<*mut T> {
        self.check_buf(op, buf)?;
        self.check_pe(op, pe)?;
        let end = at.checked_add(count).filter(|&e| e <= buf.len);
        if end.is_none() {
            return Err(Error::OutOfBounds {
                op,
                pe,
                start: at,
                end: at.saturating_add(count),
                len: buf.len,
                elem_size: std::mem::size_of::<T>(),
                alloc: buf.id,
                offset: buf.offset,
            });
        }
        let base = self.heap.base(pe).ok_or_else(|| Error::Unreachable {
            op,
            pe,
            node: self.topo.node(pe).to_string(),
            me: self.my_pe(),
            my_node: self.topo.node(self.my_pe()).to_string(),
        })?;
        // SAFETY: offset + (at + count) * size_of::<T>() lies within the allocation, which
        // lies within the mapped heap.
        Ok(unsafe { base.as_ptr().add(buf.offset).cast::<T>().add(at) })
    }

    /// Copies `src` into elements `at..at + src.len()` of `dst` on PE `pe`
    /// (`nvshmem_put`). Complete on return: `src` may be reused at once.
    pub fn put<T: bytemuck::Pod>(
        &self,
        dst: &SymBuf<T>,
        at: usize,
        src: &[T],
        pe: usize,
    ) -> Result<()> {
        let p = self.target("put", dst, at, src.len(), pe)?;
        // SAFETY: `p` is valid for `src.len()` elements (checked by `target`); `src` is a
        // local slice, so the ranges cannot overlap. T: Pod, so any bytes are valid.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), p, src.len()) };
        Ok(())
    }

    /// Copies elements `at..at + dst.len()` of `src` on PE `pe` into `dst`
    /// (`nvshmem_get`). Complete on return.
    pub fn get<T: bytemuck::Pod>(
        &self,
        src: &SymBuf<T>,
        at: usize,
        dst: &mut [T],
        pe: usize,
    ) -> Result<()> {
        let p = self.target("get", src, at, dst.len(), pe)?;
        // SAFETY: `p` is valid for `dst.len()` elements (checked by `target`); `dst` is a
        // local exclusive slice, so the ranges cannot overlap. T: Pod, so whatever bytes
        // a concurrent writer left are a valid T.
        unsafe { std::ptr::copy_nonoverlapping(p.cast_const(), dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }
}
