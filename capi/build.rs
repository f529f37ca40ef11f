//! Writes `symcc` (from `symcc.in`) next to the built library, with the include and
//! library directories of this build, so that C programs compile with
//! `target/<profile>/symcc prog.c -o prog`; and links `libsymmem.so` and `libsymmem.a` to
//! the libraries cargo names after the crate (`libsymmem_capi.*`), so `-lsymmem` works.
//! The links point into `deps/`: cargo copies the libraries up to `<profile>/` only for
//! `cargo build`, not when `cargo test` builds them for the C test suite.
//!
//! The shared library's soname is `libsymmem.so.0` (major version 0, as installed by
//! `scripts/install-c.sh`): programs linked with `-lsymmem` record that name, so a link
//! of that name sits here too.

use std::path::PathBuf;

/// The soname of `libsymmem.so`: what programs linked with it ask the loader for.
const SONAME: &str = "libsymmem.so.0";

/// The system libraries `libsymmem.a` needs, as rustc's `--print native-static-libs`
/// lists them for a build without the fabric transports: what this build's `symcc
/// -static-symmem` links (it adds libfabric for a library with the ofi transport). The
/// installed `symcc` and `symmem.pc` carry the list rustc printed for the installed build
/// (`scripts/install-c.sh`).
const STATIC_LIBS: &str = "-ldl -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc";

fn main() {
    println!("cargo:rerun-if-changed=symcc.in");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{SONAME}");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    // OUT_DIR is <target>/<profile>/build/<package>-<hash>/out; the library lands in
    // <target>/<profile>.
    let profile_dir = out
        .ancestors()
        .nth(3)
        .expect("OUT_DIR is three levels below the profile directory");
    let template = std::fs::read_to_string(manifest.join("symcc.in")).expect("reading symcc.in");
    let script = template
        .replace("@INCLUDE@", &manifest.join("include").display().to_string())
        .replace("@LIBDIR@", &profile_dir.display().to_string())
        .replace("@STATIC_LIBS@", STATIC_LIBS);
    let dest = profile_dir.join("symcc");
    std::fs::write(&dest, script).unwrap_or_else(|e| panic!("writing {}: {e}", dest.display()));
    for (link, target) in [
        ("libsymmem.so", "deps/libsymmem_capi.so"),
        (SONAME, "deps/libsymmem_capi.so"),
        ("libsymmem.a", "deps/libsymmem_capi.a"),
    ] {
        let link = profile_dir.join(link);
        // A file left by an earlier layout, or a stale link: replace it.
        if link.symlink_metadata().is_ok() {
            std::fs::remove_file(&link)
                .unwrap_or_else(|e| panic!("removing {}: {e}", link.display()));
        }
        std::os::unix::fs::symlink(target, &link)
            .unwrap_or_else(|e| panic!("linking {} to {target}: {e}", link.display()));
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("making {} executable: {e}", dest.display()));
}
