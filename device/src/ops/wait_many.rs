//! Waits and tests on many words at once (`nvshmem_wait_until_{all,any,some}`, their
//! `_vector` forms and `nvshmem_test_{all,any,some}[_vector]`), so a kernel handles
//! sources in the order they arrive rather than in PE order.
//!
//! `status` is null (every element takes part) or points to `nelems` `i32`s: a nonzero
//! entry excludes its element, as in NVSHMEM. Like [`wait_until`](super::wait_until),
//! they poll with relaxed loads and, once the condition holds, read the elements that
//! satisfy it again with acquire loads, so what their writers published before them is
//! visible when one returns; a wait that lasts longer than the deadline fails the kernel
//! naming the first element that did not hold.

use super::DeviceInt;
use crate::arch;
use crate::op_kinds::Cmp;
use crate::state::{wait_op, WaitSite, ANY_PE};

/// The comparison values: one for every element, or one per element.
#[derive(Clone, Copy)]
enum Values<T> {
    One(T),
    Each(*const T),
}

impl<T: DeviceInt> Values<T> {
    /// The value element `i` is compared with.
    ///
    /// # Safety
    /// For `Each`, `i` is below the length of the values array.
    #[inline(always)]
    unsafe fn at(self, i: usize) -> T {
        match self {
            Values::One(v) => v,
            // SAFETY: caller contract.
            Values::Each(p) => unsafe { p.add(i).read() },
        }
    }
}

/// The elements of one wait or test: `nelems` words at `ivars`, those `status` excludes
/// left out, each compared by `cmp` with its value.
#[derive(Clone, Copy)]
struct Words<T> {
    ivars: *mut T,
    nelems: usize,
    status: *const i32,
    cmp: Cmp,
    values: Values<T>,
}

impl<T: DeviceInt> Words<T> {
    /// Whether element `i` takes part.
    ///
    /// # Safety
    /// `i < nelems`; `status` is null or holds `nelems` entries.
    #[inline(always)]
    unsafe fn included(&self, i: usize) -> bool {
        // SAFETY: caller contract.
        self.status.is_null() || unsafe { self.status.add(i).read() } == 0
    }

    /// Whether element `i` holds, read relaxed (`acquire`: with an acquire load).
    ///
    /// # Safety
    /// `i < nelems`; the words and values are valid.
    #[inline(always)]
    unsafe fn holds(&self, i: usize, acquire: bool) -> (bool, T) {
        // SAFETY: caller contract.
        let seen = unsafe {
            if acquire {
                T::load_acquire(self.ivars.add(i))
            } else {
                T::load_relaxed(self.ivars.add(i))
            }
        };
        // SAFETY: caller contract.
        (self.cmp.holds(seen, unsafe { self.values.at(i) }), seen)
    }

    /// Whether any element takes part.
    ///
    /// # Safety
    /// As [`Self::included`] for every element.
    #[inline(always)]
    unsafe fn any_included(&self) -> bool {
        // SAFETY: caller contract.
        (0..self.nelems).any(|i| unsafe { self.included(i) })
    }

    /// All: `Ok` when every included element holds (checked again with acquire loads),
    /// else `Err` with the value of the first that does not.
    ///
    /// # Safety
    /// As [`Self::holds`] for every element.
    #[inline(always)]
    unsafe fn all(&self) -> Result<(), T> {
        for acquire in [false, true] {
            for i in 0..self.nelems {
                // SAFETY: caller contract.
                if unsafe { self.included(i) } {
                    // SAFETY: caller contract.
                    let (ok, seen) = unsafe { self.holds(i, acquire) };
                    if !ok {
                        return Err(seen);
                    }
                }
            }
        }
        Ok(())
    }

    /// Any: the first included element that holds (checked again with an acquire load).
    ///
    /// # Safety
    /// As [`Self::holds`] for every element.
    #[inline(always)]
    unsafe fn any(&self) -> Option<usize> {
        // SAFETY: caller contract.
        (0..self.nelems).find(|&i| unsafe {
            self.included(i) && self.holds(i, false).0 && self.holds(i, true).0
        })
    }

    /// Some: the included elements that hold (each checked again with an acquire load),
    /// written to `indices` in increasing order; their count.
    ///
    /// # Safety
    /// As [`Self::holds`] for every element; `indices` has room for `nelems`.
    #[inline(always)]
    unsafe fn some(&self, indices: *mut usize) -> usize {
        let mut n = 0;
        for i in 0..self.nelems {
            // SAFETY: caller contract.
            if unsafe { self.included(i) && self.holds(i, false).0 && self.holds(i, true).0 } {
                // SAFETY: n < nelems.
                unsafe { indices.add(n).write(i) };
                n += 1;
            }
        }
        n
    }

    /// The backoff of a wait on these words, reported as `op` at the first element.
    ///
    /// # Safety
    /// As [`Values::at`] for element 0 when `nelems > 0`.
    #[inline(always)]
    unsafe fn backoff(&self, op: u32) -> arch::Backoff {
        let wanted = if self.nelems == 0 {
            0
        } else {
            // SAFETY: caller contract.
            unsafe { self.values.at(0) }.to_bits()
        };
        arch::Backoff::new(WaitSite {
            op,
            cmp: self.cmp as u32,
            pe: ANY_PE,
            addr: self.ivars as u64,
            wanted,
        })
    }

    /// Waits until every included element holds.
    ///
    /// # Safety
    /// As [`Self::holds`] for every element.
    #[inline(always)]
    unsafe fn wait_all(&self) {
        // SAFETY: caller contract.
        let mut backoff = unsafe { self.backoff(wait_op::WAIT_UNTIL_ALL) };
        // SAFETY: caller contract.
        while let Err(seen) = unsafe { self.all() } {
            backoff.snooze(seen.to_bits());
        }
    }

    /// Waits until an included element holds; `None` when none takes part.
    ///
    /// # Safety
    /// As [`Self::holds`] for every element.
    #[inline(always)]
    unsafe fn wait_any(&self) -> Option<usize> {
        // SAFETY: caller contract.
        if !unsafe { self.any_included() } {
            return None;
        }
        // SAFETY: caller contract.
        let mut backoff = unsafe { self.backoff(wait_op::WAIT_UNTIL_ANY) };
        loop {
            // SAFETY: caller contract.
            if let Some(i) = unsafe { self.any() } {
                return Some(i);
            }
            backoff.snooze(0);
        }
    }

    /// Waits until an included element holds; writes the indices of all that do; their
    /// count (0 when none takes part).
    ///
    /// # Safety
    /// As [`Self::some`].
    #[inline(always)]
    unsafe fn wait_some(&self, indices: *mut usize) -> usize {
        // SAFETY: caller contract.
        if !unsafe { self.any_included() } {
            return 0;
        }
        // SAFETY: caller contract.
        let mut backoff = unsafe { self.backoff(wait_op::WAIT_UNTIL_SOME) };
        loop {
            // SAFETY: caller contract.
            let n = unsafe { self.some(indices) };
            if n > 0 {
                return n;
            }
            backoff.snooze(0);
        }
    }
}

/// Waits until every element of this PE's `ivars` (`nelems` of them) that `status` does
/// not exclude satisfies `cmp value` (`nvshmem_wait_until_all`).
///
/// # Safety
/// `ivars` holds `nelems` aligned `T`s of this PE; `status` is null or holds `nelems`
/// `i32`s.
#[inline(always)]
pub unsafe fn wait_until_all<T: DeviceInt>(
    ivars: *mut T,
    nelems: usize,
    status: *const i32,
    cmp: Cmp,
    value: T,
) {
    let w = Words {
        ivars,
        nelems,
        status,
        cmp,
        values: Values::One(value),
    };
    // SAFETY: caller contract.
    unsafe { w.wait_all() }
}

/// Waits until some included element satisfies `cmp value`; returns its index, `None`
/// when `status` excludes every element (`nvshmem_wait_until_any`). Mark the returned
/// element in `status` to wait for the next one.
///
/// # Safety
/// As [`wait_until_all`].
#[inline(always)]
pub unsafe fn wait_until_any<T: DeviceInt>(
    ivars: *mut T,
    nelems: usize,
    status: *const i32,
    cmp: Cmp,
    value: T,
) -> Option<usize> {
    let w = Words {
        ivars,
        nelems,
        status,
        cmp,
        values: Values::One(value),
    };
    // SAFETY: caller contract.
    unsafe { w.wait_any() }
}

/// Waits until some included element satisfies `cmp value`; writes the indices of all
/// that do to `indices` and returns their count, 0 when `status` excludes every element
/// (`nvshmem_wait_until_some`).
///
/// # Safety
/// As [`wait_until_all`]; `indices` has room for `nelems` entries.
#[inline(always)]
pub unsafe fn wait_until_some<T: DeviceInt>(
    ivars: *mut T,
    nelems: usize,
    indices: *mut usize,
    status: *const i32,
    cmp: Cmp,
    value: T,
) -> usize {
    let w = Words {
        ivars,
        nelems,
        status,
        cmp,
        values: Values::One(value),
    };
    // SAFETY: caller contract.
    unsafe { w.wait_some(indices) }
}

/// [`wait_until_all`] with one value per element, `values[i]` for `ivars[i]`
/// (`nvshmem_wait_until_all_vector`).
///
/// # Safety
/// As [`wait_until_all`]; `values` holds `nelems` `T`s.
#[inline(always)]
pub unsafe fn wait_until_all_vector<T: DeviceInt>(
    ivars: *mut T,
    nelems: usize,
    status: *const i32,
    cmp: Cmp,
    values: *const T,
) {
    let w = Words {
        ivars,
        nelems,
        status,
        cmp,
        values: Values::Each(values),
    };
    // SAFETY: caller contract.
    unsafe { w.wait_all() }
}

/// [`wait_until_any`] with one value per element (`nvshmem_wait_until_any_vector`).
///
/// # Safety
/// As [`wait_until_all_vector`].
#[inline(always)]
pub unsafe fn wait_until_any_vector<T: DeviceInt>(
    ivars: *mut T,
    nelems: usize,
    status: *const i32,
    cmp: Cmp,
    values: *const T,
) -> Option<usize> {
    let w = Words {
        ivars,
        nelems,
        status,
        cmp,
        values: Values::Each(values),
    };
    // SAFETY: caller contract.
    unsafe { w.wait_any() }
}

/// [`wait_until_some`] with one value per element (`nvshmem_wait_until_some_vector`).
///
/// # Safety
/// As [`wait_until_all_vector`]; `indices` has room for `nelems` entries.
#[inline(always)]
pub unsafe fn wait_until_some_vector<T: DeviceInt>(
    ivars: *mut T,
    nelems: usize,
    indices: *mut usize,
    status: *const i32,
    cmp: Cmp,
    values: *const T,
) -> usize {
    let w = Words {
        ivars,
        nelems,
        status,
        cmp,
        values: Values::Each(values),
    };
    // SAFETY: caller contract.
    unsafe { w.wait_some(indices) }
}

/// Whether every included element satisfies `cmp value` now (`nvshmem_test_all`).
///
/// # Safety
/// As [`wait_until_all`].
#[inline(always)]
pub unsafe fn test_all<T: DeviceInt>(
    ivars: *mut T,
    nelems: usize,
    status: *const i32,
    cmp: Cmp,
    value: T,
) -> bool {
    let w = Words {
        ivars,
        nelems,
        status,
        cmp,
        values: Values::One(value),
    };
    // SAFETY: caller contract.
    unsafe { w.all() }.is_ok()
}

/// The index of an included element that satisfies `cmp value` now, if any
/// (`nvshmem_test_any`).
///
/// # Safety
/// As [`wait_until_all`].
#[inline(always)]
pub unsafe fn test_any<T: DeviceInt>(
    ivars: *mut T,
    nelems: usize,
    status: *const i32,
    cmp: Cmp,
    value: T,
) -> Option<usize> {
    let w = Words {
        ivars,
        nelems,
        status,
        cmp,
        values: Values::One(value),
    };
    // SAFETY: caller contract.
    unsafe { w.any() }
}

/// Writes the indices of the included elements that satisfy `cmp value` now to
/// `indices`; their count (`nvshmem_test_some`).
///
/// # Safety
/// As [`wait_until_some`].
#[inline(always)]
pub unsafe fn test_some<T: DeviceInt>(
    ivars: *mut T,
    nelems: usize,
    indices: *mut usize,
    status: *const i32,
    cmp: Cmp,
    value: T,
) -> usize {
    let w = Words {
        ivars,
        nelems,
        status,
        cmp,
        values: Values::One(value),
    };
    // SAFETY: caller contract.
    unsafe { w.some(indices) }
}

/// [`test_all`] with one value per element (`nvshmem_test_all_vector`).
///
/// # Safety
/// As [`wait_until_all_vector`].
#[inline(always)]
pub unsafe fn test_all_vector<T: DeviceInt>(
    ivars: *mut T,
    nelems: usize,
    status: *const i32,
    cmp: Cmp,
    values: *const T,
) -> bool {
    let w = Words {
        ivars,
        nelems,
        status,
        cmp,
        values: Values::Each(values),
    };
    // SAFETY: caller contract.
    unsafe { w.all() }.is_ok()
}

/// [`test_any`] with one value per element (`nvshmem_test_any_vector`).
///
/// # Safety
/// As [`wait_until_all_vector`].
#[inline(always)]
pub unsafe fn test_any_vector<T: DeviceInt>(
    ivars: *mut T,
    nelems: usize,
    status: *const i32,
    cmp: Cmp,
    values: *const T,
) -> Option<usize> {
    let w = Words {
        ivars,
        nelems,
        status,
        cmp,
        values: Values::Each(values),
    };
    // SAFETY: caller contract.
    unsafe { w.any() }
}

/// [`test_some`] with one value per element (`nvshmem_test_some_vector`).
///
/// # Safety
/// As [`wait_until_some_vector`].
#[inline(always)]
pub unsafe fn test_some_vector<T: DeviceInt>(
    ivars: *mut T,
    nelems: usize,
    indices: *mut usize,
    status: *const i32,
    cmp: Cmp,
    values: *const T,
) -> usize {
    let w = Words {
        ivars,
        nelems,
        status,
        cmp,
        values: Values::Each(values),
    };
    // SAFETY: caller contract.
    unsafe { w.some(indices) }
}
