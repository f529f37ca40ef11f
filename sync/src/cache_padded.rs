//! [`CachePadded`]: keeps a value that one core writes off the cache line of values that other
//! cores poll.

use core::ops::{Deref, DerefMut};

/// `T` aligned (and so padded) to a 64-byte cache line, so that a store to it does not
/// invalidate a line that other cores are spinning on.
///
/// 64 bytes is the line size of x86-64 and of Arm Neoverse cores, the layout of the heap's
/// control words (`PaddedU64`) and the stride of the device barrier's flags. crossbeam pads
/// to 128 on x86-64 against the adjacent-line prefetcher; symmem keeps 64 so that padded
/// words in memory shared between processes have one layout on every machine. `#[repr(C)]`
/// puts the value at offset 0.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C, align(64))]
pub struct CachePadded<T> {
    value: T,
}

const _: () = assert!(core::mem::size_of::<CachePadded<u64>>() == 64);

impl<T> CachePadded<T> {
    /// Pads `value`.
    #[inline]
    pub const fn new(value: T) -> Self {
        CachePadded { value }
    }

    /// The value, without its padding.
    #[inline]
    pub fn into_inner(self) -> T {
        self.value
    }
}

impl<T> Deref for CachePadded<T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> DerefMut for CachePadded<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        &mut self.value
    }
}

impl<T> From<T> for CachePadded<T> {
    #[inline]
    fn from(value: T) -> Self {
        CachePadded::new(value)
    }
}
