//! The example kernels (`symmem-example-kernels`) as a kernel library: a shared library
//! that programs which did not link the crate load at run time, such as Python's
//! `symmem.load_module("target/debug/libsymmem_example_kernel_library.so")`.

use symmem_example_kernels as kernels;

symmem_device::export_kernels!(
    kernels::PTX;
    kernels::pipeline_produce,
    kernels::pipeline_consume,
    kernels::moe::moe_count,
    kernels::moe::moe_dispatch_warp,
    kernels::moe::moe_dispatch_block,
    kernels::moe::moe_expert_warp,
    kernels::moe::moe_expert_block,
    kernels::moe::moe_combine,
    kernels::transpose::transpose_staged,
    kernels::transpose::transpose_get,
    kernels::transpose::transpose_fused,
);
