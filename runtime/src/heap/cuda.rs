//! The symmetric heap in GPU memory: CUDA VMM chunks exported as POSIX fds.
//!
//! Each PE reserves one virtual range for its heap, backs it with `cuMemCreate` chunks of
//! at most [`CHUNK`] bytes (rounded to the allocation granularity), maps them and grants
//! its GPU read-write access. The chunks' POSIX fds go to same-node PEs over the
//! `fd_pass` socket; each peer imports them, maps them into a range of its own and grants
//! its GPU access. Peers on the same GPU (several PEs per GPU) and peers that
//! `cuDeviceCanAccessPeer` allows are mapped; others have no direct path.
//!
//! Where the driver offers no VMM POSIX-fd handles, the heap is one `cuMemAlloc` shared
//! with the legacy `cuIpcGetMemHandle` (logged), whose 64-byte handle travels in the
//! description instead of fds.
//!
//! Every own heap starts at a multiple of [`MAX_ALIGN`], so that aligned allocations have
//! aligned addresses: a VMM range is reserved that much larger and its chunks are mapped
//! from the first multiple of it inside, as are peers' chunks here; a legacy IPC heap
//! starts at the first multiple of it inside a `cuMemAlloc` that much larger, and peers
//! add the same offset (sent in the description) to where `cuIpcOpenMemHandle` mapped it,
//! which the driver chooses: there a peer's device pointer is only as aligned as that.

use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use cudarc::driver::sys;

use super::MAX_ALIGN;
use crate::cuda::{check, Gpu};
use crate::error::{Error, Result};

/// Largest VMM chunk: big heaps are several chunks, so one export never needs one huge
/// physical allocation.
pub const CHUNK: usize = 1 << 30;

/// Description tag of a VMM heap; followed by the chunk count and each chunk's length.
const TAG_VMM: u8 = 1;
/// Description tag of a legacy IPC heap; followed by the 64-byte handle.
const TAG_IPC: u8 = 2;

/// Rounds `len` up to a multiple of `granularity` (a power of two, or any positive
/// number).
pub fn round_up(len: usize, granularity: usize) -> usize {
    len.div_ceil(granularity) * granularity
}

/// Splits `len` bytes (a multiple of `granularity`) into chunks of at most [`CHUNK`]
/// bytes, each a multiple of `granularity`.
pub fn chunk_lengths(len: usize, granularity: usize) -> Vec<usize> {
    let max = (CHUNK / granularity).max(1) * granularity;
    let mut left = len;
    let mut out = Vec::new();
    while left > 0 {
        let c = left.min(max);
        out.push(c);
        left -= c;
    }
    out
}

/// Encodes a VMM heap's description: tag, count, lengths.
pub fn encode_vmm(chunks: &[usize]) -> Vec<u8> {
    let mut v = vec![TAG_VMM];
    v.extend_from_slice(&(chunks.len() as u32).to_le_bytes());
    for c in chunks {
        v.extend_from_slice(&(*c as u64).to_le_bytes());
    }
    v
}

/// The total length of a peer's VMM chunks, checked against the heap: no chunk is
/// empty, the sum does not overflow, and it covers `len` bytes but no more than `len`
/// rounded up to `granularity` (what [`CudaHeap::create`] allocates for `len`). `peer`
/// names the sender in errors.
pub fn checked_total(
    peer: usize,
    lengths: &[usize],
    len: usize,
    granularity: usize,
) -> Result<usize> {
    let refuse = |why: String| Error::Inconsistent {
        what: "GPU heap description",
        detail: format!("PE {peer} announced chunks {why}"),
    };
    if let Some(i) = lengths.iter().position(|&c| c == 0) {
        return Err(refuse(format!("of which chunk {i} is empty")));
    }
    let total = lengths
        .iter()
        .try_fold(0usize, |sum, &c| sum.checked_add(c))
        .ok_or_else(|| refuse(format!("{lengths:?}, whose total length would overflow")))?;
    let most = len
        .checked_next_multiple_of(granularity)
        .ok_or_else(|| refuse(format!("for a heap of {len} bytes, which overflows")))?;
    if !(len..=most).contains(&total) {
        return Err(refuse(format!(
            "of {total} bytes in all; expected {len}..={most} bytes (SYMMEM_SYMMETRIC_SIZE = {len} rounded up to the allocation granularity of {granularity} bytes)"
        )));
    }
    Ok(total)
}

/// What a peer's description says about its heap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Description {
    /// VMM chunks of these lengths, one fd each, in order.
    Vmm(Vec<usize>),
    /// One legacy IPC allocation: its handle, and how far into the allocation the heap
    /// starts (less than [`MAX_ALIGN`]).
    Ipc([u8; 64], u64),
}

/// Encodes a legacy IPC heap's description: tag, handle, the heap's offset into the
/// allocation.
pub fn encode_ipc(handle: &[u8; 64], offset: u64) -> Vec<u8> {
    let mut v = vec![TAG_IPC];
    v.extend_from_slice(handle);
    v.extend_from_slice(&offset.to_le_bytes());
    v
}

/// Decodes a description; `peer` names the sender in errors.
pub fn decode(bytes: &[u8], peer: usize) -> Result<Description> {
    let bad = || Error::Inconsistent {
        what: "GPU heap description",
        detail: format!("PE {peer} sent {} malformed bytes", bytes.len()),
    };
    match bytes.first() {
        Some(&TAG_VMM) if bytes.len() >= 5 => {
            let n = u32::from_le_bytes(bytes[1..5].try_into().unwrap()) as usize;
            if bytes.len() != 5 + 8 * n {
                return Err(bad());
            }
            Ok(Description::Vmm(
                bytes[5..]
                    .chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().unwrap()) as usize)
                    .collect(),
            ))
        }
        Some(&TAG_IPC) if bytes.len() == 73 => {
            let offset = u64::from_le_bytes(bytes[65..].try_into().unwrap());
            if offset >= MAX_ALIGN as u64 {
                return Err(Error::Inconsistent {
                    what: "GPU heap description",
                    detail: format!(
                        "PE {peer} announced its heap {offset} bytes into its allocation; expected less than {MAX_ALIGN}"
                    ),
                });
            }
            Ok(Description::Ipc(bytes[1..65].try_into().unwrap(), offset))
        }
        _ => Err(bad()),
    }
}

fn prop(gpu: &Gpu) -> sys::CUmemAllocationProp {
    // SAFETY: an all-zero CUmemAllocationProp is a valid starting point (null pointers,
    // zero flags); the used fields are set below.
    let mut p: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    p.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    p.requestedHandleTypes =
        sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    p.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = gpu.ordinal as i32;
    p
}

fn access(gpu: &Gpu) -> sys::CUmemAccessDesc {
    // SAFETY: all-zero is a valid CUmemAccessDesc; the fields are set below.
    let mut a: sys::CUmemAccessDesc = unsafe { std::mem::zeroed() };
    a.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    a.location.id = gpu.ordinal as i32;
    a.flags = sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    a
}

/// One virtual range with mapped VMM chunks (own or imported), or a legacy IPC mapping.
#[derive(Debug)]
enum Range {
    Vmm {
        /// The reserved range: the chunks' length and [`MAX_ALIGN`] more, `span` bytes.
        reserved: u64,
        span: usize,
        /// Where the chunks are mapped: the first multiple of [`MAX_ALIGN`] in it.
        va: u64,
        handles: Vec<(sys::CUmemGenericAllocationHandle, usize)>,
    },
    /// Own `cuMemAlloc`; the heap starts `offset` bytes into it.
    Allocated { va: u64, offset: u64 },
    /// A peer's allocation opened with `cuIpcOpenMemHandle`; its heap starts `offset`
    /// bytes into it.
    Opened { va: u64, offset: u64 },
}

impl Range {
    /// The heap's first byte.
    fn base(&self) -> u64 {
        match self {
            Range::Vmm { va, .. } => *va,
            Range::Allocated { va, offset } | Range::Opened { va, offset } => va + offset,
        }
    }

    /// Maps `chunks` (handle, length) back to back into a fresh range of `len` bytes,
    /// starting at a multiple of [`MAX_ALIGN`], and grants `gpu` read-write access. Takes
    /// ownership of the handles (released on drop).
    fn map(
        gpu: &Gpu,
        len: usize,
        granularity: usize,
        chunks: Vec<(sys::CUmemGenericAllocationHandle, usize)>,
        what: &str,
    ) -> Result<Self> {
        let pe = gpu.pe;
        let mut reserved = 0;
        // MAX_ALIGN more than needed (rounded to the granularity, which reservations need),
        // so that a multiple of it lies inside even where the driver does not honour the
        // alignment asked.
        let span = len + MAX_ALIGN.next_multiple_of(granularity);
        let align = granularity.max(MAX_ALIGN);
        // SAFETY: reserves address space only; `reserved` is a valid out-parameter.
        let rc = unsafe { sys::cuMemAddressReserve(&mut reserved, span, align, 0, 0) };
        let mut range = Range::Vmm {
            reserved: 0,
            span,
            va: 0,
            handles: chunks,
        };
        check(
            rc,
            || format!("cuMemAddressReserve({span} bytes, aligned to {align}, for {what})"),
            pe,
        )?;
        let va = reserved.next_multiple_of(MAX_ALIGN as u64);
        if let Range::Vmm {
            reserved: r, va: v, ..
        } = &mut range
        {
            (*r, *v) = (reserved, va);
        }
        let Range::Vmm { handles, .. } = &range else {
            unreachable!()
        };
        let mut off = 0;
        for (i, &(h, clen)) in handles.iter().enumerate() {
            // SAFETY: `va + off .. + clen` lies inside the reserved range, unmapped so far.
            check(
                unsafe { sys::cuMemMap(va + off as u64, clen, 0, h, 0) },
                || format!("cuMemMap(chunk {i} of {what})"),
                pe,
            )?;
            off += clen;
        }
        let desc = access(gpu);
        // SAFETY: the whole range is mapped; one valid access descriptor.
        check(
            unsafe { sys::cuMemSetAccess(va, off, &desc, 1) },
            || format!("cuMemSetAccess({what})"),
            pe,
        )?;
        Ok(range)
    }
}

impl Drop for Range {
    fn drop(&mut self) {
        // Heaps are released at finalize, when no later call could report a failure: it is
        // logged, and the memory goes away with the context in any case.
        match self {
            Range::Vmm {
                reserved,
                span,
                va,
                handles,
            } => {
                if *reserved != 0 {
                    let mapped: usize = handles.iter().map(|h| h.1).sum();
                    // SAFETY: unmaps the range `map` mapped; after a failed `map` part of it
                    // may be unmapped already, and the error is ignored.
                    log_release(unsafe { sys::cuMemUnmap(*va, mapped) }, "cuMemUnmap");
                    // SAFETY: the range was reserved by `map` with this base and length.
                    log_release(
                        unsafe { sys::cuMemAddressFree(*reserved, *span) },
                        "cuMemAddressFree",
                    );
                }
                for (h, _) in handles.drain(..) {
                    // SAFETY: each handle came from cuMemCreate or an import and is
                    // released once.
                    log_release(unsafe { sys::cuMemRelease(h) }, "cuMemRelease");
                }
            }
            Range::Allocated { va, .. } => {
                // SAFETY: allocated by cuMemAlloc, freed once.
                log_release(unsafe { sys::cuMemFree_v2(*va) }, "cuMemFree");
            }
            Range::Opened { va, .. } => {
                // SAFETY: opened by cuIpcOpenMemHandle, closed once.
                log_release(
                    unsafe { sys::cuIpcCloseMemHandle(*va) },
                    "cuIpcCloseMemHandle",
                );
            }
        }
    }
}

/// Logs a failed release of GPU heap memory.
fn log_release(rc: sys::CUresult, call: &str) {
    if rc != sys::CUresult::CUDA_SUCCESS {
        tracing::warn!("releasing the GPU heap: {call} failed: {rc:?}");
    }
}

/// This PE's GPU heap and its mappings of same-node peers' GPU heaps.
#[derive(Debug)]
pub struct CudaHeap {
    own: Range,
    /// The fds of the own chunks, sent to peers (empty for a legacy IPC heap).
    fds: Vec<OwnedFd>,
    description: Vec<u8>,
    granularity: usize,
    peers: Vec<Range>,
    /// Last, so that the ranges are unmapped while the context is still retained.
    gpu: Arc<Gpu>,
}

impl Drop for CudaHeap {
    fn drop(&mut self) {
        // The ranges (dropped after this) are released with this PE's context current.
        if let Err(e) = self.gpu.bind() {
            tracing::warn!("releasing the GPU heap: {e}");
        }
    }
}

// SAFETY: the heap is a set of device address ranges and driver handles; the driver is
// thread-safe, and the runtime synchronizes accesses to the memory itself.
unsafe impl Send for CudaHeap {}
// SAFETY: see above.
unsafe impl Sync for CudaHeap {}

impl CudaHeap {
    /// Allocates a zeroed heap of at least `len` bytes on `gpu`.
    pub fn create(gpu: &Arc<Gpu>, len: usize) -> Result<Self> {
        gpu.bind()?;
        let pe = gpu.pe;
        use sys::CUdevice_attribute::*;
        let vmm = gpu.attribute(
            CU_DEVICE_ATTRIBUTE_VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED,
            "VMM support",
        )? != 0
            && gpu.attribute(
                CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                "POSIX fd handles",
            )? != 0;
        let heap = if vmm {
            Self::create_vmm(gpu, len)?
        } else {
            tracing::warn!(pe, "this GPU offers no VMM POSIX-fd handles: the heap uses cuMemAlloc and legacy CUDA IPC handles");
            Self::create_ipc(gpu, len)?
        };
        // SAFETY: the own range is mapped for at least `len` bytes.
        unsafe { gpu.zero("zeroing the new symmetric heap", heap.own.base(), len)? };
        Ok(heap)
    }

    fn create_vmm(gpu: &Arc<Gpu>, len: usize) -> Result<Self> {
        let pe = gpu.pe;
        let p = prop(gpu);
        let mut granularity = 0;
        // SAFETY: valid out-parameter and property struct.
        check(
            unsafe {
                sys::cuMemGetAllocationGranularity(
                    &mut granularity,
                    &p,
                    sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED,
                )
            },
            || "cuMemGetAllocationGranularity".into(),
            pe,
        )?;
        let total = round_up(len, granularity);
        let lengths = chunk_lengths(total, granularity);
        let mut handles = Vec::with_capacity(lengths.len());
        let mut fds = Vec::with_capacity(lengths.len());
        for (i, &c) in lengths.iter().enumerate() {
            let mut h = 0;
            // SAFETY: valid out-parameter and property struct.
            let rc = unsafe { sys::cuMemCreate(&mut h, c, &p, 0) };
            if rc != sys::CUresult::CUDA_SUCCESS {
                for (h, _) in handles {
                    // SAFETY: created above, released once.
                    let _ = unsafe { sys::cuMemRelease(h) };
                }
                let err = crate::cuda::cuda_error(
                    rc,
                    format!("cuMemCreate(chunk {i}: {c} bytes of a {total}-byte heap)"),
                    pe,
                    " (SYMMEM_SYMMETRIC_SIZE sets the heap size; GPU memory is committed up front)"
                        .into(),
                );
                return Err(err);
            }
            handles.push((h, c));
        }
        let own = Range::map(gpu, total, granularity, handles, "this PE's GPU heap")?;
        let Range::Vmm { handles, .. } = &own else {
            unreachable!()
        };
        for (i, &(h, _)) in handles.iter().enumerate() {
            let mut fd: i32 = -1;
            // SAFETY: `fd` receives an int, as the POSIX-fd handle type requires.
            check(
                unsafe {
                    sys::cuMemExportToShareableHandle(
                        (&mut fd as *mut i32).cast(),
                        h,
                        sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                        0,
                    )
                },
                || format!("cuMemExportToShareableHandle(chunk {i})"),
                pe,
            )?;
            // SAFETY: a fresh fd the driver handed to this process.
            fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        Ok(CudaHeap {
            gpu: gpu.clone(),
            own,
            fds,
            description: encode_vmm(&lengths),
            granularity,
            peers: Vec::new(),
        })
    }

    fn create_ipc(gpu: &Arc<Gpu>, len: usize) -> Result<Self> {
        let pe = gpu.pe;
        let mut va = 0;
        // MAX_ALIGN more, so that the heap can start at a multiple of it.
        let span = len + MAX_ALIGN;
        // SAFETY: valid out-parameter; the context is current.
        check(
            unsafe { sys::cuMemAlloc_v2(&mut va, span) },
            || {
                format!("cuMemAlloc({span} bytes, the symmetric heap and {MAX_ALIGN} bytes to align it)")
            },
            pe,
        )?;
        let offset = va.next_multiple_of(MAX_ALIGN as u64) - va;
        let own = Range::Allocated { va, offset };
        // SAFETY: all-zero is a valid handle buffer.
        let mut handle: sys::CUipcMemHandle = unsafe { std::mem::zeroed() };
        // SAFETY: `va` is the base of a cuMemAlloc allocation.
        check(
            unsafe { sys::cuIpcGetMemHandle(&mut handle, va) },
            || "cuIpcGetMemHandle(the symmetric heap)".into(),
            pe,
        )?;
        let bytes: [u8; 64] = std::array::from_fn(|i| handle.reserved[i] as u8);
        let description = encode_ipc(&bytes, offset);
        Ok(CudaHeap {
            gpu: gpu.clone(),
            own,
            fds: Vec::new(),
            description,
            granularity: 1,
            peers: Vec::new(),
        })
    }

    /// The GPU the heap is on.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// Device address of this PE's heap.
    pub fn base(&self) -> u64 {
        self.own.base()
    }

    /// What peers need besides the fds.
    pub fn description(&self) -> &[u8] {
        &self.description
    }

    /// The fds to send to peers.
    pub fn fds(&self) -> Vec<BorrowedFd<'_>> {
        self.fds.iter().map(|f| f.as_fd()).collect()
    }

    /// Maps peer `peer`'s heap of `len` bytes from its description and fds; returns its
    /// device address in this context.
    pub fn import(
        &mut self,
        peer: usize,
        description: &[u8],
        fds: Vec<OwnedFd>,
        len: usize,
    ) -> Result<u64> {
        let gpu = &*self.gpu;
        gpu.bind()?;
        let pe = gpu.pe;
        let range = match decode(description, peer)? {
            Description::Vmm(lengths) => {
                if lengths.len() != fds.len() {
                    return Err(Error::Inconsistent {
                        what: "GPU heap description",
                        detail: format!(
                            "PE {peer} announced {} chunks and sent {} fds",
                            lengths.len(),
                            fds.len()
                        ),
                    });
                }
                let total = checked_total(peer, &lengths, len, self.granularity.max(1))?;
                let mut handles = Vec::with_capacity(fds.len());
                for (i, (fd, &clen)) in fds.iter().zip(&lengths).enumerate() {
                    use std::os::fd::AsRawFd;
                    let mut h = 0;
                    // SAFETY: the POSIX-fd handle type passes the fd by value in the
                    // pointer argument; `fd` is open for the call.
                    let rc = unsafe {
                        sys::cuMemImportFromShareableHandle(&mut h, fd.as_raw_fd() as usize as *mut std::ffi::c_void, sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
                    };
                    if rc != sys::CUresult::CUDA_SUCCESS {
                        for (h, _) in handles {
                            // SAFETY: imported above, released once.
                            let _ = unsafe { sys::cuMemRelease(h) };
                        }
                        return Err(crate::cuda::cuda_error(
                            rc,
                            format!("cuMemImportFromShareableHandle(PE {peer}'s chunk {i})"),
                            pe,
                            String::new(),
                        ));
                    }
                    handles.push((h, clen));
                }
                Range::map(
                    gpu,
                    total,
                    self.granularity.max(1),
                    handles,
                    &format!("PE {peer}'s GPU heap"),
                )?
            }
            Description::Ipc(bytes, offset) => {
                // SAFETY: all-zero is a valid handle buffer; filled from the peer's bytes.
                let mut handle: sys::CUipcMemHandle = unsafe { std::mem::zeroed() };
                for (d, s) in handle.reserved.iter_mut().zip(bytes) {
                    *d = s as std::ffi::c_char;
                }
                let mut va = 0;
                // SAFETY: a handle from another process; flag 1 =
                // CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS.
                check(
                    unsafe { sys::cuIpcOpenMemHandle_v2(&mut va, handle, 1) },
                    || format!("cuIpcOpenMemHandle(PE {peer}'s heap)"),
                    pe,
                )?;
                Range::Opened { va, offset }
            }
        };
        let va = range.base();
        self.peers.push(range);
        Ok(va)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_and_chunks() {
        let g = 2 << 20;
        assert_eq!(round_up(1, g), g);
        assert_eq!(round_up(g, g), g);
        assert_eq!(round_up(g + 1, g), 2 * g);
        assert_eq!(chunk_lengths(round_up(1 << 30, g), g), vec![1 << 30]);
        let three = chunk_lengths(round_up((5 << 29) + 1, g), g);
        assert_eq!(three, vec![1 << 30, 1 << 30, (1 << 29) + g]);
        assert!(three.iter().all(|c| c % g == 0));
        // A granularity that does not divide CHUNK still gives multiples of it.
        let odd = 3 << 20;
        assert!(chunk_lengths(round_up(3 << 30, odd), odd)
            .iter()
            .all(|c| c % odd == 0 && *c <= CHUNK));
    }

    /// A peer's chunk lengths that overflow when summed, exceed the heap, fall short of
    /// it or include an empty chunk are refused, naming the peer.
    #[test]
    fn peer_chunk_lengths_are_checked_against_the_heap() {
        let g = 2 << 20;
        let len = (5 << 29) + 1;
        let total = round_up(len, g);
        let good = chunk_lengths(total, g);
        assert_eq!(checked_total(1, &good, len, g).unwrap(), total);

        let overflow = [usize::MAX, 2 * g];
        let err = checked_total(2, &overflow, len, g).unwrap_err().to_string();
        assert!(err.contains("PE 2") && err.contains("overflow"), "{err}");

        let over = [1 << 30, 1 << 30, 1 << 30];
        let err = checked_total(3, &over, len, g).unwrap_err().to_string();
        assert!(
            err.contains("PE 3")
                && err.contains(&format!("{} bytes", 3usize << 30))
                && err.contains(&format!("{len}..={total}")),
            "{err}"
        );

        let short = [1 << 30, 1 << 30];
        let err = checked_total(4, &short, len, g).unwrap_err().to_string();
        assert!(
            err.contains("PE 4") && err.contains(&format!("{} bytes", 2usize << 30)),
            "{err}"
        );

        let empty = [0, 1 << 30, 1 << 30, (1 << 29) + g];
        let err = checked_total(5, &empty, len, g).unwrap_err().to_string();
        assert!(
            err.contains("PE 5") && err.contains("chunk 0 is empty"),
            "{err}"
        );
    }

    #[test]
    fn descriptions_round_trip_and_reject_garbage() {
        let d = encode_vmm(&[1 << 30, 2 << 20]);
        assert_eq!(
            decode(&d, 1).unwrap(),
            Description::Vmm(vec![1 << 30, 2 << 20])
        );
        let handle: [u8; 64] = std::array::from_fn(|i| i as u8);
        let ipc = encode_ipc(&handle, 3 << 20);
        assert_eq!(decode(&ipc, 1).unwrap(), Description::Ipc(handle, 3 << 20));
        // A heap offset of MAX_ALIGN or more into the allocation is refused.
        let err = decode(&encode_ipc(&handle, MAX_ALIGN as u64), 2)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("PE 2") && err.contains(&MAX_ALIGN.to_string()),
            "{err}"
        );
        assert!(decode(&ipc[..65], 1).is_err());
        let err = decode(&d[..d.len() - 1], 3).unwrap_err().to_string();
        assert!(err.contains("PE 3 sent"), "{err}");
        assert!(decode(&[], 0).is_err());
        assert!(decode(&[9, 0, 0, 0, 0], 0).is_err());
    }
}
