//! A GPU heap as the target of the socket transport: peers' puts and gets become copies,
//! their AMOs and signals launches of the runtime's helper kernels (one thread each, the
//! same kernels the host API uses on GPU heaps).
//!
//! It runs on the transport's threads, beside the PE's own use of the GPU, so it owns its
//! resources: a peer table and error/result words ([`DeviceResources`]), its own copy of
//! the helper module, and a non-blocking stream ([`CopyStream`]). Copies and launches go
//! to that stream and are waited for, so each request is complete, in order, before the
//! next one of that peer is read: a put_signal's signal kernel runs after its data copy
//! has landed. Not the legacy default stream: this PE's own kernels run there, and a
//! kernel waiting for a peer's signal would hold back the very copy and launch that
//! deliver it.

use std::ffi::c_void;
use std::sync::{Arc, Mutex};

use symmem_device::{AmoKind, DeviceState, Dim3, Kernel, KernelArgs, SignalOp};
use symmem_runtime_kernels as helpers;

use super::{CopyStream, CudaModule, DeviceResources, Gpu};
use crate::error::Result;
use symmem_transport::{DeviceHeap, GpuHeapError};

/// This PE's GPU heap, as peers' requests reach it.
pub(crate) struct GpuTarget {
    /// Device address of the heap (heap offset 0).
    base: u64,
    module: CudaModule,
    /// Its own peer table and error/result words; the module's `DeviceState` points at
    /// them.
    resources: DeviceResources,
    /// One helper launch at a time: they share the result word.
    launch: Mutex<()>,
    /// Where copies and launches go.
    stream: CopyStream,
}

impl GpuTarget {
    /// Loads the helper kernels for the heap that `state` describes (its `peer_bases` and
    /// `error` are replaced by this target's own).
    pub(crate) fn new(gpu: &Arc<Gpu>, peer_bases: &[u64], mut state: DeviceState) -> Result<Self> {
        let resources = DeviceResources::new(gpu, peer_bases)?;
        state.peer_bases = resources.peer_table();
        state.error = resources.error_word();
        if helpers::PTX.ptx.is_empty() {
            return Err(crate::error::Error::Module {
                op: "init",
                pe: gpu.pe,
                reason: format!(
                    "the socket transport serves this GPU heap with the runtime's helper kernels, but {}: {}",
                    helpers::PTX.crate_name,
                    helpers::PTX.missing
                ),
            });
        }
        let module = CudaModule::load_embedded(gpu, "symmem-remote-target", &helpers::PTX, &state)?;
        Ok(GpuTarget {
            base: state.heap_base,
            module,
            resources,
            launch: Mutex::new(()),
            stream: CopyStream::new(gpu, "requests of remote peers")?,
        })
    }

    /// Runs one helper kernel on one thread and waits for it; the error names the
    /// request and what the device reported.
    fn run<A: KernelArgs>(&self, what: &str, kernel: Kernel<A>, args: A) -> Result<(), String> {
        let mut ptrs: Vec<*mut c_void> = Vec::with_capacity(kernel.params().len());
        args.for_each(&mut |p, _| ptrs.push(p.cast_mut().cast()));
        let one = Dim3::new(1, 1, 1);
        // SAFETY: `ptrs` point into `args`, alive until the launch returns (the driver
        // copies parameters at launch); the kernels touch only the checked heap word they
        // are given and this target's result word.
        let launched = unsafe {
            self.module.launch(
                "remote request",
                &kernel.info(),
                &mut ptrs,
                one,
                one,
                0,
                false,
                self.stream.raw(),
            )
        }
        .and_then(|()| self.stream.synchronize("remote request"));
        if let Some(rec) = self.resources.take_error() {
            return Err(format!(
                "{what}: the helper kernel reported {}",
                super::describe_error_word(rec.word)
            ));
        }
        launched.map_err(|e| format!("{what}: {e}"))
    }
}

impl DeviceHeap for GpuTarget {
    fn write(&self, off: u64, src: &[u8]) -> Result<(), GpuHeapError> {
        // SAFETY: `off..off+len` was checked to lie in the heap, mapped in this context.
        unsafe {
            self.stream
                .copy_to_device("remote put", self.base + off, src.as_ptr(), src.len())
        }
        .map_err(GpuHeapError::from)
    }

    fn read(&self, off: u64, dst: &mut [u8]) -> Result<(), GpuHeapError> {
        // SAFETY: as in `write`; `dst` is a buffer of exactly the copied length.
        unsafe {
            self.stream
                .copy_from_device("remote get", dst.as_mut_ptr(), self.base + off, dst.len())
        }
        .map_err(GpuHeapError::from)
    }

    fn amo(
        &self,
        off: u64,
        width: u8,
        kind: AmoKind,
        value: u64,
        compare: u64,
    ) -> Result<u64, GpuHeapError> {
        let _one_at_a_time = self.launch.lock().unwrap_or_else(|p| p.into_inner());
        let me = self.resources.gpu.pe as u32;
        self.run(
            "remote AMO",
            helpers::host_amo::KERNEL,
            (
                (self.base + off) as *mut u64,
                me,
                width as u32,
                kind as u32,
                value,
                compare,
                self.resources.result_word() as *mut u64,
            ),
        )?;
        Ok(self.resources.take_result())
    }

    fn signal(&self, off: u64, op: SignalOp, value: u64) -> Result<(), GpuHeapError> {
        let me = self.resources.gpu.pe as u32;
        Ok(self.run(
            "remote signal",
            helpers::host_signal::KERNEL,
            ((self.base + off) as *mut u64, value, op as u32, me),
        )?)
    }
}
