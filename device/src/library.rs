//! Kernel libraries: a kernel crate's kernels exported from a shared library
//! (`crate-type = ["cdylib"]`) with [`export_kernels!`](crate::export_kernels), so that a
//! program that did not link the crate (Python's `symmem.load_module`, a C program) runs
//! them: on the CPU executor through their host entries, and on GPU PEs from the PTX the
//! library carries.
//!
//! The loader finds one `#[repr(C)]` [`KernelLibrary`] through the symbol
//! [`LIBRARY_SYMBOL`]. The library links a copy of this crate of its own, so the two
//! copies must agree on the types they share (the [`ThreadContext`] and the executor
//! behind it): its first field, a [`LibraryAbi`], names the device-crate
//! version, the compiler and those types' sizes, and the loader refuses a library whose
//! ABI differs from its own. Once loaded, the library's copy reads each kernel thread's
//! context from the loader's copy ([`set_context_source`](crate::host::set_context_source)).
//! A panic in a kernel (a failed device operation, an assert) is caught at the entry, in
//! the library's own runtime, and reported as text: no unwind crosses the boundary.

extern crate std;

use std::string::String;

use crate::arch::{installed_context, ContextSource, Stopped, ThreadContext};
use crate::kernel::{EmbeddedPtx, Kernel, KernelArgs, KernelInfo, Param};
use crate::state::DeviceState;

/// The symbol of a kernel library's table: `extern "C" fn() -> *const KernelLibrary`.
pub const LIBRARY_SYMBOL: &str = "symmem_kernel_library";

/// The first word of every [`LibraryAbi`]: "SYMMKLB1".
pub const LIBRARY_MAGIC: u64 = u64::from_le_bytes(*b"SYMMKLB1");

/// The revision of what a library and its loader share beyond the sizes [`LibraryAbi`]
/// records: bump it when the [`Executor`](crate::host::Executor) trait, the meaning of a
/// field or the [`outcome`] codes change.
pub const LIBRARY_REVISION: u32 = 2;

/// A `'static` string or byte string, as the C layout carries it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RawBytes {
    /// First byte.
    pub ptr: *const u8,
    /// Bytes.
    pub len: usize,
}

impl RawBytes {
    /// The bytes of `s`.
    pub const fn of(s: &'static [u8]) -> Self {
        RawBytes {
            ptr: s.as_ptr(),
            len: s.len(),
        }
    }

    /// The bytes.
    ///
    /// # Safety
    /// `self` must describe bytes that stay valid for the rest of the process (a loaded
    /// library is never unloaded).
    pub unsafe fn bytes(&self) -> &'static [u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: forwarded from the caller.
        unsafe { core::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The bytes as text (lossy where they are not UTF-8).
    ///
    /// # Safety
    /// As for [`bytes`](Self::bytes).
    pub unsafe fn text(&self) -> &'static str {
        // SAFETY: forwarded from the caller.
        let bytes = unsafe { self.bytes() };
        core::str::from_utf8(bytes).unwrap_or("<not UTF-8>")
    }
}

/// What a kernel library and its loader must share: checked before anything else of the
/// table is read.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct LibraryAbi {
    /// [`LIBRARY_MAGIC`].
    pub magic: u64,
    /// The `symmem-device` version the library was built with.
    pub device_version: RawBytes,
    /// `rustc -V` of the compiler that built it.
    pub rustc: RawBytes,
    /// `size_of::<DeviceState>()`.
    pub state_size: usize,
    /// `size_of::<ThreadContext>()`.
    pub context_size: usize,
    /// `size_of` of [`KernelLibrary`] and [`LibraryKernel`]: the table's own layout.
    pub table_sizes: [usize; 2],
    /// [`LIBRARY_REVISION`].
    pub revision: u32,
}

impl LibraryAbi {
    /// This build's ABI.
    pub const fn this() -> Self {
        LibraryAbi {
            magic: LIBRARY_MAGIC,
            device_version: RawBytes::of(env!("CARGO_PKG_VERSION").as_bytes()),
            rustc: RawBytes::of(env!("SYMMEM_DEVICE_RUSTC").as_bytes()),
            state_size: core::mem::size_of::<DeviceState>(),
            context_size: core::mem::size_of::<ThreadContext<'static>>(),
            table_sizes: [
                core::mem::size_of::<KernelLibrary>(),
                core::mem::size_of::<LibraryKernel>(),
            ],
            revision: LIBRARY_REVISION,
        }
    }

    /// Whether a library of ABI `self` can run under this build's executor.
    ///
    /// # Safety
    /// `self`'s strings must be valid (see [`RawBytes::bytes`]).
    pub unsafe fn matches_this(&self) -> bool {
        let this = Self::this();
        // SAFETY: forwarded from the caller; `this` points at this crate's constants.
        unsafe {
            self.magic == this.magic
                && self.device_version.bytes() == this.device_version.bytes()
                && self.rustc.bytes() == this.rustc.bytes()
                && self.state_size == this.state_size
                && self.context_size == this.context_size
                && self.table_sizes == this.table_sizes
                && self.revision == this.revision
        }
    }

    /// "symmem-device 0.1.0, rustc 1.xx (…), DeviceState 512 B, ThreadContext 80 B, table
    /// 152/64 B, revision 2".
    ///
    /// # Safety
    /// As for [`matches_this`](Self::matches_this).
    pub unsafe fn describe(&self) -> String {
        // SAFETY: forwarded from the caller.
        unsafe {
            std::format!(
                "symmem-device {}, {}, DeviceState {} B, ThreadContext {} B, table {}/{} B, revision {}",
                self.device_version.text(),
                self.rustc.text(),
                self.state_size,
                self.context_size,
                self.table_sizes[0],
                self.table_sizes[1],
                self.revision
            )
        }
    }
}

/// How a kernel's host entry ended (its return value).
pub mod outcome {
    /// Every statement ran.
    pub const FINISHED: u32 = 0;
    /// Stopped because another thread of the launch failed: not a failure of its own.
    pub const STOPPED: u32 = 1;
    /// Failed (panicked); the entry wrote why into its [`FailureText`](super::FailureText).
    pub const FAILED: u32 = 2;
}

/// A buffer the loader lends an entry for the text of a failure; the entry truncates what
/// does not fit (on a UTF-8 boundary).
#[repr(C)]
#[derive(Debug)]
pub struct FailureText {
    /// The loader's buffer.
    pub buf: *mut u8,
    /// Its size in bytes.
    pub cap: usize,
    /// Bytes written.
    pub len: usize,
}

impl FailureText {
    /// Writes `text`, truncated to fit.
    ///
    /// # Safety
    /// `buf` must be writable for `cap` bytes.
    unsafe fn write(&mut self, text: &str) {
        let mut len = text.len().min(self.cap);
        while !text.is_char_boundary(len) {
            len -= 1;
        }
        // SAFETY: `len <= cap` bytes into the caller's buffer, from `text`.
        unsafe { core::ptr::copy_nonoverlapping(text.as_ptr(), self.buf, len) };
        self.len = len;
    }
}

/// A kernel's host entry in a library: runs one kernel thread with the arguments at
/// `args[0..n_params]` and returns an [`outcome`].
pub type KernelEntry =
    unsafe extern "C" fn(args: *const *const u8, failure: *mut FailureText) -> u32;

/// One exported kernel.
#[repr(C)]
#[derive(Debug)]
pub struct LibraryKernel {
    /// The PTX entry's name.
    pub name: RawBytes,
    /// The parameters, in order.
    pub params: *const Param,
    /// How many.
    pub n_params: usize,
    /// The parameters' Rust types ([`KernelInfo::param_types`]): string slices, in the
    /// Rust layout the ABI check vouches for.
    pub param_types: *const &'static str,
    /// How many (`n_params`, or 0 where unknown).
    pub n_param_types: usize,
    /// Its declared `max_threads`.
    pub max_threads: u32,
    /// The host entry.
    pub entry: KernelEntry,
}

// SAFETY: it only points at `'static`, immutable data.
unsafe impl Sync for LibraryKernel {}

impl LibraryKernel {
    /// The row of `info`, run by `entry`; used by [`export_kernels!`](crate::export_kernels).
    pub const fn new(info: KernelInfo, entry: KernelEntry) -> Self {
        LibraryKernel {
            name: RawBytes::of(info.name.as_bytes()),
            params: info.params.as_ptr(),
            n_params: info.params.len(),
            param_types: info.param_types.as_ptr(),
            n_param_types: info.param_types.len(),
            max_threads: info.max_threads,
            entry,
        }
    }

    /// Name, parameters and bound, as a kernel descriptor has them.
    ///
    /// # Safety
    /// The library must stay loaded for the rest of the process.
    pub unsafe fn info(&self) -> KernelInfo {
        KernelInfo {
            // SAFETY: forwarded from the caller.
            name: unsafe { self.name.text() },
            params: if self.n_params == 0 {
                &[]
            } else {
                // SAFETY: `new` stored a `'static` slice's pointer and length.
                unsafe { core::slice::from_raw_parts(self.params, self.n_params) }
            },
            param_types: if self.n_param_types == 0 {
                &[]
            } else {
                // SAFETY: `new` stored a `'static` slice's pointer and length.
                unsafe { core::slice::from_raw_parts(self.param_types, self.n_param_types) }
            },
            max_threads: self.max_threads,
        }
    }
}

/// The table a kernel library exports under [`LIBRARY_SYMBOL`].
#[repr(C)]
#[derive(Debug)]
pub struct KernelLibrary {
    /// Checked first.
    pub abi: LibraryAbi,
    /// The kernel crate's package name.
    pub crate_name: RawBytes,
    /// [`EmbeddedPtx::arch`].
    pub arch: RawBytes,
    /// [`EmbeddedPtx::ptx`]: empty when it could not be built.
    pub ptx: RawBytes,
    /// [`EmbeddedPtx::missing`].
    pub missing: RawBytes,
    /// [`EmbeddedPtx::sass_arch`].
    pub sass_arch: RawBytes,
    /// [`EmbeddedPtx::sass`].
    pub sass: RawBytes,
    /// The kernels.
    pub kernels: *const LibraryKernel,
    /// How many.
    pub n_kernels: usize,
    /// Makes the library's copy of the device crate read contexts from the loader's.
    pub set_context_source: unsafe extern "C" fn(ContextSource),
}

// SAFETY: it only points at `'static`, immutable data and a function.
unsafe impl Sync for KernelLibrary {}

impl KernelLibrary {
    /// The table of a crate whose build embedded `ptx` and which exports `kernels`; used
    /// by [`export_kernels!`](crate::export_kernels).
    pub const fn new(ptx: &'static EmbeddedPtx, kernels: &'static [LibraryKernel]) -> Self {
        KernelLibrary {
            abi: LibraryAbi::this(),
            crate_name: RawBytes::of(ptx.crate_name.as_bytes()),
            arch: RawBytes::of(ptx.arch.as_bytes()),
            ptx: RawBytes::of(ptx.ptx.as_bytes()),
            missing: RawBytes::of(ptx.missing.as_bytes()),
            sass_arch: RawBytes::of(ptx.sass_arch.as_bytes()),
            sass: RawBytes::of(ptx.sass),
            kernels: kernels.as_ptr(),
            n_kernels: kernels.len(),
            set_context_source: install_context_source,
        }
    }

    /// The embedded PTX, as [`embedded_ptx!`](crate::embedded_ptx) gave it.
    ///
    /// # Safety
    /// The library must stay loaded for the rest of the process, and its ABI match.
    pub unsafe fn embedded_ptx(&self) -> EmbeddedPtx {
        // SAFETY: forwarded from the caller.
        unsafe {
            EmbeddedPtx {
                crate_name: self.crate_name.text(),
                arch: self.arch.text(),
                ptx: self.ptx.text(),
                missing: self.missing.text(),
                sass_arch: self.sass_arch.text(),
                sass: self.sass.bytes(),
            }
        }
    }

    /// The kernels.
    ///
    /// # Safety
    /// As for [`embedded_ptx`](Self::embedded_ptx).
    pub unsafe fn kernels(&self) -> &'static [LibraryKernel] {
        if self.n_kernels == 0 {
            return &[];
        }
        // SAFETY: `new` stored a `'static` slice's pointer and length.
        unsafe { core::slice::from_raw_parts(self.kernels, self.n_kernels) }
    }
}

/// What a loader hands [`KernelLibrary::set_context_source`]: its own
/// [`installed_context`].
pub const LOADER_CONTEXT_SOURCE: ContextSource = installed_context;

unsafe extern "C" fn install_context_source(source: ContextSource) {
    // SAFETY: the loader checked the ABI before handing its source over.
    unsafe { crate::arch::set_context_source(source) }
}

/// Runs one kernel thread of `kernel` with the arguments at `args`, catching its panic
/// here, in this copy's runtime; the body of every entry [`export_kernels!`](crate::export_kernels)
/// defines.
///
/// # Safety
/// As for [`Kernel::call_host`] and [`KernelArgs::from_ptrs`]; `failure` is valid.
pub unsafe fn run_exported<A: KernelArgs>(
    kernel: Kernel<A>,
    args: *const *const u8,
    failure: *mut FailureText,
) -> u32 {
    let run = std::panic::catch_unwind(core::panic::AssertUnwindSafe(|| {
        // SAFETY: forwarded from the caller.
        unsafe { kernel.call_host(A::from_ptrs(args)) }
    }));
    match run {
        Ok(()) => outcome::FINISHED,
        Err(payload) if payload.is::<Stopped>() => outcome::STOPPED,
        Err(payload) => {
            let text = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("panic with a non-string payload");
            // SAFETY: the caller passes a valid failure buffer.
            unsafe { (*failure).write(text) };
            outcome::FAILED
        }
    }
}

/// Exports a kernel crate's kernels from a shared library (`crate-type = ["cdylib"]`), for
/// loaders that did not link the crate: Python's `symmem.load_module(path)`.
///
/// ```ignore
/// // lib.rs of a cdylib crate that depends on the kernel crate `my_kernels`:
/// symmem_device::export_kernels!(my_kernels::PTX; my_kernels::ring, my_kernels::moe::dispatch);
/// ```
/// The first argument is the crate's [`EmbeddedPtx`] (what GPU PEs load); then every
/// kernel to export, by the path of its `kernel!` function.
#[macro_export]
macro_rules! export_kernels {
    ($ptx:expr; $($($seg:ident)::+),+ $(,)?) => {
        #[cfg(not(target_arch = "nvptx64"))]
        const _: () = {
            static KERNELS: &[$crate::library::LibraryKernel] = &[$({
                unsafe extern "C" fn entry(
                    args: *const *const u8,
                    failure: *mut $crate::library::FailureText,
                ) -> u32 {
                    // SAFETY: the loader passes arguments checked against the kernel's
                    // parameter layout and a valid failure buffer.
                    unsafe { $crate::library::run_exported($($seg)::+::KERNEL, args, failure) }
                }
                $crate::library::LibraryKernel::new($($seg)::+::KERNEL.info(), entry)
            }),+];
            static LIBRARY: $crate::library::KernelLibrary =
                $crate::library::KernelLibrary::new(&$ptx, KERNELS);

            /// This library's kernel table, for the loader.
            #[no_mangle]
            extern "C" fn symmem_kernel_library() -> *const $crate::library::KernelLibrary {
                &LIBRARY
            }
        };
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::Param;
    use std::boxed::Box;

    unsafe fn add_into((dst, v): (*mut u64, u64)) {
        // SAFETY: the test passes a live u64.
        unsafe { *dst += v }
    }

    unsafe fn fails(_: (u32,)) {
        panic!("deliberate failure: ünïcode text");
    }

    unsafe fn stops(_: ()) {
        std::panic::resume_unwind(Box::new(Stopped));
    }

    /// Runs `kernel` through `run_exported` with `args`; returns the outcome and text.
    fn run<A: KernelArgs>(kernel: Kernel<A>, args: &[*const u8], cap: usize) -> (u32, String) {
        let mut buf = std::vec![0u8; cap];
        let mut failure = FailureText {
            buf: buf.as_mut_ptr(),
            cap,
            len: 0,
        };
        // SAFETY: `args` match the kernels' tuples; the buffer is live.
        let code = unsafe { run_exported(kernel, args.as_ptr(), &mut failure) };
        (
            code,
            String::from_utf8(buf[..failure.len].to_vec()).unwrap(),
        )
    }

    #[test]
    fn an_entry_takes_its_arguments_by_address_and_reports_how_it_ended() {
        let mut x = 40u64;
        let dst: *mut u64 = &mut x;
        let v = 2u64;
        const ADD_PARAMS: &[Param] = &[Param::of::<*mut u64>(), Param::of::<u64>()];
        const FAIL_PARAMS: &[Param] = &[Param::of::<u32>()];
        let add = Kernel::new("add", ADD_PARAMS, add_into);
        let args = [
            (&dst as *const *mut u64).cast::<u8>(),
            (&v as *const u64).cast(),
        ];
        assert_eq!(run(add, &args, 64), (outcome::FINISHED, String::new()));
        assert_eq!(x, 42);

        let pe = 3u32;
        let fail = Kernel::new("fails", FAIL_PARAMS, fails);
        let (code, text) = run(fail, &[(&pe as *const u32).cast()], 64);
        assert_eq!(
            (code, text.as_str()),
            (outcome::FAILED, "deliberate failure: ünïcode text")
        );
        // Truncated on a character boundary: "ü" takes bytes 20 and 21, so 21 keep 20.
        let (_, text) = run(fail, &[(&pe as *const u32).cast()], 21);
        assert_eq!(text, "deliberate failure: ");

        let stop = Kernel::new("stops", &[], stops);
        assert_eq!(run(stop, &[], 64), (outcome::STOPPED, String::new()));
    }

    #[test]
    fn a_library_of_another_build_is_told_apart() {
        let this = LibraryAbi::this();
        // SAFETY: every string of these ABIs is a static of this crate.
        unsafe {
            assert!(this.matches_this());
            let other = LibraryAbi {
                revision: LIBRARY_REVISION + 1,
                ..this
            };
            assert!(!other.matches_this());
            let older = LibraryAbi {
                device_version: RawBytes::of(b"0.0.1"),
                ..this
            };
            assert!(!older.matches_this());
            assert!(older.describe().starts_with("symmem-device 0.0.1, rustc "));
            assert!(this
                .describe()
                .contains(&std::format!("revision {LIBRARY_REVISION}")));
        }
    }
}
