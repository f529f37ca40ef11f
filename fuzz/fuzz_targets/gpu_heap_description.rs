//! The description of a GPU heap that same-node PEs send with its handles (VMM chunk
//! lengths, or a legacy IPC handle and the heap's offset into its allocation). Whatever
//! decodes must encode back to its bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use symmem_runtime::fuzzing::{decode_gpu_heap_description, encode_ipc, encode_vmm, Description};

fuzz_target!(|data: &[u8]| {
    match decode_gpu_heap_description(data, 1) {
        Ok(Description::Vmm(chunks)) => assert_eq!(encode_vmm(&chunks), data),
        Ok(Description::Ipc(handle, offset)) => assert_eq!(encode_ipc(&handle, offset), data),
        Err(_) => {}
    }
});
