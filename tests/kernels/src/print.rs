//! Device `printf!` (this crate turns on symmem-device's `printf` feature).

use symmem_device::*;

kernel! {
    /// Thread 0 of block 0 prints one line with an integer, a float and a C string;
    /// every other thread prints nothing.
    pub fn print_values(x: u32, y: f64) {
        if block_rank() == 0 && thread_rank() == 0 {
            printf!("printf: PE %d: x=%u y=%.2f %s\n", my_pe() as i32, x, y, c"text");
        }
    }
}
