//! Symmetric heap management (OpenSHMEM 1.5 §9.3): `shmem_malloc`, `shmem_calloc`,
//! `shmem_align`, `shmem_realloc`, `shmem_free`, `shmem_malloc_with_hints`.
//!
//! All are collective: every PE makes the same calls with the same sizes, in the same
//! order (verified: PEs that differ all get NULL, with an error naming each PE's call).
//! As the specification asks, the allocating calls end with a barrier (`shmem_calloc`'s
//! zeroing is complete everywhere before it returns) and `shmem_free` starts with one.
//! A zero size returns NULL and allocates nothing (§9.3.1), but the call is still compared
//! with the other PEs' (a PE passing 0 where the others pass a size would otherwise leave
//! them waiting in their allocation): every PE gets NULL then.

use std::ffi::{c_long, c_void};

use symmem_runtime::{Result, SymBuf};

use crate::{state, State};

/// Allocates `size` bytes by `how`, records the allocation, and returns its address, or
/// NULL after logging why.
fn allocate(
    func: &'static str,
    size: usize,
    how: impl FnOnce(&State) -> Result<SymBuf<u8>>,
) -> *mut c_void {
    let s = state(func);
    if size == 0 {
        // Compared with the other PEs' calls like any allocation (a block of no bytes,
        // freed at once): where another PE asked for a size, every PE gets the mismatch.
        match s.rt.alloc::<u8>(0).and_then(|b| s.rt.free(b)) {
            Ok(()) => tracing::debug!("{func}: size 0; returning NULL"),
            Err(e) => tracing::error!(pe = s.rt.my_pe(), "{func}(0 bytes) returns NULL: {e}"),
        }
        return std::ptr::null_mut();
    }
    let buf = match how(s).and_then(|b| s.rt.barrier_all().map(|()| b)) {
        Ok(b) => b,
        Err(e) => {
            tracing::error!(pe = s.rt.my_pe(), "{func}({size} bytes) returns NULL: {e}");
            return std::ptr::null_mut();
        }
    };
    let addr = s.rt.heap_local_range().0 + buf.offset();
    tracing::debug!(pe = s.rt.my_pe(), "{func}({size} bytes) = {addr:#x}");
    s.alloc_table().insert(addr, buf);
    addr as *mut c_void
}

/// `shmem_malloc` (§9.3.1): `size` bytes of symmetric memory (64-byte aligned), or NULL.
#[no_mangle]
pub extern "C" fn shmem_malloc(size: usize) -> *mut c_void {
    allocate("shmem_malloc", size, |s| s.rt.alloc::<u8>(size))
}

/// `shmem_malloc_with_hints` (§9.3.2): as `shmem_malloc`; the hints are accepted and
/// not used.
#[no_mangle]
pub extern "C" fn shmem_malloc_with_hints(size: usize, _hints: c_long) -> *mut c_void {
    allocate("shmem_malloc_with_hints", size, |s| s.rt.alloc::<u8>(size))
}

/// `shmem_calloc` (§9.3.3): `count` zeroed elements of `size` bytes, or NULL (also when
/// `count × size` overflows).
#[no_mangle]
pub extern "C" fn shmem_calloc(count: usize, size: usize) -> *mut c_void {
    let Some(bytes) = count.checked_mul(size) else {
        state("shmem_calloc");
        tracing::error!("shmem_calloc({count}, {size}) returns NULL: the size overflows");
        return std::ptr::null_mut();
    };
    allocate("shmem_calloc", bytes, |s| s.rt.calloc::<u8>(bytes))
}

/// `shmem_align` (§9.3.1): `size` bytes aligned to `alignment` (a power of two up to
/// 16 MiB, `symmem::MAX_ALIGN`; the address, on every PE), or NULL (also on every PE for a
/// larger alignment).
#[no_mangle]
pub extern "C" fn shmem_align(alignment: usize, size: usize) -> *mut c_void {
    allocate("shmem_align", size, |s| {
        s.rt.alloc_aligned::<u8>(size, alignment)
    })
}

/// Frees the allocation at `addr`; Err names the address when it is not one.
fn release(s: &State, func: &'static str, addr: usize) -> Result<()> {
    s.rt.barrier_all()?;
    let buf = s.alloc_table().remove(&addr);
    match buf {
        Some(b) => s.rt.free(b),
        None => Err(symmem_runtime::Error::InvalidArgument {
            op: func,
            reason: format!(
                "{addr:#x} is not the address of a live shmem_malloc allocation on PE {}",
                s.rt.my_pe()
            ),
        }),
    }
}

/// `shmem_free` (§9.3.1): frees what `shmem_malloc`, `shmem_calloc`, `shmem_align` or
/// `shmem_realloc` returned; NULL does nothing. Another address ends the job (an error
/// naming it).
#[no_mangle]
pub extern "C" fn shmem_free(ptr: *mut c_void) {
    if ptr.is_null() {
        return;
    }
    let s = state("shmem_free");
    if let Err(e) = release(s, "shmem_free", ptr as usize) {
        crate::die("shmem_free", e);
    }
}

/// `shmem_realloc` (§9.3.1): a block of `size` bytes holding the first `size` bytes of
/// `ptr`'s block (the rest unspecified); `ptr` is freed. NULL `ptr` allocates; size 0
/// frees and returns NULL. On failure it returns NULL and `ptr` stays allocated.
#[no_mangle]
pub extern "C" fn shmem_realloc(ptr: *mut c_void, size: usize) -> *mut c_void {
    const FUNC: &str = "shmem_realloc";
    if ptr.is_null() {
        return allocate(FUNC, size, |s| s.rt.alloc::<u8>(size));
    }
    let s = state(FUNC);
    if size == 0 {
        if let Err(e) = release(s, FUNC, ptr as usize) {
            tracing::error!(pe = s.rt.my_pe(), "{FUNC}: {e}");
        }
        return std::ptr::null_mut();
    }
    let old_len = match s.alloc_table().get(&(ptr as usize)) {
        Some(b) => b.len(),
        None => {
            tracing::error!(
                pe = s.rt.my_pe(),
                "{FUNC} returns NULL: {:#x} is not the address of a live shmem_malloc allocation",
                ptr as usize
            );
            return std::ptr::null_mut();
        }
    };
    let new = allocate(FUNC, size, |s| s.rt.alloc::<u8>(size));
    if new.is_null() {
        return new;
    }
    let keep = old_len.min(size);
    let me = s.rt.my_pe();
    let copied = (|| {
        let mut bytes = vec![0u8; keep];
        let old = s.rt.view_at(FUNC, ptr.cast::<u8>(), keep)?;
        s.rt.get(old.at(0), &mut bytes, me)?;
        let to = s.rt.view_at(FUNC, new.cast::<u8>(), keep)?;
        s.rt.put(to.at(0), &bytes, me)?;
        release(s, FUNC, ptr as usize)
    })();
    match copied {
        Ok(()) => new,
        Err(e) => crate::die(FUNC, e),
    }
}
