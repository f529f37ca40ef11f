//! A block's shared memory on the CPU executor: the arrays of `shared!` declarations,
//! allocated at the block's first use of each, and the dynamic shared memory the launch
//! sized (`shared_bytes`). Fresh memory is filled with `0xA5` bytes: a GPU leaves it
//! unspecified, so a kernel must not find zeros there. The block's total is held to
//! [`MAX_SHARED_BYTES`], as on a GPU.

use std::cell::{Cell, RefCell};

use symmem_device::MAX_SHARED_BYTES;

/// What fresh shared memory holds.
const FILL: u128 = u128::from_ne_bytes([0xA5; 16]);

/// Memory the block's threads write through the pointers they are given (hence `Cell`s),
/// 16-byte aligned.
type Memory = Box<[Cell<u128>]>;

/// `bytes` of fresh memory.
fn fresh(bytes: usize) -> Memory {
    (0..bytes.div_ceil(16)).map(|_| Cell::new(FILL)).collect()
}

/// One block's shared memory.
pub(super) struct BlockMemory {
    /// Each `shared!` array used so far: its key (the static's address) and memory.
    arrays: RefCell<Vec<(usize, Memory)>>,
    array_bytes: Cell<usize>,
    dynamic: Memory,
    dynamic_bytes: usize,
}

impl BlockMemory {
    /// The memory of a block of a launch with `dynamic_bytes` of dynamic shared memory
    /// (at most [`MAX_SHARED_BYTES`]: the launch checked it).
    pub(super) fn new(dynamic_bytes: usize) -> Self {
        BlockMemory {
            arrays: RefCell::new(Vec::new()),
            array_bytes: Cell::new(0),
            dynamic: fresh(dynamic_bytes),
            dynamic_bytes,
        }
    }

    /// The block's copy of the `shared!` array `key` of `bytes` bytes (alignment at most
    /// 16, which `shared!` checks), or why the block cannot have it.
    pub(super) fn array(&self, key: usize, bytes: usize) -> Result<*mut u8, String> {
        let mut arrays = self.arrays.borrow_mut();
        if let Some((_, mem)) = arrays.iter().find(|(k, _)| *k == key) {
            return Ok(mem.as_ptr() as *mut u8);
        }
        let total = self.array_bytes.get() + bytes;
        if total + self.dynamic_bytes > MAX_SHARED_BYTES as usize {
            return Err(format!(
                "the block's shared memory would be {total} bytes of shared! arrays and {} bytes of dynamic shared memory (shared_bytes), more than the {MAX_SHARED_BYTES} bytes a block may have",
                self.dynamic_bytes
            ));
        }
        self.array_bytes.set(total);
        let mem = fresh(bytes);
        let p = mem.as_ptr() as *mut u8;
        arrays.push((key, mem));
        Ok(p)
    }

    /// The dynamic shared memory: address and bytes.
    pub(super) fn dynamic(&self) -> (*mut u8, usize) {
        (self.dynamic.as_ptr() as *mut u8, self.dynamic_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_are_per_key_aligned_filled_and_limited() {
        let m = BlockMemory::new(40 << 10);
        let a = m.array(1, 100).unwrap();
        assert_eq!(m.array(1, 100).unwrap(), a, "one copy per key");
        assert_eq!(a as usize % 16, 0);
        // SAFETY: 100 fresh bytes at `a`.
        assert!(unsafe { std::slice::from_raw_parts(a, 100) }
            .iter()
            .all(|&b| b == 0xA5));
        let (d, n) = m.dynamic();
        assert_eq!((d as usize % 16, n), (0, 40 << 10));
        let err = m.array(2, 8 << 10).unwrap_err();
        assert!(
            err.contains("8292 bytes of shared! arrays and 40960 bytes"),
            "{err}"
        );
    }
}
