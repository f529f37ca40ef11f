//! With the `ofi` feature, compiles the libfabric shim (`src/ofi/shim.c`) and links
//! libfabric.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "ofi")]
    {
        println!("cargo:rerun-if-changed=src/ofi/shim.c");
        cc::Build::new()
            .file("src/ofi/shim.c")
            .warnings(true)
            .extra_warnings(true)
            .compile("symmem_ofi_shim");
        println!("cargo:rustc-link-lib=fabric");
    }
}
