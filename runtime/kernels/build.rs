//! Embeds this crate's kernels as PTX (see `symmem_ptx_build::embed_from_build_script`).
fn main() {
    symmem_ptx_build::embed_from_build_script();
}
