//! Records the compiler's version (`SYMMEM_DEVICE_RUSTC`) for the ABI check of kernel
//! libraries: a library and the executor that loads it must share the layout of the
//! types they pass each other, which only the same crate version and compiler promise.
//!
//! Also hands the build scripts of dependents (kernel crates) this crate's source
//! directory as `DEP_SYMMEM_DEVICE_SRC` (`links = "symmem_device"`): their PTX embeds it,
//! so their PTX build reruns when it changes, wherever cargo found this crate; and, with
//! the `cuda` feature, `DEP_SYMMEM_DEVICE_CUDA=1`: the program can run kernels on GPU
//! PEs, so their PTX is required.
use std::process::Command;

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = Command::new(&rustc)
        .arg("-V")
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .unwrap_or_else(|| format!("{rustc} (version unknown)"));
    println!("cargo:rustc-env=SYMMEM_DEVICE_RUSTC={version}");
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo");
    println!("cargo::metadata=src={manifest}/src");
    if std::env::var_os("CARGO_FEATURE_CUDA").is_some() {
        println!("cargo::metadata=cuda=1");
    }
    println!("cargo:rerun-if-env-changed=RUSTC");
    println!("cargo:rerun-if-changed=build.rs");
}
