//! Symmetric static and global variables (OpenSHMEM 1.5 §3.3: "global and static
//! variables" are symmetric data objects).
//!
//! # Mechanism
//!
//! At `shmem_init` every PE finds the main program's writable data segment (`.data` and
//! `.bss`, the `PT_LOAD` segment with `PF_W` minus its `PT_GNU_RELRO` head) with
//! `dl_iterate_phdr`, allocates a symmetric block of its page-rounded size (collective:
//! every PE runs the same program, so the sizes and offsets agree), copies the segment's
//! current contents into the block, and moves the block's pages over the segment with
//! `mremap(old_size = 0, MREMAP_FIXED)`, which maps the same shared pages a second time at
//! the segment's address. From then on the program's statics *are* symmetric heap memory:
//!
//! - an address in the segment translates to the block's heap address at the same offset
//!   ([`Statics::translate`]), and every operation goes through the runtime as for
//!   `shmem_malloc` memory: stores through the peers' mappings on the node, the socket or
//!   ibverbs transport across nodes;
//! - peers' writes land in the pages the program reads its statics from, so
//!   `shmem_long_wait_until(&flag, …)` on a `static long flag` works.
//!
//! The segment stays mapped to those pages after `shmem_finalize` (the mapping keeps them
//! alive), so statics keep their values. Not done on GPU PEs (their heap is GPU memory)
//! and not for shared libraries' statics (only the main program's, as the specification
//! requires); both are logged at info level, and such addresses stay non-symmetric.

use symmem_runtime::Runtime;

/// The main program's data segment, mapped onto a symmetric block.
#[derive(Debug)]
pub(crate) struct Statics {
    /// Page-aligned start of the segment.
    start: usize,
    /// Page-rounded length.
    len: usize,
    /// The block's address in this PE's heap mapping.
    heap_addr: usize,
}

impl Statics {
    /// The heap address of `addr` when it lies in the data segment, else `addr`.
    pub(crate) fn translate(&self, addr: usize) -> usize {
        match addr.checked_sub(self.start) {
            Some(off) if off < self.len => self.heap_addr + off,
            _ => addr,
        }
    }
}

/// `[start, end)` of the main program's writable data, after RELRO; None if it has none.
fn writable_segment() -> Option<(usize, usize)> {
    /// The first object `dl_iterate_phdr` reports is the main program.
    unsafe extern "C" fn first(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        out: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: dl_iterate_phdr passes a valid info for the duration of the call, and
        // `out` is the `Option<(usize, usize)>` that `writable_segment` passed.
        let (info, out) = unsafe { (&*info, &mut *out.cast::<Option<(usize, usize)>>()) };
        let bias = info.dlpi_addr as usize;
        // SAFETY: dlpi_phdr points to dlpi_phnum program headers of the loaded object.
        let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum.into()) };
        let relro_end = phdrs
            .iter()
            .filter(|p| p.p_type == libc::PT_GNU_RELRO)
            .map(|p| bias + (p.p_vaddr + p.p_memsz) as usize)
            .max()
            .unwrap_or(0);
        *out = phdrs
            .iter()
            .filter(|p| p.p_type == libc::PT_LOAD && p.p_flags & libc::PF_W != 0)
            .map(|p| {
                let start = bias + p.p_vaddr as usize;
                (start.max(relro_end), start + p.p_memsz as usize)
            })
            .rfind(|(s, e)| s < e);
        1
    }
    let mut found: Option<(usize, usize)> = None;
    // SAFETY: `first` only reads the headers and writes `found`, which outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(first), (&raw mut found).cast()) };
    found
}

/// Maps the main program's data segment onto a symmetric block (see the module docs).
/// Collective. Returns None, after logging why, where statics stay non-symmetric.
pub(crate) fn register(rt: &Runtime) -> Option<Statics> {
    if rt.is_gpu() {
        tracing::info!(
            "static and global variables are not symmetric on a GPU PE (its heap is GPU memory)"
        );
        return None;
    }
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()?;
    let (start, len) = match writable_segment() {
        Some((s, e)) => (s - s % page, e.next_multiple_of(page) - (s - s % page)),
        None => (0, 0),
    };
    // Every PE takes part in the allocation, even one that found nothing to map (its
    // mismatch is then reported on every PE).
    let block = match rt.alloc_aligned::<u8>(len.max(1), page) {
        Ok(b) => b,
        Err(e) => {
            tracing::error!(
                pe = rt.my_pe(),
                "static and global variables are not symmetric: {e}"
            );
            return None;
        }
    };
    if len == 0 {
        tracing::info!("the program has no writable data segment: no symmetric statics");
        return None;
    }
    let heap_addr = rt.heap_local_range().0 + block.offset();
    // SAFETY: `start..start + len` is the program's own readable data segment and
    // `heap_addr..heap_addr + len` a block of this PE's heap that nothing else uses yet
    // (peers do not touch it before the sync below); the ranges are distinct mappings.
    unsafe { std::ptr::copy_nonoverlapping(start as *const u8, heap_addr as *mut u8, len) };
    // SAFETY: `heap_addr` is page-aligned inside a MAP_SHARED mapping of the heap, so an
    // old_size of 0 maps the same pages again; MREMAP_FIXED puts them over the segment,
    // whose contents they now hold. The segment's old pages are unmapped by the call.
    let moved = unsafe {
        libc::mremap(
            heap_addr as *mut libc::c_void,
            0,
            len,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            start as *mut libc::c_void,
        )
    };
    if moved != start as *mut libc::c_void {
        tracing::error!(
            pe = rt.my_pe(),
            "static and global variables are not symmetric: mremap of the data segment {start:#x}..{:#x} onto the heap failed: {}",
            start + len,
            std::io::Error::last_os_error()
        );
        return None;
    }
    // The block is the segment's for the whole run: it is never freed (dropping the
    // handle keeps it reserved).
    tracing::debug!(
        pe = rt.my_pe(),
        "data segment {start:#x}..{:#x} is symmetric (heap block at {heap_addr:#x})",
        start + len
    );
    Some(Statics {
        start,
        len,
        heap_addr,
    })
}
