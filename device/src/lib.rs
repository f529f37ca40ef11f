//! symmem device API: one-sided communication from inside kernels.
//!
//! `#![no_std]`. The same kernel source compiles
//! - to PTX (`--target nvptx64-nvidia-cuda`), where peers are reached through P2P
//!   pointers with system-scope PTX (inline asm, see `arch/nvptx.rs`), and
//! - on the host, with the `host` feature (on by default), for the CPU executor of
//!   `symmem-runtime`, which runs each kernel thread as a fiber (the threads of a block
//!   interleave on one OS thread at barriers and waits) with the same semantics.
//!
//! Without either, only the host/device contract ([`state`], [`team`], [`reduce`](mod@reduce),
//! [`float`], [`Cmp`], [`SignalOp`], [`Dim3`]) is compiled.
//!
//! # Element types
//! Operations that move data take any `Copy` element; the narrow floats of [`float`]
//! ([`bf16`], [`f16`](struct@f16), [`Fp8E4M3`], [`Fp8E5M2`]) are `Pod` newtypes over their bits, the
//! same on the host and in kernels.
//!
//! # Addresses
//! Symmetric memory is named by *symmetric addresses*: pointers into this PE's own heap
//! (the host gets one with `Runtime::ptr(&buf, my_pe)`). An operation on PE `pe` translates
//! it to `pe`'s copy. Device operations are `unsafe`: the hardware cannot check bounds, so
//! the caller guarantees that every address and length lies inside a symmetric allocation.
//! A [`SymSlice`] (from the host's `Runtime::sym_slice`) carries its length, so its
//! operations check bounds and are safe.
//!
//! # Scopes
//! Thread-scope operations are called by any single thread. `_warp` operations must be
//! called by every thread of a warp with the same arguments, `_block` operations by every
//! thread of a block: the copy is split across the group and one thread issues the
//! completion or signal.
//!
//! # Teams and collectives
//! A [`DeviceTeam`] (from the host's `Team::device`, passed as a kernel argument) names a
//! team for the collectives [`team_sync`], [`team_barrier`], [`broadcast`], [`fcollect`],
//! [`collect`], [`alltoall`], [`reduce()`] and [`reducescatter`], each with `_warp` and
//! `_block` forms. Reductions take an operator of [`reduce`](mod@reduce): [`Sum`],
//! [`Prod`], [`Min`], [`Max`] on every [`Reducible`] type (the integers, `f32`, `f64`,
//! [`bf16`] and [`f16`](struct@f16)), [`And`], [`Or`], [`Xor`] on integers only. The
//! algorithms are named in the docs of [`team_sync`] and its module.
//!
//! # Shared memory, warp intrinsics and block helpers
//! [`shared!`] declares a block's shared arrays and [`dynamic_shared`] gives the memory a
//! launch sized with `shared_bytes`, both as bounds-checked [`SharedSlice`]s with
//! block-scope atomics. [`ballot`], [`shfl`] (and `_up`, `_down`, `_xor`), [`match_any`],
//! [`match_all`], [`active_mask`] and [`popc`] are CUDA's warp intrinsics; the fibers of a
//! warp really exchange their values on the CPU executor. [`block_fetch_add`] and its
//! family are block-scope atomics; [`scan_exclusive_block`], [`scan_inclusive_block`] and
//! [`histogram_block`] are block-wide helpers built on them.
//!
//! # Generic kernels, scopes and typed slices
//! [`kernel!`] takes type and const parameters and a list of instances, each its own
//! entry point. [`Thread`], [`Warp`] and [`Block`] implement [`Scope`], whose functions
//! are the group operations of that scope (`S::put_nbi` is [`put_nbi_warp`] for
//! [`Warp`]), so one kernel body serves every scope. [`SymSlice`] is a typed symmetric
//! range passed as a kernel argument; its operations check every range against it.
//!
//! # Kernels
//! Declare kernels with [`kernel!`]: on nvptx64 it produces an `extern "ptx-kernel"` entry
//! point, on the host an `unsafe fn` the CPU executor calls from each kernel thread.
#![no_std]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(abi_ptx, stdarch_nvptx, asm_experimental_arch, allow_internal_unstable)
)]
// `shared!` lets the kernel crates that expand it use inline PTX without enabling
// `asm_experimental_arch` themselves.
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]

pub mod float;
mod geometry;
mod op_kinds;
pub mod panic_record;
pub mod proxy;
pub mod reduce;
pub mod request;
pub mod state;
pub mod team;

#[cfg(any(target_arch = "nvptx64", feature = "host"))]
mod ops;
#[cfg(any(target_arch = "nvptx64", feature = "host"))]
pub mod printf;
#[cfg(any(target_arch = "nvptx64", feature = "host"))]
mod stall;
#[cfg(any(target_arch = "nvptx64", feature = "host"))]
pub use ops::*;

/// CPU-executor plumbing: the per-thread context and the executor interface.
#[cfg(all(feature = "host", not(target_arch = "nvptx64")))]
pub mod host {
    pub use crate::arch::{
        installed_context, set_context, set_context_source, ContextSource, Executor, Stop, Stopped,
        ThreadContext, EXECUTOR_COPY_FROM,
    };
}

#[cfg(all(feature = "host", not(target_arch = "nvptx64")))]
pub mod library;

#[cfg(target_arch = "nvptx64")]
#[path = "arch/nvptx.rs"]
mod arch;
#[cfg(all(feature = "host", not(target_arch = "nvptx64")))]
#[path = "arch/host.rs"]
mod arch;
#[cfg(target_arch = "nvptx64")]
#[path = "arch/nvptx_group.rs"]
mod group_arch;
#[cfg(all(feature = "host", not(target_arch = "nvptx64")))]
#[path = "arch/host_group.rs"]
mod group_arch;

/// The bound of element types that any bits make valid (symmetric slices' local reads,
/// shared memory): `bytemuck`'s, re-exported so kernel crates need no dependency on it.
pub use bytemuck::Pod;
pub use float::{bf16, f16, Fp8E4M3, Fp8E5M2};
pub use geometry::{Dim3, MAX_SHARED_BYTES, MAX_THREADS, MAX_THREADS_SYMBOL_PREFIX, WARP_SIZE};
pub use op_kinds::{AmoKind, Cmp, SignalOp};
pub use reduce::{And, BitwiseReducible, Max, Min, Or, Prod, ReduceOp, Reducible, Sum, Xor};
pub use request::{Opcode, Request};
pub use state::{DeviceState, DEVICE_STATE_VERSION};
pub use team::DeviceTeam;

#[cfg(not(target_arch = "nvptx64"))]
mod kernel;
#[cfg(not(target_arch = "nvptx64"))]
pub use kernel::{EmbeddedPtx, Kernel, KernelArgs, KernelInfo, Param, ParamList};

/// Declares a kernel that compiles to a PTX entry point on nvptx64 and to a host-callable
/// `unsafe fn` for the CPU executor.
///
/// ```ignore
/// symmem_device::kernel! {
///     /// Puts `n` u64s from `src` to the right neighbour's `dst`, then signals it.
///     pub fn ring_put(dst: *mut u64, src: *const u64, n: usize, sig: *mut u64) {
///         let pe = symmem_device::my_pe();
///         let right = (pe + 1) % symmem_device::n_pes();
///         symmem_device::put_signal_block(dst, src, n, sig, 1, symmem_device::SignalOp::Add, right);
///     }
/// }
/// ```
/// The body is an `unsafe` context. Argument types must be plain values or raw pointers
/// (what a CUDA kernel can take). On nvptx64 the crate must enable `#![feature(abi_ptx)]`.
///
/// A kernel that never runs with more than `N` threads per block can say so after its
/// parameters, as CUDA's `__launch_bounds__(N)`: `pub fn ping(sig: *mut u64)
/// max_threads(64) { … }`. The compiler may then give each thread more registers (up to
/// 255 at 256 threads or fewer; [`MAX_THREADS`], the default, allows 64), so a kernel with
/// many live values does not spill them to local memory; a launch with more threads is
/// refused with an error naming the kernel and both numbers, on GPU and CPU PEs alike.
///
/// Off nvptx64, each kernel also gets a module of the same name holding
/// `KERNEL: Kernel<(args…)>`, its launch descriptor: `rt.launch(&module, ring_put::KERNEL,
/// grid, block, (dst, src, n, sig))` runs it on a GPU PE or on the CPU executor.
///
/// `safe fn` instead of `fn` makes the body safe code: raw-pointer operations then need
/// an `unsafe` block of their own ([`SymSlice`] arguments need none).
///
/// # Generic kernels
/// Type and const parameters go in brackets (`macro_rules!` cannot match `<…>`), types
/// first, bounds in a bracketed `where`; the instances follow the body, each the name of
/// its entry point and its arguments in the parameters' order:
///
/// ```ignore
/// symmem_device::kernel! {
///     pub safe fn scale[type T, type S, const N: usize](dst: SymSlice<T>, src: SymSlice<T>)
///         where [T: Copy, S: Scope]
///     {
///         dst.put::<S>(0, src.sub(0, N), symmem_device::my_pe());
///     }
///     instances {
///         scale_f32_warp_4 = [f32, Warp, 4],
///         scale_u64_block_1 = [u64, Block, 1],
///     }
/// }
/// ```
/// Each instance is a PTX entry of its own name and, off nvptx64, a module of that name
/// with its `KERNEL` descriptor (`scale_f32_warp_4::KERNEL`); the generic function
/// (`scale`) is an ordinary `unsafe fn` other kernels may call. Instances of a kernel
/// with `max_threads(N)` share the bound. Instance descriptors record no parameter type
/// names (they would be the generic ones).
#[macro_export]
macro_rules! kernel {
    // One kernel with no generic parameters: an entry point of its own name.
    (@plain [$($safe:ident)?]
        $(#[$meta:meta])*
        $vis:vis fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $(max_threads($max:expr))? $body:block
    ) => {
        $(#[$meta])*
        #[cfg(target_arch = "nvptx64")]
        #[allow(clippy::too_many_arguments)] // kernels take what they need, as in CUDA
        #[no_mangle]
        #[deny(unsafe_op_in_unsafe_fn)]
        $vis unsafe extern "ptx-kernel" fn $name($($arg: $ty),*) {
            $crate::kernel!(@body [$($safe)?] $body)
        }

        // The launch bound, for the PTX build (`.maxntid`): a marker global it reads.
        $(
            #[cfg(target_arch = "nvptx64")]
            const _: () = {
                #[used]
                #[export_name = concat!("SYMMEM_MAX_THREADS_", stringify!($name))]
                static MAX_THREADS: u32 = $max;
            };
        )?

        $(#[$meta])*
        ///
        /// # Safety
        /// A kernel: call it only from a CPU-executor launch, with arguments valid for
        /// every thread of the launch.
        #[cfg(not(target_arch = "nvptx64"))]
        #[allow(clippy::too_many_arguments)] // kernels take what they need, as in CUDA
        #[deny(unsafe_op_in_unsafe_fn)]
        $vis unsafe fn $name($($arg: $ty),*) {
            $crate::kernel!(@body [$($safe)?] $body)
        }

        /// Launch descriptor of the kernel of the same name.
        #[cfg(not(target_arch = "nvptx64"))]
        #[allow(non_snake_case, dead_code)]
        $vis mod $name {
            #[allow(unused_imports)]
            use super::*;

            /// Name, parameter layout and host entry, for `Runtime::launch`.
            pub const KERNEL: $crate::Kernel<($($ty,)*)> = $crate::Kernel::new(
                stringify!($name),
                &[$($crate::Param::of::<$ty>()),*],
                entry,
            )
            .with_param_types(&[$(stringify!($ty)),*])
            $(.with_max_threads($max))?;

            /// Unpacks the argument tuple for the host function.
            #[allow(clippy::too_many_arguments, clippy::unused_unit)]
            unsafe fn entry(args: ($($ty,)*)) {
                let ($($arg,)*) = args;
                // SAFETY: forwarded from `Kernel::call_host`'s contract.
                unsafe { super::$name($($arg),*) }
            }
        }
    };

    // A generic kernel: the generic function, then one entry point per instance.
    (@generic [$($safe:ident)?]
        [$(#[$meta:meta])*] $vis:vis $name:ident $generics:tt $args:tt $max:tt $where:tt
        $body:block [$($inst:ident = $vals:tt),*]
    ) => {
        $crate::kernel!(@generic_fn [$($safe)?] [$(#[$meta])*] $vis $name $generics $args $where $body);
        $(
            $crate::kernel!(@instance $vis $name $generics $args $max $inst $vals);
        )*
    };

    (@generic_fn [$($safe:ident)?]
        [$(#[$meta:meta])*] $vis:vis $name:ident
        [$(type $tp:ident),* $(,)? $(const $cn:ident : $ct:ty),* $(,)?]
        ($($arg:ident : $ty:ty),* $(,)?) [$($where:tt)*] $body:block
    ) => {
        $(#[$meta])*
        ///
        /// # Safety
        /// A generic kernel: its instances are the entry points, launched through their
        /// descriptors (`<instance>::KERNEL`); call it only from a kernel thread, with
        /// arguments valid for every thread of the launch.
        #[inline(always)]
        #[allow(clippy::too_many_arguments)] // kernels take what they need, as in CUDA
        #[deny(unsafe_op_in_unsafe_fn)]
        $vis unsafe fn $name<$($tp,)* $(const $cn: $ct,)*>($($arg: $ty),*) where $($where)* {
            $crate::kernel!(@body [$($safe)?] $body)
        }
    };

    (@instance
        $vis:vis $name:ident [$(type $tp:ident),* $(,)? $(const $cn:ident : $ct:ty),* $(,)?]
        ($($arg:ident : $ty:ty),* $(,)?) [$($max:expr)?] $inst:ident [$($val:tt)*]
    ) => {
        #[doc = concat!(
            "Instance `", stringify!($name), "::<", stringify!($($val)*), ">` of the generic kernel [`",
            stringify!($name), "`]: the PTX entry point `", stringify!($inst),
            "` and, off nvptx64, its launch descriptor `KERNEL`."
        )]
        #[allow(non_snake_case, dead_code)]
        $vis mod $inst {
            #[allow(unused_imports)]
            use super::*;

            $crate::kernel!(@alias [$($tp)*] [$($cn: $ct),*] [$($val)*]);

            /// The entry point.
            #[cfg(target_arch = "nvptx64")]
            #[allow(clippy::too_many_arguments)] // kernels take what they need, as in CUDA
            #[no_mangle]
            pub unsafe extern "ptx-kernel" fn $inst($($arg: $ty),*) {
                // SAFETY: the launch's contract, for the generic function.
                unsafe { super::$name::<$($tp,)* $($cn,)*>($($arg),*) }
            }

            $(
                #[cfg(target_arch = "nvptx64")]
                const _: () = {
                    #[used]
                    #[export_name = concat!("SYMMEM_MAX_THREADS_", stringify!($inst))]
                    static MAX_THREADS: u32 = $max;
                };
            )?

            /// Name, parameter layout and host entry, for `Runtime::launch`. The parameter
            /// types are not recorded (their names would be the generic ones).
            #[cfg(not(target_arch = "nvptx64"))]
            pub const KERNEL: $crate::Kernel<($($ty,)*)> = $crate::Kernel::new(
                stringify!($inst),
                &[$($crate::Param::of::<$ty>()),*],
                entry,
            )
            $(.with_max_threads($max))?;

            /// Unpacks the argument tuple for the generic function.
            #[cfg(not(target_arch = "nvptx64"))]
            #[allow(clippy::too_many_arguments, clippy::unused_unit)]
            unsafe fn entry(args: ($($ty,)*)) {
                let ($($arg,)*) = args;
                // SAFETY: forwarded from `Kernel::call_host`'s contract.
                unsafe { super::$name::<$($tp,)* $($cn,)*>($($arg),*) }
            }
        }
    };

    // An instance's arguments, in the order of the generic parameters (types, then
    // constants), as aliases named after the parameters.
    (@alias [$tp:ident $($tps:ident)*] [$($cs:tt)*] [$val:ty $(, $($vals:tt)*)?]) => {
        type $tp = $val;
        $crate::kernel!(@alias [$($tps)*] [$($cs)*] [$($($vals)*)?]);
    };
    (@alias [] [$cn:ident : $ct:ty $(, $($cs:tt)*)?] [$val:expr $(, $($vals:tt)*)?]) => {
        const $cn: $ct = $val;
        $crate::kernel!(@alias [] [$($($cs)*)?] [$($($vals)*)?]);
    };
    (@alias [] [] []) => {};
    (@alias [] [] [$($extra:tt)+]) => {
        compile_error!(concat!(
            "kernel!: an instance has more arguments than the kernel has generic parameters: ",
            stringify!($($extra)+)
        ));
    };
    (@alias [$($tps:ident)*] [$($cs:tt)*] []) => {
        compile_error!(concat!(
            "kernel!: an instance has fewer arguments than the kernel has generic parameters; missing: ",
            stringify!($($tps)* $($cs)*)
        ));
    };

    // Kernels one at a time, so that generic and plain kernels mix.
    (@each) => {};
    (@each
        $(#[$meta:meta])*
        $vis:vis fn $name:ident($($args:tt)*) $(max_threads($max:expr))? $body:block
        $($rest:tt)*
    ) => {
        $crate::kernel!(@plain [] $(#[$meta])* $vis fn $name($($args)*) $(max_threads($max))? $body);
        $crate::kernel!(@each $($rest)*);
    };
    (@each
        $(#[$meta:meta])*
        $vis:vis safe fn $name:ident($($args:tt)*) $(max_threads($max:expr))? $body:block
        $($rest:tt)*
    ) => {
        $crate::kernel!(@plain [safe] $(#[$meta])* $vis fn $name($($args)*) $(max_threads($max))? $body);
        $crate::kernel!(@each $($rest)*);
    };
    (@each
        $(#[$meta:meta])*
        $vis:vis fn $name:ident [$($generics:tt)*] $args:tt $(max_threads($max:expr))?
        $(where [$($where:tt)*])? $body:block
        instances { $($inst:ident = $vals:tt),* $(,)? }
        $($rest:tt)*
    ) => {
        $crate::kernel!(@generic []
            [$(#[$meta])*] $vis $name [$($generics)*] $args [$($max)?] [$($($where)*)?] $body
            [$($inst = $vals),*]
        );
        $crate::kernel!(@each $($rest)*);
    };
    (@each
        $(#[$meta:meta])*
        $vis:vis safe fn $name:ident [$($generics:tt)*] $args:tt $(max_threads($max:expr))?
        $(where [$($where:tt)*])? $body:block
        instances { $($inst:ident = $vals:tt),* $(,)? }
        $($rest:tt)*
    ) => {
        $crate::kernel!(@generic [safe]
            [$(#[$meta])*] $vis $name [$($generics)*] $args [$($max)?] [$($($where)*)?] $body
            [$($inst = $vals),*]
        );
        $crate::kernel!(@each $($rest)*);
    };
    // A kernel's body: an `unsafe` context, or safe code for a `safe fn`.
    (@body [] $body:block) => {{
        #[allow(unused_unsafe)]
        unsafe { $body }
    }};
    (@body [safe] $body:block) => {
        $body
    };
    (@each $($bad:tt)*) => {
        compile_error!(concat!(
            "kernel!: expected `fn name(args) { … }` or `fn name[type T, const N: usize](args) \
             where [bounds] { … } instances { name_x = [X, 4] }`, found: ",
            stringify!($($bad)*)
        ));
    };

    ($($items:tt)*) => {
        $crate::kernel!(@each $($items)*);
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The codes the host encodes into helper-kernel arguments decode to the same
    /// operations on the device, and nothing else decodes.
    #[test]
    fn op_codes_round_trip() {
        for k in AmoKind::ALL {
            assert_eq!(AmoKind::from_u32(k as u32), Some(k));
        }
        assert_eq!(AmoKind::from_u32(AmoKind::ALL.len() as u32), None);
        for c in Cmp::ALL {
            assert_eq!(Cmp::from_u32(c as u32), Some(c));
        }
        assert_eq!(Cmp::from_u32(6), None);
        for op in [SignalOp::Set, SignalOp::Add] {
            assert_eq!(SignalOp::from_u32(op as u32), Some(op));
        }
        assert_eq!(SignalOp::from_u32(2), None);
    }
}
