//! Loading kernel modules and the one launch API for CPU and GPU PEs (see
//! [`Module`](crate::Module)).

use std::path::Path;

use symmem_device::library::{outcome, FailureText, KernelEntry, LibraryKernel};
use symmem_device::{Dim3, EmbeddedPtx, Kernel, KernelArgs, KernelInfo};

use crate::error::{Error, Result};
use crate::kernel_library::{argument_addresses, OpenedLibrary};
use crate::module::{KernelLibrary, Module, ModuleKind};
use crate::ops::stream::Stream;
use crate::runtime::Runtime;

/// Where a kernel runs: a `grid` of `block`s, each with `shared_bytes` of dynamic shared
/// memory (what the kernel reads with `symmem_device::dynamic_shared`; CUDA's
/// `sharedMemBytes`, at most [`MAX_SHARED_BYTES`](symmem_device::MAX_SHARED_BYTES)).
///
/// ```ignore
/// let config = LaunchConfig::new(4, 256).shared_bytes(256 * 4);
/// unsafe { rt.launch_with(&m, my_kernels::count::KERNEL, config, (out,))? };
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks of the grid.
    pub grid: Dim3,
    /// Threads of each block.
    pub block: Dim3,
    /// Bytes of dynamic shared memory per block.
    pub shared_bytes: u32,
}

impl LaunchConfig {
    /// A `grid` of `block`s with no dynamic shared memory.
    pub fn new(grid: impl Into<Dim3>, block: impl Into<Dim3>) -> Self {
        LaunchConfig {
            grid: grid.into(),
            block: block.into(),
            shared_bytes: 0,
        }
    }

    /// The same launch with `bytes` of dynamic shared memory per block.
    pub fn shared_bytes(self, bytes: u32) -> Self {
        LaunchConfig {
            shared_bytes: bytes,
            ..self
        }
    }
}

impl Runtime {
    /// Loads a kernel crate's embedded kernels on a GPU PE and writes this PE's device
    /// state into the module: the embedded cubin when it was built for this GPU's
    /// architecture (`SYMMEM_SASS_ARCH` at build time; no JIT), else the PTX
    /// (`cuModuleLoadDataEx`, with the JIT's log in the error). On a CPU PE the module
    /// stands for the crate's host functions and the PTX is not needed.
    pub fn load_module(&self, ptx: &EmbeddedPtx) -> Result<Module> {
        if self.device.is_none() {
            return Ok(self.host_module(ptx.crate_name));
        }
        if ptx.ptx.is_empty() {
            return Err(Error::Module {
                op: "load_module",
                pe: self.my_pe(),
                reason: format!("{}: {}", ptx.crate_name, ptx.missing),
            });
        }
        #[cfg(feature = "cuda")]
        if let Some(d) = &self.device {
            let m = crate::cuda::CudaModule::load_embedded(
                &d.gpu,
                ptx.crate_name,
                ptx,
                &self.device_state,
            )?;
            return Ok(Module {
                name: ptx.crate_name.to_string(),
                runtime: self.path.runtime_id(),
                kind: ModuleKind::Cuda(m),
            });
        }
        self.load_ptx(ptx.crate_name, ptx.ptx)
    }

    /// Loads PTX text as a module named `name` (see [`Self::load_module`]). On a CPU PE
    /// the text is not used: kernels run from their host functions.
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))] // ptx: GPU PEs only
    pub fn load_ptx(&self, name: &str, ptx: &str) -> Result<Module> {
        #[cfg(feature = "cuda")]
        if let Some(d) = &self.device {
            let m = crate::cuda::CudaModule::load(&d.gpu, name, ptx, &self.device_state)?;
            tracing::debug!(pe = self.my_pe(), module = name, "PTX module loaded");
            return Ok(Module {
                name: name.to_string(),
                runtime: self.path.runtime_id(),
                kind: ModuleKind::Cuda(m),
            });
        }
        Ok(self.host_module(name))
    }

    fn host_module(&self, name: &str) -> Module {
        Module {
            name: name.to_string(),
            runtime: self.path.runtime_id(),
            kind: ModuleKind::Host,
        }
    }

    /// Runs `kernel` from `module` on a `grid` of `block`s with `args`, and returns when
    /// every thread has finished: `cuLaunchKernel` on a GPU PE, the CPU executor on a CPU
    /// PE ([`Self::launch_closure`] describes what host execution assumes).
    ///
    /// ```ignore
    /// let m = rt.load_module(&my_kernels::PTX)?;
    /// unsafe { rt.launch(&m, my_kernels::ring::KERNEL, 1, 128, (dst, src, n, sig))? };
    /// ```
    ///
    /// # Safety
    /// As for a CUDA launch: pointer arguments must be valid for what the kernel does
    /// with them on this PE's kind of memory (device addresses on a GPU PE: symmetric
    /// addresses from [`Runtime::ptr`]), for every thread of the launch.
    pub unsafe fn launch<A: KernelArgs>(
        &self,
        module: &Module,
        kernel: Kernel<A>,
        grid: impl Into<Dim3>,
        block: impl Into<Dim3>,
        args: A,
    ) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe {
            self.launch_kernel(
                "launch",
                module,
                kernel,
                LaunchConfig::new(grid, block),
                args,
                false,
            )
        }
    }

    /// [`Self::launch`] with a [`LaunchConfig`]: what a kernel that uses dynamic shared
    /// memory is launched with. A `shared_bytes` over
    /// [`MAX_SHARED_BYTES`](symmem_device::MAX_SHARED_BYTES) is refused, naming the kernel
    /// and the size.
    ///
    /// # Safety
    /// As for [`Self::launch`].
    pub unsafe fn launch_with<A: KernelArgs>(
        &self,
        module: &Module,
        kernel: Kernel<A>,
        config: LaunchConfig,
        args: A,
    ) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.launch_kernel("launch_with", module, kernel, config, args, false) }
    }

    /// [`Self::launch_cooperative`] with a [`LaunchConfig`].
    ///
    /// # Safety
    /// As for [`Self::launch`].
    pub unsafe fn launch_cooperative_with<A: KernelArgs>(
        &self,
        module: &Module,
        kernel: Kernel<A>,
        config: LaunchConfig,
        args: A,
    ) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe {
            self.launch_kernel(
                "launch_cooperative_with",
                module,
                kernel,
                config,
                args,
                true,
            )
        }
    }

    /// Like [`Self::launch`], but every block is resident at once, so blocks may wait for
    /// each other (`cuLaunchCooperativeKernel`; NVSHMEM's `nvshmemx_collective_launch`).
    /// On a GPU PE the grid is first checked against the occupancy the GPU allows.
    ///
    /// # Safety
    /// As for [`Self::launch`].
    pub unsafe fn launch_cooperative<A: KernelArgs>(
        &self,
        module: &Module,
        kernel: Kernel<A>,
        grid: impl Into<Dim3>,
        block: impl Into<Dim3>,
        args: A,
    ) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe {
            self.launch_kernel(
                "launch_cooperative",
                module,
                kernel,
                LaunchConfig::new(grid, block),
                args,
                true,
            )
        }
    }

    /// Launches `kernel` as one block of `threads` threads on a GPU PE's `stream`, without
    /// waiting: what the stream-ordered operations do. Errors of the kernel itself surface
    /// when the stream is synchronized.
    ///
    /// # Safety
    /// As for [`Self::launch`].
    #[cfg(feature = "cuda")]
    pub(crate) unsafe fn launch_helper_on_stream<A: KernelArgs>(
        &self,
        op: &'static str,
        module: &Module,
        kernel: Kernel<A>,
        args: A,
        threads: u32,
        stream: cudarc::driver::sys::CUstream,
    ) -> Result<()> {
        let ModuleKind::Cuda(m) = &module.kind else {
            unreachable!("stream launches are made on GPU PEs with their helper module")
        };
        let mut ptrs: Vec<*mut std::ffi::c_void> = Vec::with_capacity(kernel.params().len());
        args.for_each(&mut |p, _| ptrs.push(p.cast_mut().cast()));
        let (one, block) = (Dim3::new(1, 1, 1), Dim3::new(threads, 1, 1));
        // SAFETY: `ptrs` point into `args`, which lives until the launch call returns (the
        // driver copies parameters at launch); the rest is forwarded from the caller.
        unsafe { m.launch(op, &kernel.info(), &mut ptrs, one, block, 0, false, stream) }
    }

    /// Like [`Self::launch`], on `stream`, without blocking the host: on a GPU PE the
    /// kernel is queued on the CUDA stream behind the work already there and the call
    /// returns at once (CUDA's `kernel<<<grid, block, 0, stream>>>`); a failure of the
    /// kernel itself surfaces at [`Stream::synchronize`](crate::Stream::synchronize). On a
    /// CPU PE it runs before the call returns, as every stream-ordered operation does
    /// there. The launch's checks (the module and stream are this runtime's, the block
    /// within the kernel's bound and CUDA's limits) fail the call itself.
    ///
    /// ```ignore
    /// let stream = rt.create_stream()?;
    /// unsafe { rt.launch_on_stream(&m, my_kernels::ring::KERNEL, 1, 128, (dst, src, n, sig), &stream)? };
    /// // … host work overlaps the kernel …
    /// stream.synchronize()?;
    /// ```
    ///
    /// # Safety
    /// As for [`Self::launch`]; on a GPU PE, pointer arguments must stay valid until the
    /// kernel has run.
    pub unsafe fn launch_on_stream<A: KernelArgs>(
        &self,
        module: &Module,
        kernel: Kernel<A>,
        grid: impl Into<Dim3>,
        block: impl Into<Dim3>,
        args: A,
        stream: &Stream,
    ) -> Result<()> {
        let op = "launch_on_stream";
        let (grid, block) = (grid.into(), block.into());
        // `cu_stream` checks the stream, as `check_stream` does in a build without CUDA.
        #[cfg(not(feature = "cuda"))]
        self.check_stream(op, stream)?;
        #[cfg(feature = "cuda")]
        if let (ModuleKind::Cuda(m), Some(raw)) = (&module.kind, self.cu_stream(op, stream)?) {
            let info = kernel.info();
            self.check_launch(op, module, &info, block)?;
            crate::executor::check_dims(op, grid, block)?;
            let mut ptrs: Vec<*mut std::ffi::c_void> = Vec::with_capacity(kernel.params().len());
            args.for_each(&mut |p, _| ptrs.push(p.cast_mut().cast()));
            tracing::debug!(
                pe = self.my_pe(),
                kernel = info.name,
                ?grid,
                ?block,
                "GPU launch on a stream"
            );
            // SAFETY: `ptrs` point into `args`, which lives until the launch call returns
            // (the driver copies parameters at launch); the rest is forwarded from the
            // caller.
            // No dynamic shared memory: a kernel that needs some is launched with
            // `launch_with`.
            return unsafe { m.launch(op, &info, &mut ptrs, grid, block, 0, false, raw) };
        }
        // SAFETY: forwarded from the caller.
        unsafe {
            self.launch_kernel(
                op,
                module,
                kernel,
                LaunchConfig::new(grid, block),
                args,
                false,
            )
        }
    }

    /// Loads the kernel library at `path` (a shared library exporting a kernel crate's
    /// kernels with `symmem_device::export_kernels!`): checks that it was built with this
    /// symmem and compiler, then readies its kernels on this PE, as
    /// [`Self::load_module`] does with a crate linked into the program. For programs that
    /// cannot link the kernel crate: Python's `symmem.load_module`, C.
    pub fn load_kernel_library(&self, path: impl AsRef<Path>) -> Result<KernelLibrary> {
        let opened = OpenedLibrary::open("load_kernel_library", self.my_pe(), path.as_ref())?;
        let module = self.load_module(&opened.embedded_ptx())?;
        tracing::debug!(
            pe = self.my_pe(),
            library = %opened.path.display(),
            kernels = opened.kernels().len(),
            on_gpu = module.on_gpu(),
            "kernel library loaded"
        );
        Ok(KernelLibrary { opened, module })
    }

    /// Runs the kernel named `kernel` of `library` on a `grid` of `block`s, as
    /// [`Self::launch`] does, with its arguments as bytes (`args[i]` the value of
    /// parameter `i`, as the kernel's Rust type lays it out), and returns when every
    /// thread has finished. The argument count and every argument's size are checked
    /// against the kernel's parameters.
    ///
    /// # Safety
    /// As for [`Self::launch`]: the bytes must be valid values of the parameters' types,
    /// and pointers among them valid for what the kernel does with them.
    pub unsafe fn launch_by_name(
        &self,
        library: &KernelLibrary,
        kernel: &str,
        grid: impl Into<Dim3>,
        block: impl Into<Dim3>,
        args: &[&[u8]],
    ) -> Result<()> {
        let op = "launch_by_name";
        let (grid, block) = (grid.into(), block.into());
        #[cfg_attr(not(feature = "cuda"), allow(unused_variables))] // `info`: GPU launches
        let (exported, info, addresses) = self.by_name(op, library, kernel, block, args)?;
        match &library.module.kind {
            ModuleKind::Host => {
                let entry = exported.entry;
                let addresses = addresses.as_ptr();
                // SAFETY: forwarded from the caller; every thread passes the same checked
                // argument addresses, which outlive the launch.
                unsafe {
                    self.run_closure(op, grid, block, 0, || run_library_thread(entry, addresses))
                }
            }
            #[cfg(feature = "cuda")]
            // SAFETY: forwarded from the caller; the addresses point into `args`.
            ModuleKind::Cuda(m) => unsafe {
                self.launch_on_gpu(
                    op,
                    m,
                    info,
                    addresses.iter().map(|&a| a.cast_mut().cast()).collect(),
                    LaunchConfig {
                        grid,
                        block,
                        shared_bytes: 0,
                    },
                    false,
                )
            },
        }
    }

    /// Like [`Self::launch_by_name`], on `stream`: on a GPU PE the kernel is queued on the
    /// CUDA stream behind the work already there and the call returns at once (a failure
    /// of the kernel surfaces when the stream is synchronized); on a CPU PE it runs
    /// before the call returns, as every stream-ordered operation does there.
    ///
    /// # Safety
    /// As for [`Self::launch_by_name`]; on a GPU PE, pointer arguments must stay valid
    /// until the kernel has run.
    pub unsafe fn launch_by_name_on_stream(
        &self,
        library: &KernelLibrary,
        kernel: &str,
        grid: impl Into<Dim3>,
        block: impl Into<Dim3>,
        args: &[&[u8]],
        stream: &Stream,
    ) -> Result<()> {
        let op = "launch_by_name_on_stream";
        // `cu_stream` checks the stream, as `check_stream` does in a build without CUDA.
        #[cfg(not(feature = "cuda"))]
        self.check_stream(op, stream)?;
        #[cfg(feature = "cuda")]
        if let (ModuleKind::Cuda(m), Some(raw)) =
            (&library.module.kind, self.cu_stream(op, stream)?)
        {
            let (grid, block) = (grid.into(), block.into());
            let (_, info, addresses) = self.by_name(op, library, kernel, block, args)?;
            crate::executor::check_dims(op, grid, block)?;
            let mut ptrs: Vec<*mut std::ffi::c_void> =
                addresses.iter().map(|&a| a.cast_mut().cast()).collect();
            // SAFETY: `ptrs` point into `args`, which outlive the call (the driver copies
            // parameters at launch); the rest is forwarded from the caller.
            return unsafe { m.launch(op, &info, &mut ptrs, grid, block, 0, false, raw) };
        }
        // SAFETY: forwarded from the caller.
        unsafe { self.launch_by_name(library, kernel, grid, block, args) }
    }

    /// The kernel named `kernel` of `library`, its descriptor and its arguments' addresses,
    /// once the launch's checks pass.
    fn by_name(
        &self,
        op: &'static str,
        library: &KernelLibrary,
        kernel: &str,
        block: Dim3,
        args: &[&[u8]],
    ) -> Result<(&'static LibraryKernel, KernelInfo, Vec<*const u8>)> {
        let (exported, info) = library.opened.kernel(op, kernel)?;
        let addresses = argument_addresses(op, &info, args)?;
        self.check_launch(op, &library.module, &info, block)?;
        Ok((exported, info, addresses))
    }

    /// The checks every launch makes first: `module` is this runtime's, and `block` is
    /// within the kernel's declared bound.
    fn check_launch(
        &self,
        op: &'static str,
        module: &Module,
        info: &KernelInfo,
        block: Dim3,
    ) -> Result<()> {
        if module.runtime != self.path.runtime_id() {
            return Err(Error::Module {
                op,
                pe: self.my_pe(),
                reason: format!(
                    "module {} was loaded by another runtime instance",
                    module.name
                ),
            });
        }
        // A kernel declared `max_threads(N)` was compiled for at most N threads per block
        // (its registers may not fit more); the CPU executor refuses what the GPU would.
        // A block no kernel may have (over 1024 threads, a zero extent) is left to the
        // launch's own shape check, which names it as such.
        let threads = u64::from(block.x) * u64::from(block.y) * u64::from(block.z);
        if threads > u64::from(info.max_threads)
            && threads <= u64::from(crate::executor::MAX_BLOCK_THREADS)
        {
            return Err(Error::InvalidArgument {
                op,
                reason: format!(
                    "kernel {} was declared max_threads({}); a block of {block:?} has {threads} threads",
                    info.name, info.max_threads
                ),
            });
        }
        Ok(())
    }

    /// The one launch behind the public forms: checks the launch, then runs `kernel` on
    /// the CPU executor (a CPU PE) or on the GPU.
    unsafe fn launch_kernel<A: KernelArgs>(
        &self,
        op: &'static str,
        module: &Module,
        kernel: Kernel<A>,
        config: LaunchConfig,
        args: A,
        cooperative: bool,
    ) -> Result<()> {
        let LaunchConfig {
            grid,
            block,
            shared_bytes,
        } = config;
        self.check_launch(op, module, &kernel.info(), block)?;
        crate::executor::check_shared(op, kernel.name(), shared_bytes)?;
        match &module.kind {
            ModuleKind::Host => {
                // SAFETY: forwarded from the caller; the kernel's host entry unpacks the
                // same argument tuple on every thread.
                let run = || unsafe { kernel.call_host(args) };
                // SAFETY: forwarded from the caller.
                unsafe {
                    if cooperative {
                        self.run_closure_cooperative(op, grid, block, shared_bytes, run)
                    } else {
                        self.run_closure(op, grid, block, shared_bytes, run)
                    }
                }
            }
            #[cfg(feature = "cuda")]
            ModuleKind::Cuda(m) => {
                let mut ptrs: Vec<*mut std::ffi::c_void> =
                    Vec::with_capacity(kernel.params().len());
                args.for_each(&mut |p, _| ptrs.push(p.cast_mut().cast()));
                // SAFETY: `ptrs` point into `args`, which outlives the call; the rest is
                // forwarded from the caller.
                unsafe { self.launch_on_gpu(op, m, kernel.info(), ptrs, config, cooperative) }
            }
        }
    }

    /// Launches `info` of the loaded PTX module `m` on this PE's GPU with the argument
    /// addresses `ptrs` and waits for it, watching the peers while it runs.
    ///
    /// # Safety
    /// As for [`Self::launch`]; `ptrs` point at values of the kernel's parameters, live
    /// until the call returns.
    #[cfg(feature = "cuda")]
    unsafe fn launch_on_gpu(
        &self,
        op: &'static str,
        m: &crate::cuda::CudaModule,
        info: KernelInfo,
        mut ptrs: Vec<*mut std::ffi::c_void>,
        config: LaunchConfig,
        cooperative: bool,
    ) -> Result<()> {
        let LaunchConfig {
            grid,
            block,
            shared_bytes,
        } = config;
        crate::executor::check_dims(op, grid, block)?;
        tracing::debug!(
            pe = self.my_pe(),
            kernel = info.name,
            ?grid,
            ?block,
            shared_bytes,
            cooperative,
            "GPU launch"
        );
        let device = self
            .device
            .as_ref()
            .expect("a CUDA module implies a GPU PE");
        // SAFETY: forwarded from the caller.
        let launched = unsafe {
            m.launch(
                op,
                &info,
                &mut ptrs,
                grid,
                block,
                shared_bytes,
                cooperative,
                std::ptr::null_mut(),
            )
        };
        // While it runs, a peer that dies fails the kernel's device waits (through
        // the failed-peer word) and this launch with an error naming it.
        let (result, peer_failure) = match launched {
            Err(e) => (Err(e), None),
            Ok(()) => crate::cuda::wait_for_kernel(
                || {
                    device.gpu.legacy_stream_ended(|| {
                        format!("kernel {} of module {}", info.name, m.name())
                    })
                },
                || self.check_health(op).err(),
                |e| {
                    device.flag_peer_failed(match e {
                        Error::PeerFailed { pe, .. } => Some(*pe),
                        _ => None,
                    })
                },
            ),
        };
        tracing::debug!(
            pe = self.my_pe(),
            kernel = info.name,
            ok = result.is_ok(),
            "GPU kernel finished"
        );
        let record = device.take_error();
        self.kernel_outcome(op, info.name, result, peer_failure, record)
    }

    /// What a GPU launch of `kernel` ended with: its launch and wait `result`, the failure
    /// of a peer seen while it ran, and the error the kernel recorded in its device word.
    /// A peer's failure is the root cause when the kernel failed; a kernel's own error
    /// names what the device reported and any failure of the proxy channel.
    #[cfg(feature = "cuda")]
    fn kernel_outcome(
        &self,
        op: &'static str,
        kernel: &str,
        result: Result<()>,
        peer_failure: Option<Error>,
        record: Option<symmem_device::state::ErrorRecord>,
    ) -> Result<()> {
        // A kernel that ended well did not wait for the failed peer: the failure
        // surfaces at this PE's next wait instead.
        if let Some(failure) = peer_failure.filter(|_| result.is_err() || record.is_some()) {
            return Err(match (failure, record) {
                (Error::PeerFailed { pe, me, op, reason }, Some(w)) => Error::PeerFailed {
                    pe,
                    me,
                    op,
                    reason: format!(
                        "{reason}; kernel {}: {}",
                        kernel,
                        crate::cuda::describe_error(&w, &self.device_state)
                    ),
                },
                (failure, _) => failure,
            });
        }
        // A panic is reported as on the CPU executor: the block, thread and location.
        if let Some(panic) = record.as_ref().and_then(crate::cuda::panic_error) {
            return Err(panic);
        }
        match (result, record) {
            (Ok(()), None) => Ok(()),
            (Ok(()), Some(w)) | (Err(_), Some(w)) => Err(Error::Module {
                op,
                pe: self.my_pe(),
                reason: format!(
                    "kernel {} failed: {}{}",
                    kernel,
                    crate::cuda::describe_error(&w, &self.device_state),
                    // A failed proxy channel holds the transport's error, naming
                    // PE, op and size.
                    match self.proxy.as_ref().and_then(|p| p.failure()) {
                        Some(why) => format!(": {why}"),
                        None => String::new(),
                    }
                ),
            }),
            (Err(Error::Cuda { call, pe, name, code, detail }), None)
                if name == "CUDA_ERROR_LAUNCH_FAILED" =>
            {
                Err(Error::Cuda {
                    call,
                    pe,
                    name,
                    code,
                    detail: format!("{detail}; the kernel reported no error of its own: a GPU fault stopped it (under MPS, a fault in another process's kernel on this GPU stops every client's kernels)"),
                })
            }
            (Err(e), None) => Err(e),
        }
    }
}

/// One kernel thread of a library kernel on the CPU executor: calls its host entry, which
/// catches the kernel's own panics, and turns what it reports into this runtime's unwind
/// (so the executor fails the launch with the kernel's message, or stops the thread).
///
/// # Safety
/// `addresses` holds the kernel's checked argument addresses; run only by the executor.
unsafe fn run_library_thread(entry: KernelEntry, addresses: *const *const u8) {
    let mut text = [0u8; 2048];
    let mut failure = FailureText {
        buf: text.as_mut_ptr(),
        cap: text.len(),
        len: 0,
    };
    // SAFETY: forwarded from the caller; `failure` lends a live buffer.
    match unsafe { entry(addresses, &mut failure) } {
        outcome::FINISHED => {}
        outcome::STOPPED => {
            std::panic::resume_unwind(Box::new(symmem_device::host::Stopped));
        }
        code => {
            let message = match code {
                outcome::FAILED => String::from_utf8_lossy(&text[..failure.len]).into_owned(),
                other => format!("the kernel library's entry returned an unknown outcome {other}"),
            };
            // The library's panic hook already printed the panic: unwind without a second.
            std::panic::resume_unwind(Box::new(message));
        }
    }
}
