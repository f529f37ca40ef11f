//! Kernel libraries loaded at run time: shared libraries that export a kernel crate's
//! kernels with `symmem_device::export_kernels!` (see [`symmem_device::library`]), for
//! programs that did not link the crate, such as Python's `symmem.load_module`.
//!
//! This module opens the library, checks its ABI against this build's, and checks a
//! launch's arguments against the kernel's parameter layout; [`Runtime::load_kernel_library`](crate::Runtime::load_kernel_library)
//! and [`Runtime::launch_by_name`](crate::Runtime::launch_by_name) load and run it. A
//! library stays loaded until the process exits: its code may be on a kernel thread's
//! stack, and its device-crate copy reads contexts from this one.

use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};

use symmem_device::library::{self as abi, LibraryAbi, LibraryKernel, LIBRARY_SYMBOL};
use symmem_device::{EmbeddedPtx, KernelInfo};

use crate::error::{Error, Result};

/// An opened kernel library: its path and its table.
#[derive(Debug)]
pub(crate) struct OpenedLibrary {
    /// Where it was loaded from.
    pub(crate) path: PathBuf,
    /// Its table, valid for the rest of the process (never unloaded).
    table: &'static abi::KernelLibrary,
}

impl OpenedLibrary {
    /// Opens the library at `path` (`dlopen`), finds its table and checks its ABI;
    /// errors name the path, what is missing or what differs.
    pub(crate) fn open(op: &'static str, pe: usize, path: &Path) -> Result<Self> {
        let fail = |reason: String| Error::Module {
            op,
            pe,
            reason: format!("kernel library {}: {reason}", path.display()),
        };
        let cpath = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| fail("the path contains a NUL byte".into()))?;
        // SAFETY: a NUL-terminated path; loading runs the library's initializers, which a
        // Rust cdylib keeps to the standard library's own.
        let handle = unsafe { libc::dlopen(cpath.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(fail(dl_error()));
        }
        let symbol = CString::new(LIBRARY_SYMBOL).expect("no NUL in the symbol name");
        // SAFETY: a live handle and a NUL-terminated name.
        let table_fn = unsafe { libc::dlsym(handle, symbol.as_ptr()) };
        if table_fn.is_null() {
            return Err(fail(format!(
                "it exports no {LIBRARY_SYMBOL} (build the kernel crate's library with crate-type = [\"cdylib\"] and symmem_device::export_kernels!)"
            )));
        }
        // SAFETY: the symbol `export_kernels!` defines has this signature.
        let table_fn: extern "C" fn() -> *const abi::KernelLibrary =
            unsafe { std::mem::transmute::<*mut libc::c_void, _>(table_fn) };
        let table = table_fn();
        // SAFETY: the table is a static of the library, which is never unloaded; its
        // first field has the same C layout in every version, and is checked before the
        // rest is read.
        let table: &'static abi::KernelLibrary = unsafe { &*table };
        let theirs: &LibraryAbi = &table.abi;
        if theirs.magic != abi::LIBRARY_MAGIC {
            return Err(fail(format!(
                "its {LIBRARY_SYMBOL} table does not start with the kernel-library magic"
            )));
        }
        // SAFETY: the magic matched: its strings are the library's statics.
        if !unsafe { theirs.matches_this() } {
            return Err(fail(format!(
                // SAFETY: as above.
                "it was built against {}, but this runtime against {}; rebuild it with the same symmem and compiler",
                unsafe { theirs.describe() },
                unsafe { LibraryAbi::this().describe() }
            )));
        }
        // SAFETY: the ABI matched, so the library's device-crate copy takes this copy's
        // contexts; from now on its kernels read the executor's per-thread context.
        unsafe { (table.set_context_source)(abi::LOADER_CONTEXT_SOURCE) };
        Ok(OpenedLibrary {
            path: path.to_path_buf(),
            table,
        })
    }

    /// The embedded PTX (what a GPU PE loads).
    pub(crate) fn embedded_ptx(&self) -> EmbeddedPtx {
        // SAFETY: the ABI matched and the library is never unloaded.
        unsafe { self.table.embedded_ptx() }
    }

    /// The exported kernels.
    pub(crate) fn kernels(&self) -> &'static [LibraryKernel] {
        // SAFETY: as in `embedded_ptx`.
        unsafe { self.table.kernels() }
    }

    /// The exported kernel named `name`, with its descriptor; an unknown name is an
    /// invalid argument that lists the names there are.
    pub(crate) fn kernel(
        &self,
        op: &'static str,
        name: &str,
    ) -> Result<(&'static LibraryKernel, KernelInfo)> {
        let found = self.kernels().iter().find_map(|k| {
            // SAFETY: as in `embedded_ptx`.
            let info = unsafe { k.info() };
            (info.name == name).then_some((k, info))
        });
        found.ok_or_else(|| Error::InvalidArgument {
            op,
            reason: format!(
                "kernel library {} has no kernel {name:?}; it has {}",
                self.path.display(),
                self.kernels()
                    .iter()
                    // SAFETY: as in `embedded_ptx`.
                    .map(|k| unsafe { k.info() }.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
    }
}

/// Checks `args` (each argument's bytes) against `info`'s parameters, and returns their
/// addresses in the `void **` form launches take. Errors name the kernel, the argument
/// and both sizes.
pub(crate) fn argument_addresses(
    op: &'static str,
    info: &KernelInfo,
    args: &[&[u8]],
) -> Result<Vec<*const u8>> {
    if args.len() != info.params.len() {
        return Err(Error::InvalidArgument {
            op,
            reason: format!(
                "kernel {} takes {} arguments ({}); {} given",
                info.name,
                info.params.len(),
                info.param_list(),
                args.len()
            ),
        });
    }
    for (i, (arg, param)) in args.iter().zip(info.params).enumerate() {
        if arg.len() != param.size {
            return Err(Error::InvalidArgument {
                op,
                reason: format!(
                    "argument {i} of kernel {} is {} bytes; the kernel's parameter {i} has {} ({})",
                    info.name,
                    arg.len(),
                    param.size,
                    info.param_list()
                ),
            });
        }
    }
    Ok(args.iter().map(|a| a.as_ptr()).collect())
}

/// `dlerror()`'s text, or a generic one.
fn dl_error() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated string valid until the next dl call
    // on this thread, which is after the copy.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "dlopen failed".into()
    } else {
        // SAFETY: non-null, NUL-terminated (above).
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}
