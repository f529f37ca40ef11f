//! A transport decorator that counts every request, fence and quiet it passes on, in the
//! counters the runtime reports ([`OpCounter`]).

use std::sync::Arc;

use symmem_device::{Opcode, Request, SignalOp};

use crate::error::GpuHeapError;
use crate::error::Result;
use crate::interface::{DeviceHeap, Io, OpCounter, Pending, Transport};

/// A transport whose requests, fences and quiets are counted in `ops`.
pub struct Counted<T> {
    inner: T,
    ops: Arc<dyn OpCounter>,
}

impl<T: Transport> Counted<T> {
    /// Counts what goes through `inner` in `ops`.
    pub fn new(inner: T, ops: Arc<dyn OpCounter>) -> Self {
        Counted { inner, ops }
    }
}

impl<T: Transport> Transport for Counted<T> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn submit(&self, req: &Request, io: Io<'_>) -> Result<u64> {
        let r = self.inner.submit(req, io)?;
        self.ops.request(req);
        Ok(r)
    }

    fn barrier_signal(&self, req: &Request, io: Io<'_>) -> Result<()> {
        self.inner.barrier_signal(req, io)?;
        // Counted as the signal it is to the program: the identity word a put_signal
        // carries with it is the barrier's own bookkeeping, not a put of the program's.
        let signal = match req.opcode() {
            Some(Opcode::PutSignal) => Request::signal(req.pe, req.signal, SignalOp::Add, 1),
            _ => *req,
        };
        self.ops.request(&signal);
        Ok(())
    }

    fn submit_nowait(&self, req: &Request, io: Io<'_>) -> Result<Pending> {
        let r = self.inner.submit_nowait(req, io)?;
        self.ops.request(req);
        Ok(r)
    }

    fn fence(&self) -> Result<()> {
        self.ops.fence();
        self.inner.fence()
    }

    fn quiet(&self) -> Result<()> {
        self.ops.quiet();
        self.inner.quiet()
    }

    fn progress(&self) -> Result<()> {
        self.inner.progress()
    }

    fn serves_while_idle(&self) -> bool {
        self.inner.serves_while_idle()
    }

    fn nbi_issued(&self, req: &Request) {
        self.inner.nbi_issued(req)
    }

    fn failed_peer(&self) -> Option<(usize, String)> {
        self.inner.failed_peer()
    }

    fn blocked(&self) -> Option<crate::blocked::Blocked> {
        self.inner.blocked()
    }

    fn shutdown(&self) {
        self.inner.shutdown()
    }

    fn serve_device_heap(
        &self,
        make: &dyn Fn() -> Result<Arc<dyn DeviceHeap>, GpuHeapError>,
    ) -> Result<(), GpuHeapError> {
        self.inner.serve_device_heap(make)
    }
}
