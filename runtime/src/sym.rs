//! Typed handles to symmetric allocations.

use std::marker::PhantomData;

/// A symmetric allocation of `len` elements of `T`: the same offset in every PE's heap.
///
/// The handle is not `Clone`: [`crate::Runtime::free`] consumes it, so a freed allocation
/// cannot be used again (use-after-free does not compile). A handle used with a runtime
/// other than the one that allocated it (for example after finalize and a new init) is
/// refused with [`crate::Error::ForeignAllocation`]. Dropping a handle without `free`
/// keeps the memory reserved until finalize.
///
/// # Use after free is a compile error
///
/// A handle is used, then freed:
///
/// ```no_run
/// # fn main() -> symmem_runtime::Result<()> {
/// let rt = symmem_runtime::init()?;
/// let buf = rt.alloc::<u64>(4)?;
/// rt.put(buf.at(0), &[1], 0)?;
/// rt.free(buf)?;
/// # Ok(())
/// # }
/// ```
///
/// Using it after `free` does not compile (E0382, borrow of moved value `buf`):
///
/// ```compile_fail
/// # fn main() -> symmem_runtime::Result<()> {
/// let rt = symmem_runtime::init()?;
/// let buf = rt.alloc::<u64>(4)?;
/// rt.free(buf)?;
/// rt.put(buf.at(0), &[1], 0)?;
/// # Ok(())
/// # }
/// ```
///
/// and neither does keeping a copy to use afterwards, as the handle is not `Clone` (E0277):
///
/// ```compile_fail
/// # fn main() -> symmem_runtime::Result<()> {
/// let rt = symmem_runtime::init()?;
/// let buf = rt.alloc::<u64>(4)?;
/// let copy = symmem_runtime::SymBuf::clone(&buf);
/// rt.free(buf)?;
/// rt.put(copy.at(0), &[1], 0)?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct SymBuf<T> {
    pub(crate) runtime: u64,
    pub(crate) id: u64,
    pub(crate) offset: usize,
    pub(crate) len: usize,
    pub(crate) _elem: PhantomData<fn() -> T>,
}

impl<T> SymBuf<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the allocation holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Byte offset of the allocation in the symmetric heap (the same on every PE).
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The allocation's number: the index of the collective call that created it.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Size in bytes.
    pub fn size_bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }
}

impl<T> SymBuf<T> {
    /// A reference to element `index` of this allocation, on whichever PE an operation
    /// names. Bounds are checked by the operation, which knows how many elements it
    /// touches.
    #[inline]
    pub fn at(&self, index: usize) -> SymRef<'_, T> {
        SymRef { buf: self, index }
    }
}

/// The symmetric address of one element: an allocation and an index into it. Operations
/// take it together with a target PE.
#[derive(Debug)]
pub struct SymRef<'a, T> {
    pub(crate) buf: &'a SymBuf<T>,
    pub(crate) index: usize,
}

impl<T> Clone for SymRef<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for SymRef<'_, T> {}

impl<T> SymRef<'_, T> {
    /// The element index.
    pub fn index(&self) -> usize {
        self.index
    }
}
