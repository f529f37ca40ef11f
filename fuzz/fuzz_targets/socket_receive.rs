//! The socket transport's receive state machine (headers, requests, payloads, answers)
//! fed a peer's arbitrary bytes over an in-memory wire (no socket, no thread), against a host heap with inaccessible
//! pages on both sides: a request that got past the checks and touched a byte outside
//! the heap crashes here.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use symmem_transport::fuzzing::socket_replay;
use symmem_transport::HeapRegion;

/// Pages of heap between the guard pages.
const HEAP_PAGES: usize = 16;

/// The heap's address and length; mapped once, between two `PROT_NONE` pages.
fn guarded_heap() -> (usize, usize) {
    static HEAP: OnceLock<(usize, usize)> = OnceLock::new();
    *HEAP.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let page =
            usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).expect("a page size");
        let len = HEAP_PAGES * page;
        // SAFETY: a fresh private anonymous mapping, placed by the kernel; nothing else
        // refers to it. It stays mapped for the life of the process.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len + 2 * page,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(
            base,
            libc::MAP_FAILED,
            "mmap: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: [base + page, base + page + len) lies inside the mapping made above.
        let heap = unsafe { base.cast::<u8>().add(page) };
        // SAFETY: as above; only the middle pages become accessible.
        let rc = unsafe { libc::mprotect(heap.cast(), len, libc::PROT_READ | libc::PROT_WRITE) };
        assert_eq!(rc, 0, "mprotect: {}", std::io::Error::last_os_error());
        (heap as usize, len)
    })
}

fuzz_target!(|data: &[u8]| {
    let (base, len) = guarded_heap();
    // SAFETY: the heap's `len` bytes are mapped read-write and used by nothing else
    // between runs; zeroing them makes every run start alike.
    unsafe { std::ptr::write_bytes(base as *mut u8, 0, len) };
    let heap = HeapRegion {
        base: base as u64,
        len,
        host: true,
    };
    socket_replay(heap, data);
});
