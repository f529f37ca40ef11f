//! Kernel modules and the one launch API for CPU and GPU PEs.
//!
//! A kernel crate embeds its PTX at build time ([`symmem_device::embedded_ptx!`]);
//! [`Runtime::load_module`](crate::Runtime::load_module) loads it on a GPU PE (and fills its `SYMMEM_DEVICE_STATE`) or,
//! on a CPU PE, stands for the crate's host functions. [`Runtime::launch`](crate::Runtime::launch) then runs a
//! `kernel!` with `cuLaunchKernel` on a GPU PE or on the CPU executor on a CPU PE, so one
//! program runs on either (`SYMMEM_DEVICE`).

use std::path::Path;
#[cfg(feature = "cuda")]
use std::sync::{Arc, Mutex};

use symmem_device::KernelInfo;

use crate::kernel_library::OpenedLibrary;

/// Kernels ready to launch on this PE: a PTX module loaded into the GPU context, or the
/// host functions of a kernel crate on a CPU PE.
#[derive(Debug)]
pub struct Module {
    pub(crate) name: String,
    /// The id of the runtime that loaded it (modules are refused by others).
    pub(crate) runtime: u64,
    pub(crate) kind: ModuleKind,
}

/// What runs a module's kernels.
#[derive(Debug)]
pub(crate) enum ModuleKind {
    /// A CPU PE runs the host functions `kernel!` generated.
    Host,
    #[cfg(feature = "cuda")]
    Cuda(crate::cuda::CudaModule),
}

impl Module {
    /// The kernel crate (or the name given to [`Runtime::load_ptx`](crate::Runtime::load_ptx)).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the kernels run on a GPU.
    pub fn on_gpu(&self) -> bool {
        !matches!(self.kind, ModuleKind::Host)
    }
}

/// A kernel library loaded at run time (a shared library exporting a kernel crate's
/// kernels with `symmem_device::export_kernels!`), its kernels ready on this PE: the PTX
/// it carries loaded on a GPU PE, its host entries on a CPU PE. Launch its kernels by
/// name with [`Runtime::launch_by_name`](crate::Runtime::launch_by_name).
#[derive(Debug)]
pub struct KernelLibrary {
    pub(crate) opened: OpenedLibrary,
    pub(crate) module: Module,
}

impl KernelLibrary {
    /// The kernel crate's name.
    pub fn name(&self) -> &str {
        self.module.name()
    }

    /// Where the library was loaded from.
    pub fn path(&self) -> &Path {
        &self.opened.path
    }

    /// Every exported kernel: name, parameter layout and launch bound.
    pub fn kernels(&self) -> Vec<KernelInfo> {
        self.opened
            .kernels()
            .iter()
            // SAFETY: the library's ABI was checked and it is never unloaded.
            .map(|k| unsafe { k.info() })
            .collect()
    }

    /// The exported kernel named `name`; an unknown name is an
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) listing the names there are.
    pub fn kernel(&self, name: &str) -> crate::Result<KernelInfo> {
        self.opened.kernel("kernel", name).map(|(_, info)| info)
    }

    /// Whether the kernels run on a GPU.
    pub fn on_gpu(&self) -> bool {
        self.module.on_gpu()
    }
}

/// The loaded helper module of a GPU PE, and the lock that serializes its AMO launches.
#[cfg(feature = "cuda")]
#[derive(Debug, Default)]
pub(crate) struct Helpers {
    /// The helper module, once loaded.
    pub(crate) module: Mutex<Option<Arc<Module>>>,
    /// Held while an AMO helper runs: they share one host-mapped result word.
    pub(crate) launch: Mutex<()>,
}
