//! The symmetric heap in host memory: a memfd per PE, mapped shared by every same-node
//! PE. Also the mapping type of the host control blocks, which live in a memfd on GPU PEs
//! too.
//!
//! Every memfd is sealed at its size once created ([`SEALS`]), and a peer's memfd is
//! checked for those seals and for exactly the expected size before it is mapped
//! ([`check_import`]): a mapping past the end of a file raises SIGBUS on access, so a PE
//! that could shrink its heap could crash every PE that maps it.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

use super::MAX_ALIGN;
use crate::error::{Error, Result};

/// The seals every exported memfd carries: its size can no longer change, nor can its
/// seals.
pub const SEALS: libc::c_int = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

/// Creates an anonymous memory file of `len` bytes, sealed with [`SEALS`]. It has no name
/// in any filesystem, so it disappears with the last process that holds it, even when
/// processes are killed.
pub fn create_memfd(name: &str, len: usize) -> Result<OwnedFd> {
    let cname = CString::new(name).expect("memfd name has no NUL");
    // SAFETY: `cname` is a valid NUL-terminated string for the duration of the call.
    let fd =
        unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(Error::last_os(format!("memfd_create({name})")));
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ftruncate on a descriptor we own; sparse, so no memory is committed.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
        return Err(Error::last_os(format!(
            "sizing the symmetric heap memfd to {len} bytes (SYMMEM_SYMMETRIC_SIZE)"
        )));
    }
    // SAFETY: F_ADD_SEALS on a descriptor we own, created with MFD_ALLOW_SEALING.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, SEALS) } != 0 {
        return Err(Error::last_os(format!(
            "sealing the memfd {name} at {len} bytes ({})",
            seal_names(SEALS)
        )));
    }
    Ok(fd)
}

/// `seals` as `F_SEAL_*` names joined by `|`, or `no seals`.
fn seal_names(seals: libc::c_int) -> String {
    const NAMES: [(libc::c_int, &str); 5] = [
        (libc::F_SEAL_SHRINK, "F_SEAL_SHRINK"),
        (libc::F_SEAL_GROW, "F_SEAL_GROW"),
        (libc::F_SEAL_WRITE, "F_SEAL_WRITE"),
        (libc::F_SEAL_FUTURE_WRITE, "F_SEAL_FUTURE_WRITE"),
        (libc::F_SEAL_SEAL, "F_SEAL_SEAL"),
    ];
    let names: Vec<&str> = NAMES
        .iter()
        .filter(|(bit, _)| seals & bit != 0)
        .map(|&(_, name)| name)
        .collect();
    if names.is_empty() {
        "no seals".into()
    } else {
        names.join(" | ")
    }
}

/// Checks that `fd`, which PE `peer` sent as its `what`, carries [`SEALS`] and is exactly
/// `len` bytes long, so that mapping `len` bytes of it stays valid for as long as the
/// mapping lives. The seals are checked first: once they hold, the size cannot change.
pub fn check_import(fd: BorrowedFd<'_>, peer: usize, len: usize, what: &str) -> Result<()> {
    let refuse = |why: String| {
        Error::io(
            format!("mapping PE {peer}'s {what}"),
            std::io::Error::new(std::io::ErrorKind::InvalidData, why),
        )
    };
    // SAFETY: F_GET_SEALS only reads the seals of a valid descriptor.
    let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
    if seals < 0 {
        let err = std::io::Error::last_os_error();
        return Err(refuse(format!(
            "its fd is not a sealable memfd (F_GET_SEALS: {err}); expected {}",
            seal_names(SEALS)
        )));
    }
    if seals & SEALS != SEALS {
        return Err(refuse(format!(
            "its fd carries seals {}, expected {}: PE {peer} could still resize it",
            seal_names(seals),
            seal_names(SEALS)
        )));
    }
    // SAFETY: an all-zero stat is a valid out-parameter, filled by fstat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor and out-parameter.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(Error::last_os(format!("fstat of PE {peer}'s {what}")));
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_size as u64 != len as u64 {
        return Err(refuse(format!(
            "its fd is {} bytes (mode {:o}), expected {len} bytes in a regular memfd",
            st.st_size, st.st_mode
        )));
    }
    Ok(())
}

/// Heaps are mapped at a multiple of this plus their PE's colour ([`HEAP_COLOUR_STEP`] ×
/// (PE mod [`HEAP_COLOURS`])), so that the same offset in two same-node PEs' heaps differs
/// in address bits 24–27.
///
/// Why: AMD Zen cores pick the L1 data cache way by a "microtag", a hash of linear-address
/// bits 12–27. Two lines whose addresses agree in those bits cannot both stay in L1 (each
/// access to one evicts the other), and the kernel places 1 GiB heap mappings next to each
/// other, so every word of this PE's heap aliased the same word of every peer's heap. A
/// ping-pong that spins on its own heap's signal word and writes the peer's (every
/// put_signal ping-pong) paid for it on every trip. On the 2-core EPYC VM this was built on,
/// a flag ping-pong of two forked processes with no symmem in it took 0.065 µs with its two
/// flags 256 MiB, 512 MiB or 1 GiB apart and 0.047 µs with them 4 KiB or 128 MiB apart, in
/// one series; symmem's put_signal ping-pong went from 0.064–0.069 to 0.052 µs with
/// coloured heaps (the C flag ping-pong, flags on one mapping: 0.045–0.051). On other CPUs
/// this costs nothing but address space.
///
/// The colours first were 2 MiB apart (bits 21–27, 128 colours), which left a heap only
/// 2 MiB aligned, so `shmem_align(4 MiB)` returned an address aligned to 2 MiB on some
/// PEs: an allocation's offset is the same on every PE, so its address can only be aligned
/// as far as every heap's base is. The step is now [`MAX_ALIGN`], the largest alignment
/// allocations accept: bits 24–27 each enter a different bit of the hash as bits 21–23
/// did (that series, in docs/src/performance.md, found flags 2 MiB and 128 MiB apart,
/// bits 21 and 27, equally fast; 16 MiB steps were not timed on their own, the VM being
/// loaded that day), so up to [`HEAP_COLOURS`] (16) PEs per node still get pairwise
/// different microtags, and every heap is [`MAX_ALIGN`]-aligned.
pub const HEAP_COLOUR_ALIGN: usize = 1 << 28;
/// The distance between two neighbouring heap colours: [`MAX_ALIGN`] (16 MiB), so that
/// every coloured heap is aligned to the largest alignment an allocation may ask for.
pub const HEAP_COLOUR_STEP: usize = MAX_ALIGN;
/// How many distinct colours heaps get.
pub const HEAP_COLOURS: usize = HEAP_COLOUR_ALIGN / HEAP_COLOUR_STEP;

const _: () = assert!(HEAP_COLOURS >= 2 && HEAP_COLOUR_STEP.is_multiple_of(MAX_ALIGN));

/// The size of a page.
fn page_size() -> usize {
    // SAFETY: sysconf only reads a system constant.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096)
}

/// A shared read-write mapping of a whole memfd, unmapped on drop.
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a Mapping is an address range; it can be moved to and shared with any thread.
// Accesses through it are synchronized by the runtime's own protocols.
unsafe impl Send for Mapping {}
// SAFETY: see above; `&Mapping` only hands out the base address.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd`, shared with every other process that maps it.
    pub fn map(fd: BorrowedFd<'_>, len: usize, what: &str) -> Result<Self> {
        // SAFETY: no fixed address: the kernel picks a free range.
        unsafe { Self::map_at(fd, len, what, None) }
    }

    /// Maps `len` bytes of `fd` like [`map`](Self::map), at a multiple of [`MAX_ALIGN`]
    /// whose bits 24–27 are `colour` (modulo [`HEAP_COLOURS`]): see [`HEAP_COLOUR_ALIGN`].
    /// The unused rest of the reservation is given back at once.
    pub fn map_coloured(fd: BorrowedFd<'_>, len: usize, what: &str, colour: usize) -> Result<Self> {
        let offset = (colour % HEAP_COLOURS) * HEAP_COLOUR_STEP;
        let span = len.next_multiple_of(page_size()) + HEAP_COLOUR_ALIGN + offset;
        // SAFETY: reserves address space only (no access, no memory committed), at an
        // address chosen by the kernel.
        let reserved = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                span,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if reserved == libc::MAP_FAILED {
            return Err(Error::last_os(format!(
                "reserving {span} bytes of address space for {what}"
            )));
        }
        let reserved = reserved as usize;
        let start = reserved.next_multiple_of(HEAP_COLOUR_ALIGN) + offset;
        let end = start + len.next_multiple_of(page_size());
        // SAFETY: `start .. end` lies inside the reservation made above, which nothing
        // else uses.
        let mapped = unsafe { Self::map_at(fd, len, what, Some(start)) };
        // The reservation around the mapping (all of it, if mapping failed) goes back.
        let (keep_from, keep_to) = if mapped.is_ok() {
            (start, end)
        } else {
            (end, end)
        };
        for (from, to) in [(reserved, keep_from), (keep_to, reserved + span)] {
            if to > from {
                // SAFETY: a part of the reservation made above that holds no mapping of ours.
                let rc = unsafe { libc::munmap(from as *mut libc::c_void, to - from) };
                debug_assert_eq!(rc, 0, "munmap of an unused reservation failed");
            }
        }
        mapped
    }

    /// Maps `len` bytes of `fd` shared and read-write, at `at` (replacing what is there)
    /// or, without it, where the kernel chooses.
    ///
    /// # Safety
    /// `at .. at + len`, if given, is address space this process reserved and nothing
    /// else uses.
    unsafe fn map_at(
        fd: BorrowedFd<'_>,
        len: usize,
        what: &str,
        at: Option<usize>,
    ) -> Result<Self> {
        let (addr, fixed) = match at {
            Some(a) => (a as *mut libc::c_void, libc::MAP_FIXED),
            None => (std::ptr::null_mut(), 0),
        };
        // SAFETY: `fd` is valid and at least `len` bytes long, for good: this PE's own
        // memfds are created and sealed at that size, and peers' pass `check_import`
        // first; a fixed address replaces only the caller's own reservation.
        let ptr = unsafe {
            libc::mmap(
                addr,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_NORESERVE | fixed,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(Error::last_os(format!("mapping {what} ({len} bytes)")));
        }
        Ok(Mapping {
            ptr: NonNull::new(ptr.cast()).expect("mmap never returns null on success"),
            len,
        })
    }

    /// The first byte.
    pub fn base(&self) -> NonNull<u8> {
        self.ptr
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: exactly the range mmap returned; nothing refers to it after the runtime
        // that owns this mapping is gone. A failure cannot be acted on in drop.
        let rc = unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
        debug_assert_eq!(rc, 0, "munmap failed");
    }
}

/// This PE's memfd heap and its mappings of same-node peers' memfd heaps.
#[derive(Debug)]
pub struct MemfdHeap {
    memfd: OwnedFd,
    own: Mapping,
    peers: Vec<Mapping>,
}

impl MemfdHeap {
    /// Creates and maps a zeroed (sparse) heap of `len` bytes for PE `pe` of job `job`
    /// (both in the memfd's name, so that `/proc/<pid>/maps` tells apart the heaps of
    /// several runtimes in one process).
    pub fn create(job: u64, pe: usize, len: usize) -> Result<Self> {
        let memfd = create_memfd(&format!("symmem-heap-{job:016x}-pe{pe}"), len)?;
        let own = Mapping::map_coloured(memfd.as_fd(), len, "this PE's symmetric heap", pe)?;
        Ok(MemfdHeap {
            memfd,
            own,
            peers: Vec::new(),
        })
    }

    /// Address of this PE's heap.
    pub fn base(&self) -> u64 {
        self.own.base().as_ptr() as u64
    }

    /// The fd to send to peers.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.memfd.as_fd()
    }

    /// Maps peer `peer`'s heap of `len` bytes, once its memfd passed [`check_import`];
    /// returns its address here.
    pub fn import(&mut self, peer: usize, fd: BorrowedFd<'_>, len: usize) -> Result<u64> {
        check_import(fd, peer, len, "symmetric heap")?;
        let m = Mapping::map_coloured(fd, len, &format!("PE {peer}'s symmetric heap"), peer)?;
        let base = m.base().as_ptr() as u64;
        self.peers.push(m);
        Ok(base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A memfd of `len` bytes created with `flags` and sealed with `seals` (none if 0).
    fn raw_memfd(flags: libc::c_uint, len: usize, seals: libc::c_int) -> OwnedFd {
        // SAFETY: a valid NUL-terminated name.
        let fd = unsafe { libc::memfd_create(c"symmem-test".as_ptr(), flags | libc::MFD_CLOEXEC) };
        assert!(fd >= 0, "{}", std::io::Error::last_os_error());
        // SAFETY: a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: resizing and sealing a memfd we own.
        unsafe {
            assert_eq!(libc::ftruncate(fd.as_raw_fd(), len as libc::off_t), 0);
            if seals != 0 {
                assert_eq!(libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals), 0);
            }
        }
        fd
    }

    fn resize(fd: BorrowedFd<'_>, len: usize) -> std::io::Result<()> {
        // SAFETY: ftruncate on a valid descriptor.
        match unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        }
    }

    /// Nobody holding a heap's fd, this PE or a peer, can resize it.
    #[test]
    fn created_memfds_cannot_be_resized() {
        let fd = create_memfd("symmem-test", 8192).unwrap();
        for len in [0, 4096, 16384] {
            let err = resize(fd.as_fd(), len).expect_err("a heap memfd was resized");
            assert_eq!(err.raw_os_error(), Some(libc::EPERM), "{err}");
        }
    }

    #[test]
    fn import_maps_a_sealed_memfd_of_the_expected_size() {
        let mut heap = MemfdHeap::create(0, 0, 8192).unwrap();
        let peer = MemfdHeap::create(0, 1, 8192).unwrap();
        let base = heap.import(1, peer.fd(), 8192).unwrap();
        // SAFETY: both addresses map the same 8192-byte memfd.
        unsafe {
            (base as *mut u64).add(3).write_volatile(0xfeed);
            assert_eq!((peer.base() as *const u64).add(3).read_volatile(), 0xfeed);
        }
    }

    /// Each PE's heap lands at its own colour: the same offset in two PEs' heaps differs in
    /// address bits 24–27, every heap (own, a peer's, the peer's mapping of it) starts at
    /// a multiple of [`MAX_ALIGN`], and the mapping still shows the memfd's contents.
    #[test]
    fn heaps_are_mapped_at_their_pe_colour() {
        let len = 3 * HEAP_COLOUR_STEP + 4096;
        let mut heap = MemfdHeap::create(0, 2, len).unwrap();
        let peer = MemfdHeap::create(0, HEAP_COLOURS + 5, len).unwrap();
        let base = heap.import(HEAP_COLOURS + 5, peer.fd(), len).unwrap();
        let colour = |addr: u64| (addr as usize % HEAP_COLOUR_ALIGN) / HEAP_COLOUR_STEP;
        for b in [heap.base(), peer.base(), base] {
            assert_eq!(b as usize % MAX_ALIGN, 0, "heap at {b:#x}");
        }
        assert_eq!(colour(heap.base()), 2);
        assert_eq!(colour(peer.base()), 5);
        assert_eq!(colour(base), 5);
        // SAFETY: both addresses map the same memfd, `len` bytes long.
        unsafe {
            (base as *mut u64).add(len / 8 - 1).write_volatile(0xc0102);
            assert_eq!(
                (peer.base() as *const u64).add(len / 8 - 1).read_volatile(),
                0xc0102
            );
        }
    }

    /// A memfd that cannot be sealed at all (no MFD_ALLOW_SEALING) is refused.
    #[test]
    fn import_refuses_an_unsealed_memfd() {
        let mut heap = MemfdHeap::create(0, 0, 8192).unwrap();
        let fd = raw_memfd(0, 8192, 0);
        let err = heap.import(4, fd.as_fd(), 8192).unwrap_err().to_string();
        assert!(
            err.contains("PE 4's symmetric heap")
                && err.contains("F_SEAL_SEAL")
                && err.contains("expected F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL"),
            "{err}"
        );
    }

    /// A memfd its sender could still shrink (and so SIGBUS every PE that maps it) is
    /// refused, as is one whose seals could still be changed.
    #[test]
    fn import_refuses_a_shrinkable_or_unsealed_memfd() {
        let mut heap = MemfdHeap::create(0, 0, 8192).unwrap();
        let shrinkable = raw_memfd(
            libc::MFD_ALLOW_SEALING,
            8192,
            libc::F_SEAL_GROW | libc::F_SEAL_SEAL,
        );
        let err = heap
            .import(2, shrinkable.as_fd(), 8192)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("PE 2") && err.contains("seals F_SEAL_GROW | F_SEAL_SEAL"),
            "{err}"
        );
        let open = raw_memfd(
            libc::MFD_ALLOW_SEALING,
            8192,
            libc::F_SEAL_SHRINK | libc::F_SEAL_GROW,
        );
        let err = heap.import(2, open.as_fd(), 8192).unwrap_err().to_string();
        assert!(
            err.contains("PE 2") && err.contains("seals F_SEAL_SHRINK | F_SEAL_GROW,"),
            "{err}"
        );
    }

    /// A sealed memfd of another size than the heap is refused before it is mapped.
    #[test]
    fn import_refuses_a_memfd_of_another_size() {
        let mut heap = MemfdHeap::create(0, 0, 8192).unwrap();
        let small = create_memfd("symmem-test", 4096).unwrap();
        let err = heap.import(5, small.as_fd(), 8192).unwrap_err().to_string();
        assert!(
            err.contains("PE 5") && err.contains("4096 bytes") && err.contains("expected 8192"),
            "{err}"
        );
        let big = create_memfd("symmem-test", 16384).unwrap();
        let err = heap.import(5, big.as_fd(), 8192).unwrap_err().to_string();
        assert!(
            err.contains("16384 bytes") && err.contains("expected 8192"),
            "{err}"
        );
    }
}
