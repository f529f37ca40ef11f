//! Builds this crate's kernels to PTX and embeds them (`my_kernels::PTX`).
fn main() {
    symmem_ptx_build::embed_from_build_script();
}
