//! Host operations on GPU heaps that a copy cannot do: atomics and signals run in the
//! runtime's own helper kernels (`symmem-runtime-kernels`, one thread, system-scope
//! atomics through the device API), and waits poll the word with small device-to-host
//! copies under the shared backoff.
//!
//! The helper module is loaded on first use. AMO launches of one PE are serialized: they
//! share one host-mapped result word.

use std::sync::Arc;

use symmem_device::{AmoKind, Kernel, KernelArgs, SignalOp};
use symmem_runtime_kernels as helpers;

use crate::error::{Error, Result};
use crate::module::Module;
use crate::runtime::Runtime;

impl Runtime {
    /// The helper module, loaded on first use.
    pub(crate) fn helper_module(&self, op: &'static str) -> Result<Arc<Module>> {
        let mut slot = self
            .helpers
            .module
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(m) = &*slot {
            return Ok(m.clone());
        }
        let m = Arc::new(
            self.load_module(&helpers::PTX)
                .map_err(|e| Error::Unsupported {
                    op,
                    pe: self.my_pe(),
                    reason: format!("the runtime's GPU helper kernels cannot be loaded: {e}"),
                })?,
        );
        *slot = Some(m.clone());
        Ok(m)
    }

    /// Launches one helper kernel on one thread and waits for it.
    fn run_helper<A: KernelArgs>(
        &self,
        op: &'static str,
        kernel: Kernel<A>,
        args: A,
    ) -> Result<()> {
        let module = self.helper_module(op)?;
        // SAFETY: the helper kernels only touch the symmetric addresses and the
        // host-mapped result word they are given, which the callers derive from checked
        // references and this PE's device resources.
        unsafe { self.launch(&module, kernel, 1, 1, args) }
    }

    /// One atomic of `kind` on the `size`-byte word at symmetric address `sym` on `pe`,
    /// with a request's operands (`compare`: what a compare-and-swap expects to find);
    /// the old value's bits.
    #[allow(clippy::too_many_arguments)] // the encoded AMO: address, PE, width, kind, operands
    pub(crate) fn gpu_amo(
        &self,
        op: &'static str,
        sym: u64,
        pe: usize,
        size: usize,
        kind: AmoKind,
        value: u64,
        compare: u64,
    ) -> Result<u64> {
        let device = self.device_resources(op)?;
        let _one_at_a_time = self
            .helpers
            .launch
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        self.run_helper(
            op,
            helpers::host_amo::KERNEL,
            (
                sym as *mut u64,
                pe as u32,
                size as u32,
                kind as u32,
                value,
                compare,
                device.result_word() as *mut u64,
            ),
        )?;
        Ok(device.take_result())
    }

    /// Updates the signal at symmetric address `sym` on `pe`, after everything this GPU
    /// did before (the data of a put_signal) is visible.
    pub(crate) fn gpu_signal(
        &self,
        op: &'static str,
        sym: u64,
        pe: usize,
        signal: u64,
        how: SignalOp,
    ) -> Result<()> {
        self.run_helper(
            op,
            helpers::host_signal::KERNEL,
            (sym as *mut u64, signal, how as u32, pe as u32),
        )
    }
}
