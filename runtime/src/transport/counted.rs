//! A transport decorator that counts every request, fence and quiet it passes on (the
//! `Counters` a runtime reports).

use std::sync::Arc;

use symmem_device::Request;

use crate::counters::{Op, SharedOps};
use crate::error::Result;
use crate::transport::{DeviceHeap, Io, Pending, Transport};

/// A transport whose requests, fences and quiets are counted in `ops`.
pub(crate) struct Counted<T> {
    inner: T,
    ops: Arc<SharedOps>,
}

impl<T: Transport> Counted<T> {
    /// Counts what goes through `inner` in `ops`.
    pub(crate) fn new(inner: T, ops: Arc<SharedOps>) -> Self {
        Counted { inner, ops }
    }
}

impl<T: Transport> Transport for Counted<T> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn submit(&self, req: &Request, io: Io<'_>) -> Result<u64> {
        let r = self.inner.submit(req, io)?;
        self.ops.add_request(req);
        Ok(r)
    }

    fn submit_nowait(&self, req: &Request, io: Io<'_>) -> Result<Pending> {
        let r = self.inner.submit_nowait(req, io)?;
        self.ops.add_request(req);
        Ok(r)
    }

    fn fence(&self) -> Result<()> {
        self.ops.add(Op::Fence, 0);
        self.inner.fence()
    }

    fn quiet(&self) -> Result<()> {
        self.ops.add(Op::Quiet, 0);
        self.inner.quiet()
    }

    fn progress(&self) -> Result<()> {
        self.inner.progress()
    }

    fn nbi_issued(&self, req: &Request) {
        self.inner.nbi_issued(req)
    }

    fn shutdown(&self) {
        self.inner.shutdown()
    }

    fn serve_device_heap(&self, make: &dyn Fn() -> Result<Arc<dyn DeviceHeap>>) -> Result<()> {
        self.inner.serve_device_heap(make)
    }
}
