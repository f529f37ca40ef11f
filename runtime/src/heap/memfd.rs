//! The symmetric heap in host memory: a memfd per PE, mapped shared by every same-node
//! PE. Also the mapping type of the host control blocks, which live in a memfd on GPU PEs
//! too.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

use crate::error::{Error, Result};

/// Creates an anonymous memory file of `len` bytes. It has no name in any filesystem, so
/// it disappears with the last process that holds it, even when processes are killed.
pub fn create_memfd(name: &str, len: usize) -> Result<OwnedFd> {
    let cname = CString::new(name).expect("memfd name has no NUL");
    // SAFETY: `cname` is a valid NUL-terminated string for the duration of the call.
    let fd = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) };
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
    Ok(fd)
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
        // SAFETY: a fresh mapping at an address chosen by the kernel; `fd` is valid and at
        // least `len` bytes long (checked by the caller through the exchanged size).
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_NORESERVE,
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
    /// Creates and maps a zeroed (sparse) heap of `len` bytes for PE `pe`.
    pub fn create(pe: usize, len: usize) -> Result<Self> {
        let memfd = create_memfd(&format!("symmem-heap-pe{pe}"), len)?;
        let own = Mapping::map(memfd.as_fd(), len, "this PE's symmetric heap")?;
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

    /// Maps peer `peer`'s heap of `len` bytes; returns its address here.
    pub fn import(&mut self, peer: usize, fd: BorrowedFd<'_>, len: usize) -> Result<u64> {
        let m = Mapping::map(fd, len, &format!("PE {peer}'s symmetric heap"))?;
        let base = m.base().as_ptr() as u64;
        self.peers.push(m);
        Ok(base)
    }
}
