//! The GPU side of a GPU PE's proxy channel ([`crate::proxy`]): the ring in mapped pinned
//! host memory, and payloads staged between GPU memory and a pinned buffer on the proxy
//! thread's own non-blocking stream.

use std::sync::Arc;

use super::{CopyStream, Gpu, MappedHost};
use crate::error::Result;
use crate::proxy::{RingMemory, Staging, STAGING_BYTES};

impl RingMemory for MappedHost {
    fn host(&self) -> *mut u8 {
        MappedHost::host(self)
    }

    fn device(&self) -> u64 {
        MappedHost::device(self)
    }
}

/// The proxy thread's copies between GPU memory and its pinned staging buffer.
struct GpuStaging {
    buffer: MappedHost,
    stream: CopyStream,
}

impl Staging for GpuStaging {
    fn buffer(&mut self) -> &mut [u8] {
        self.buffer.bytes_mut()
    }

    fn fetch(&mut self, src: u64, len: usize) -> Result<()> {
        let dst = self.buffer.bytes_mut()[..len].as_mut_ptr();
        // SAFETY: the buffer holds `len` bytes; `src` is the GPU address a device
        // operation of this PE named as a put's source, valid until the request completes.
        unsafe {
            self.stream
                .copy_from_device("proxy: a device put's source", dst, src, len)
        }
    }

    fn store(&mut self, dst: u64, len: usize) -> Result<()> {
        let src = self.buffer.bytes_mut()[..len].as_ptr();
        // SAFETY: as in `fetch`, for a get's destination.
        unsafe {
            self.stream
                .copy_to_device("proxy: a device get's destination", dst, src, len)
        }
    }
}

/// The ring memory (`ring_bytes` of its capacity) and the staging of a GPU PE's proxy
/// channel: [`STAGING_BYTES`] of pinned buffer and a non-blocking stream, so the copies
/// run while the kernel that issued them still runs on the legacy stream.
pub(crate) fn proxy_memory(
    gpu: &Arc<Gpu>,
    ring_bytes: usize,
) -> Result<(Arc<dyn RingMemory>, Box<dyn Staging>)> {
    let ring = MappedHost::new(gpu, ring_bytes, "proxy ring")?;
    let staging = GpuStaging {
        buffer: MappedHost::new(gpu, STAGING_BYTES, "proxy staging buffer")?,
        stream: CopyStream::new(gpu, "the proxy thread")?,
    };
    Ok((Arc::new(ring), Box::new(staging)))
}
