//! The collective allocation protocol: every `alloc`/`calloc`/`free` is verified across
//! PEs (same call, same arguments, same order) before the deterministic
//! [`Allocator`](crate::allocator::Allocator) runs, so every PE computes the same offsets,
//! and a mismatch is an error naming the PEs instead of silent corruption.

use std::marker::PhantomData;

use crate::alike::{self, Described, Pes};
use crate::allocator::AllocState;
use crate::error::{Error, Result};
use crate::heap::MAX_ALIGN;
use crate::route::Route;
use crate::runtime::Runtime;
use crate::sym::SymBuf;

impl Runtime {
    pub(crate) fn lock_allocs(&self) -> std::sync::MutexGuard<'_, AllocState> {
        self.allocs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Collectively allocates `len` elements of `T` (`nvshmem_malloc`). The contents are
    /// unspecified (possibly data from an earlier, freed allocation).
    pub fn alloc<T: bytemuck::Pod>(&self, len: usize) -> Result<SymBuf<T>> {
        self.alloc_impl("alloc", len, std::mem::align_of::<T>(), false)
    }

    /// Collectively allocates `len` zeroed elements of `T` (`nvshmem_calloc`). Returns
    /// after every PE has zeroed its part, so no peer's write can be lost to the zeroing.
    pub fn calloc<T: bytemuck::Pod>(&self, len: usize) -> Result<SymBuf<T>> {
        self.alloc_impl("calloc", len, std::mem::align_of::<T>(), true)
    }

    /// Collectively allocates `len` elements of `T` aligned to `align` bytes, a power of
    /// two up to [`MAX_ALIGN`] (`nvshmem_align`).
    ///
    /// The block's *address* is a multiple of `align` on every PE, in this PE's heap and in
    /// every same-node peer's mapping ([`Runtime::ptr`]): the offset is the same on every PE
    /// and every heap starts at a multiple of [`MAX_ALIGN`]. A larger alignment, or one
    /// that is not a power of two, is an [`Error::InvalidArgument`] naming it (and the
    /// limit) on every PE: the arguments are compared across PEs first, so PEs that
    /// disagree all get an [`Error::AllocMismatch`] instead, and none is left waiting.
    pub fn alloc_aligned<T: bytemuck::Pod>(&self, len: usize, align: usize) -> Result<SymBuf<T>> {
        let align = if align.is_power_of_two() {
            align.max(std::mem::align_of::<T>())
        } else {
            align
        };
        self.alloc_impl("alloc_aligned", len, align, false)
    }

    fn alloc_impl<T>(
        &self,
        op: &'static str,
        len: usize,
        align: usize,
        zero: bool,
    ) -> Result<SymBuf<T>> {
        let size = std::mem::size_of::<T>();
        let mut state = self.lock_allocs();
        let call = state.calls;
        // Every collective call takes a number, failed or not, the same on every PE.
        state.calls += 1;
        // A size that overflows is compared like any other request, so that a PE whose
        // size alone overflows does not leave the others waiting: they all get the
        // mismatch naming it. When every PE's overflows alike, each refuses it below.
        let request = match len.checked_mul(size) {
            Some(bytes) => Request::Alloc { bytes, align, zero },
            None => Request::Overflow { len, size },
        };
        self.verify_collective(call, &request)?;
        let Request::Alloc { bytes, .. } = request else {
            return Err(Error::InvalidArgument {
                op,
                reason: format!(
                    "on PE {}: {len} elements of {size} bytes overflow usize",
                    self.my_pe()
                ),
            });
        };
        // After the comparison: every PE asked for this alignment, so every PE refuses it.
        check_align(op, align)?;
        let offset = state
            .allocator
            .alloc(bytes, align)
            .map_err(|ex| Error::OutOfMemory {
                requested: bytes,
                align,
                free: ex.free,
                largest_free: ex.largest_free,
                heap_size: state.allocator.capacity(),
            })?;
        drop(state);
        tracing::debug!(id = call, offset, bytes, align, "allocated");
        if zero {
            let zeroed = self.zero_own(op, offset, bytes);
            self.agree_zeroed(op, call, offset, zeroed)?;
        }
        Ok(SymBuf {
            runtime: self.path.runtime_id(),
            id: call,
            offset,
            len,
            _elem: PhantomData,
        })
    }

    /// Zeroes `bytes` at heap offset `offset` of this PE's heap, on whichever memory it is.
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))] // op: the GPU path
    fn zero_own(&self, op: &'static str, offset: usize, bytes: usize) -> Result<()> {
        let base = self
            .path
            .heap()
            .base(self.my_pe())
            .expect("own heap is always mapped");
        match self.path.route(self.my_pe()) {
            // SAFETY: offset..offset+bytes is a live allocation inside this PE's heap.
            // Peers cannot write it yet: they are held by the caller's barrier.
            Route::Direct(_) => unsafe { (base as *mut u8).add(offset).write_bytes(0, bytes) },
            // SAFETY: as above, in device memory mapped in this PE's context.
            #[cfg(feature = "cuda")]
            Route::Copy(_) => unsafe { self.path.gpu(op)?.zero(op, base + offset as u64, bytes)? },
            Route::Remote | Route::Unreachable => unreachable!("own heap is always mapped"),
        }
        Ok(())
    }

    /// Collectively frees `buf` (`nvshmem_free`). Every PE must free the same allocation.
    ///
    /// It first completes every operation this PE issued (OpenSHMEM 1.5 §9.3.1:
    /// `shmem_free` begins with a barrier, which quiets): device requests a finished kernel
    /// left in the proxy ring, puts to remote PEs, and in weak-ordering mode what it
    /// buffered, so that no late put or `get_nbi` result lands in a later allocation at
    /// the same offset. An error of that quiet (a failed peer, a reused `put_nbi` source in
    /// weak mode) is returned after the free, which every PE still completes.
    pub fn free<T>(&self, buf: SymBuf<T>) -> Result<()> {
        self.path.check_buf("free", &buf)?;
        // Stream work queued before the free may still write the allocation.
        let quieted = self.wait_for_streams("free").and_then(|()| self.quiet());
        let mut state = self.lock_allocs();
        let call = state.calls;
        state.calls += 1;
        self.verify_collective(
            call,
            &Request::Free {
                id: buf.id,
                offset: buf.offset,
            },
        )?;
        let freed = state.allocator.free(buf.offset);
        debug_assert!(freed, "a live SymBuf always names a live block");
        quieted
    }

    /// `calloc`'s barrier after every PE zeroed its block at `offset` (`zeroed`: how this
    /// PE's zeroing went): every PE takes it, and when the zeroing failed on any PE,
    /// every PE frees the block and returns the same error naming those PEs (this PE's
    /// own error where it is the only one), so none holds an allocation the others lack.
    fn agree_zeroed(
        &self,
        op: &'static str,
        call: u64,
        offset: usize,
        zeroed: Result<()>,
    ) -> Result<()> {
        self.arrive_all("alloc")?;
        // Gathered after each PE's zeroing, so it is also the barrier that keeps a peer's
        // later write out of the zeroing.
        let all = self.bootstrap.allgather(&[u8::from(zeroed.is_err())])?;
        let failed: Vec<usize> = (0..all.len()).filter(|&p| all[p] != [0]).collect();
        if failed.is_empty() {
            return Ok(());
        }
        let freed = self.lock_allocs().allocator.free(offset);
        debug_assert!(freed, "the block was just allocated");
        match zeroed {
            Err(e) if failed.len() == 1 => Err(e),
            _ => Err(Error::InvalidArgument {
                op,
                reason: format!(
                    "call #{call}: zeroing the new block failed on PE {}; every PE freed it",
                    failed
                        .iter()
                        .map(|p| p.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }),
        }
    }

    /// Waits until every PE has arrived (as long as they are alive: see
    /// [`Runtime::arrive_all`]), then allgathers this PE's request and checks that every
    /// PE made the same one.
    fn verify_collective(&self, call: u64, request: &Request) -> Result<()> {
        self.arrive_all(match request {
            Request::Alloc { .. } | Request::Overflow { .. } => "alloc",
            Request::Free { .. } => "free",
        })?;
        let all: Vec<Vec<u64>> = self
            .bootstrap
            .allgather(bytemuck::cast_slice(&request.encode()))?
            .iter()
            .map(|b| {
                b.chunks_exact(8)
                    .map(bytemuck::pod_read_unaligned)
                    .collect()
            })
            .collect();
        alike::check::<Request, _>(&all, Pes::World, |detail| Error::AllocMismatch {
            call,
            detail,
        })
    }
}

/// Fails unless `align` is a power of two no larger than [`MAX_ALIGN`], the alignment of
/// every heap's base, beyond which an aligned offset would not be an aligned address.
fn check_align(op: &'static str, align: usize) -> Result<()> {
    if !align.is_power_of_two() {
        return Err(Error::InvalidArgument {
            op,
            reason: format!("alignment {align} is not a power of two"),
        });
    }
    if align > MAX_ALIGN {
        return Err(Error::InvalidArgument {
            op,
            reason: format!(
                "alignment {align} is larger than the largest supported alignment, {MAX_ALIGN} bytes ({} MiB, symmem::MAX_ALIGN): every heap starts at a multiple of that, so no larger alignment can hold on every PE",
                MAX_ALIGN >> 20
            ),
        });
    }
    Ok(())
}

/// A collective allocation call, as compared across PEs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Request {
    Alloc {
        bytes: usize,
        align: usize,
        zero: bool,
    },
    Free {
        id: u64,
        offset: usize,
    },
    /// An `alloc` of `len` elements of `size` bytes, whose byte count overflows.
    Overflow {
        len: usize,
        size: usize,
    },
}

impl Request {
    /// The words compared across PEs: a tag, then the two arguments.
    fn encode(&self) -> [u64; 3] {
        match *self {
            Request::Alloc { bytes, align, zero } => {
                [if zero { 2 } else { 1 }, bytes as u64, align as u64]
            }
            Request::Free { id, offset } => [3, id, offset as u64],
            Request::Overflow { len, size } => [4, len as u64, size as u64],
        }
    }
}

impl Described for Request {
    fn describe(words: &[u64]) -> String {
        match *words {
            [1, a, b] => format!("alloc({a} bytes, align {b})"),
            [2, a, b] => format!("calloc({a} bytes, align {b})"),
            [3, a, b] => format!("free(allocation #{a} at offset {b:#x})"),
            [4, a, b] => format!("alloc({a} elements of {b} bytes, which overflows usize)"),
            [t, _, _] => format!("an unknown request (tag {t})"),
            _ => format!("an unknown request ({} words)", words.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every power of two up to MAX_ALIGN passes; above it, and for a non-power of two,
    /// the error names the operation, the alignment and (above it) the limit.
    #[test]
    fn alignments_above_the_heap_alignment_are_refused_naming_the_limit() {
        for shift in 0..=MAX_ALIGN.trailing_zeros() {
            check_align("alloc_aligned", 1 << shift).unwrap();
        }
        for too_big in [MAX_ALIGN * 2, 1 << 30, 1 << 63] {
            let err = check_align("alloc_aligned", too_big).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
            let msg = err.to_string();
            assert!(
                msg.starts_with("alloc_aligned: ")
                    && msg.contains(&format!("alignment {too_big} "))
                    && msg.contains(&format!("{MAX_ALIGN} bytes (16 MiB, symmem::MAX_ALIGN)")),
                "{msg}"
            );
        }
        for odd in [0, 3, 3 << 20] {
            let msg = check_align("shmem_align", odd).unwrap_err().to_string();
            assert_eq!(
                msg,
                format!("shmem_align: alignment {odd} is not a power of two")
            );
        }
    }
}
