//! The deterministic symmetric allocator.
//!
//! Pure bookkeeping over heap offsets: no memory is touched here. Every PE runs the same
//! allocator over the same sequence of verified collective calls, so every PE computes
//! the same offsets; that is what makes an allocation *symmetric*.
//!
//! First fit over an address-ordered free list, with coalescing on free. Every block starts
//! and ends on a [`MIN_ALIGN`] boundary, so two allocations never share a cache line.

use std::collections::BTreeMap;

/// Smallest alignment and size granule of a block: one cache line.
pub const MIN_ALIGN: usize = 64;

/// Why an allocation failed: the free-space figures for the error message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exhausted {
    /// Total free bytes.
    pub free: usize,
    /// The largest free block.
    pub largest_free: usize,
}

/// Allocator over the offsets `base..base + len`.
#[derive(Debug)]
pub struct Allocator {
    /// Free blocks: start → length.
    free: BTreeMap<usize, usize>,
    /// Live blocks: start → length (rounded).
    live: BTreeMap<usize, usize>,
    capacity: usize,
}

impl Allocator {
    /// An allocator whose whole range `base..base + len` is free.
    pub fn new(base: usize, len: usize) -> Self {
        assert!(
            base.is_multiple_of(MIN_ALIGN),
            "heap base must be cache-line aligned"
        );
        let len = len - len % MIN_ALIGN;
        let mut free = BTreeMap::new();
        if len > 0 {
            free.insert(base, len);
        }
        Allocator {
            free,
            live: BTreeMap::new(),
            capacity: len,
        }
    }

    /// Usable bytes in total.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Reserves `size` bytes aligned to `align` (a power of two; at least [`MIN_ALIGN`] is
    /// used). A zero-byte request takes one granule, so every allocation has its own offset.
    pub fn alloc(&mut self, size: usize, align: usize) -> Result<usize, Exhausted> {
        debug_assert!(align.is_power_of_two());
        let align = align.max(MIN_ALIGN);
        let Some(size) = size.max(1).checked_next_multiple_of(MIN_ALIGN) else {
            return Err(self.exhausted());
        };
        let found = self.free.iter().find_map(|(&start, &len)| {
            let aligned = start.checked_next_multiple_of(align)?;
            let end = aligned.checked_add(size)?;
            (end <= start + len).then_some((start, len, aligned))
        });
        let Some((start, len, aligned)) = found else {
            return Err(self.exhausted());
        };
        self.free.remove(&start);
        if aligned > start {
            self.free.insert(start, aligned - start);
        }
        let tail = start + len - (aligned + size);
        if tail > 0 {
            self.free.insert(aligned + size, tail);
        }
        self.live.insert(aligned, size);
        Ok(aligned)
    }

    /// Returns the block at `offset`. Returns false when no live block starts there.
    pub fn free(&mut self, offset: usize) -> bool {
        let Some(size) = self.live.remove(&offset) else {
            return false;
        };
        let (mut start, mut len) = (offset, size);
        if let Some((&prev, &prev_len)) = self.free.range(..offset).next_back() {
            if prev + prev_len == offset {
                self.free.remove(&prev);
                start = prev;
                len += prev_len;
            }
        }
        if let Some(next_len) = self.free.remove(&(offset + size)) {
            len += next_len;
        }
        self.free.insert(start, len);
        true
    }

    fn exhausted(&self) -> Exhausted {
        Exhausted {
            free: self.free.values().sum(),
            largest_free: self.free.values().copied().max().unwrap_or(0),
        }
    }

    /// Bytes currently free.
    pub fn free_bytes(&self) -> usize {
        self.free.values().sum()
    }
}

/// Allocation bookkeeping, guarded by one lock: collective calls are serialized.
pub(crate) struct AllocState {
    /// Where each allocation lies in the heap.
    pub(crate) allocator: Allocator,
    /// Number of collective allocation calls so far (alloc and free alike).
    pub(crate) calls: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_fit_alignment_and_coalescing() {
        let mut a = Allocator::new(4096, 1 << 20);
        let x = a.alloc(10, 8).unwrap();
        let y = a.alloc(100, 8).unwrap();
        let z = a.alloc(1, 4096).unwrap();
        assert_eq!(x, 4096);
        assert_eq!(y, 4096 + 64);
        assert_eq!(z % 4096, 0);
        assert!(a.free(y));
        assert!(!a.free(y), "double free is refused");
        // The hole left by y is reused first.
        assert_eq!(a.alloc(128, 64).unwrap(), y);
        assert!(a.free(x) && a.free(y) && a.free(z));
        assert_eq!(a.free_bytes(), a.capacity());
        // Everything coalesced back into one block.
        assert_eq!(a.alloc(1 << 20, 64).unwrap(), 4096);
    }

    #[test]
    fn exhaustion_reports_free_space() {
        let mut a = Allocator::new(0, 1024);
        let x = a.alloc(512, 64).unwrap();
        a.alloc(256, 64).unwrap();
        a.free(x);
        let e = a.alloc(600, 64).unwrap_err();
        assert_eq!(
            e,
            Exhausted {
                free: 768,
                largest_free: 512
            }
        );
        assert!(a.alloc(usize::MAX, 64).is_err());
    }

    #[test]
    fn same_sequence_same_offsets() {
        let run = || {
            let mut a = Allocator::new(0, 1 << 24);
            let mut out = Vec::new();
            let mut live = Vec::new();
            for i in 0..200usize {
                if i % 3 == 2 {
                    let off = live.remove((i * 7) % live.len());
                    a.free(off);
                } else {
                    let off = a.alloc((i * 37) % 5000, 1 << (i % 8)).unwrap();
                    live.push(off);
                    out.push(off);
                }
            }
            out
        };
        assert_eq!(run(), run());
    }
}
