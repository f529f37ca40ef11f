//! What [`kernel!`](crate::kernel) records about each kernel on the host, so that one
//! launch call runs it either on a GPU (`cuLaunchKernel` on the PTX entry of the same
//! name) or on the CPU executor (the host function).
//!
//! The parameter layout ([`Param`]) is the contract with the PTX `.entry`: the runtime
//! checks it against the loaded function before a GPU launch, and the PTX test checks it
//! against every `.entry` of every kernel crate.

use core::marker::PhantomData;

/// Size and alignment of one kernel parameter, as `cuLaunchKernel` passes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Param {
    /// Bytes.
    pub size: usize,
    /// Alignment in bytes.
    pub align: usize,
}

impl Param {
    /// The layout of a `T` parameter.
    pub const fn of<T>() -> Self {
        Param {
            size: core::mem::size_of::<T>(),
            align: core::mem::align_of::<T>(),
        }
    }
}

/// The name, parameter layout and host entry of a kernel taking the argument tuple `A`.
/// `kernel!` defines one as `<kernel name>::KERNEL` beside each kernel.
pub struct Kernel<A> {
    name: &'static str,
    params: &'static [Param],
    param_types: &'static [&'static str],
    max_threads: u32,
    host: unsafe fn(A),
    _args: PhantomData<fn(A)>,
}

// Manual impls: `A` (raw pointers, usually) need not be Clone/Copy for the descriptor to be.
impl<A> Clone for Kernel<A> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<A> Copy for Kernel<A> {}

impl<A> core::fmt::Debug for Kernel<A> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Kernel")
            .field("name", &self.name)
            .field("params", &self.params)
            .field("param_types", &self.param_types)
            .field("max_threads", &self.max_threads)
            .finish()
    }
}

impl<A: KernelArgs> Kernel<A> {
    /// A descriptor; used by `kernel!`.
    #[doc(hidden)]
    pub const fn new(name: &'static str, params: &'static [Param], host: unsafe fn(A)) -> Self {
        Kernel {
            name,
            params,
            param_types: &[],
            max_threads: crate::geometry::MAX_THREADS,
            host,
            _args: PhantomData,
        }
    }

    /// The descriptor of a kernel declared `max_threads(n)`; used by `kernel!`. Refuses
    /// (at compile time, where the descriptor is a constant) a bound outside 1..=1024.
    #[doc(hidden)]
    pub const fn with_max_threads(self, n: u32) -> Self {
        assert!(
            n >= 1 && n <= crate::geometry::MAX_THREADS,
            "max_threads must be between 1 and 1024"
        );
        Kernel {
            max_threads: n,
            ..self
        }
    }

    /// The descriptor with its parameters' Rust types, as written in the kernel's
    /// signature; used by `kernel!`.
    #[doc(hidden)]
    pub const fn with_param_types(self, param_types: &'static [&'static str]) -> Self {
        Kernel {
            param_types,
            ..self
        }
    }

    /// The most threads per block it may launch with ([`MAX_THREADS`](crate::geometry::MAX_THREADS)
    /// unless declared `max_threads(N)`).
    pub const fn max_threads(&self) -> u32 {
        self.max_threads
    }

    /// The PTX entry point's name (the kernel's Rust name).
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The parameters in order.
    pub const fn params(&self) -> &'static [Param] {
        self.params
    }

    /// Name and parameters, without the argument type: what a table of a crate's
    /// kernels holds.
    pub const fn info(&self) -> KernelInfo {
        KernelInfo {
            name: self.name,
            params: self.params,
            param_types: self.param_types,
            max_threads: self.max_threads,
        }
    }

    /// Runs the kernel body on the calling thread, as one kernel thread.
    ///
    /// # Safety
    /// Only from a CPU-executor launch, with arguments valid for every thread of it.
    #[inline]
    pub unsafe fn call_host(&self, args: A) {
        // SAFETY: forwarded to the caller.
        unsafe { (self.host)(args) }
    }
}

/// A kernel's name and parameter layout, independent of its argument type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelInfo {
    /// The PTX entry point's name.
    pub name: &'static str,
    /// The parameters in order.
    pub params: &'static [Param],
    /// The parameters' Rust types as the kernel's signature writes them (`*mut u64`,
    /// `usize`, `f32`), in order: what a dynamic launch (Python's) converts arguments to.
    /// Empty where they are not known.
    pub param_types: &'static [&'static str],
    /// The most threads per block it may launch with: its PTX entry's `.maxntid`.
    pub max_threads: u32,
}

impl KernelInfo {
    /// The parameters as errors list them: `*mut u64, usize, u32` (their Rust types), or
    /// `8 B, 8 B, 4 B` where the types are not known.
    pub const fn param_list(&self) -> ParamList<'_> {
        ParamList(self)
    }
}

/// [`KernelInfo::param_list`]'s display.
#[derive(Debug, Clone, Copy)]
pub struct ParamList<'a>(&'a KernelInfo);

impl core::fmt::Display for ParamList<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let info = self.0;
        let typed = info.param_types.len() == info.params.len();
        for (i, p) in info.params.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            if typed {
                f.write_str(info.param_types[i])?;
            } else {
                write!(f, "{} B", p.size)?;
            }
        }
        Ok(())
    }
}

/// An argument tuple a kernel can be launched with: every element is a plain value or a
/// raw pointer, passed to the GPU by address.
///
/// # Safety
/// `for_each` must report every element of the tuple, in order, with its exact address
/// and size, so that the runtime can hand them to `cuLaunchKernel`.
pub unsafe trait KernelArgs: Copy {
    /// Calls `f` with the address and size of each argument, in order.
    fn for_each(&self, f: &mut dyn FnMut(*const u8, usize));

    /// The tuple whose elements are at `ptrs[0]`, `ptrs[1]`, …: how a kernel library's
    /// entry (see [`export_kernels!`](crate::export_kernels)) takes its arguments, in the
    /// `void **` form `cuLaunchKernel` takes.
    ///
    /// # Safety
    /// `ptrs` holds one address per element, each readable for that element's size and
    /// holding a valid value of its type (any alignment).
    unsafe fn from_ptrs(ptrs: *const *const u8) -> Self;
}

macro_rules! tuple_args {
    ($($t:ident $i:tt),*) => {
        // SAFETY: every element is reported, in order, with its own address and size.
        unsafe impl<$($t: Copy),*> KernelArgs for ($($t,)*) {
            #[allow(unused_variables)]
            fn for_each(&self, f: &mut dyn FnMut(*const u8, usize)) {
                $(f((&self.$i as *const $t).cast(), core::mem::size_of::<$t>());)*
            }

            #[allow(unused_variables, clippy::unused_unit)]
            unsafe fn from_ptrs(ptrs: *const *const u8) -> Self {
                // SAFETY: the caller passes one valid address per element.
                ($(unsafe { (*ptrs.add($i)).cast::<$t>().read_unaligned() },)*)
            }
        }
    };
}

tuple_args!();
tuple_args!(A 0);
tuple_args!(A 0, B 1);
tuple_args!(A 0, B 1, C 2);
tuple_args!(A 0, B 1, C 2, D 3);
tuple_args!(A 0, B 1, C 2, D 3, E 4);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13, O 14);
tuple_args!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13, O 14, P 15);

/// PTX that a kernel crate embedded at build time (see [`embedded_ptx!`](crate::embedded_ptx)).
#[derive(Debug, Clone, Copy)]
pub struct EmbeddedPtx {
    /// The kernel crate's package name.
    pub crate_name: &'static str,
    /// The `sm_XX` the PTX was built for.
    pub arch: &'static str,
    /// The PTX text; empty when it could not be built.
    pub ptx: &'static str,
    /// Why there is no PTX, when `ptx` is empty.
    pub missing: &'static str,
    /// The `sm_XX` of [`sass`](Self::sass); empty when none was built.
    pub sass_arch: &'static str,
    /// A cubin ptxas built from the PTX for `sass_arch` (`SYMMEM_SASS_ARCH` at build
    /// time), which loads without the driver's JIT on a GPU of exactly that architecture;
    /// empty when none was built.
    pub sass: &'static [u8],
}

impl EmbeddedPtx {
    /// The cubin for a GPU of compute capability `(major, minor)`, if one was built for
    /// exactly that architecture.
    pub fn sass_for(&self, (major, minor): (i32, i32)) -> Option<&'static [u8]> {
        let arch: i32 = self.sass_arch.strip_prefix("sm_")?.parse().ok()?;
        (!self.sass.is_empty() && arch == major * 10 + minor).then_some(self.sass)
    }
}

/// The PTX a kernel crate's build script embedded with
/// `symmem_ptx_build::embed_from_build_script()`. Expands to an [`EmbeddedPtx`].
#[macro_export]
macro_rules! embedded_ptx {
    () => {
        $crate::EmbeddedPtx {
            crate_name: env!("CARGO_PKG_NAME"),
            arch: include_str!(concat!(env!("OUT_DIR"), "/symmem-ptx-arch")),
            ptx: include_str!(concat!(env!("OUT_DIR"), "/symmem.ptx")),
            missing: include_str!(concat!(env!("OUT_DIR"), "/symmem-ptx-missing")),
            sass_arch: include_str!(concat!(env!("OUT_DIR"), "/symmem-sass-arch")),
            sass: include_bytes!(concat!(env!("OUT_DIR"), "/symmem.cubin")),
        }
    };
}
