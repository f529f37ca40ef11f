//! A kernel crate outside this repository (`examples/out-of-tree/`, the template the book's
//! "Writing kernels" chapter points to) builds and runs: the test copies it to a temporary
//! directory outside the workspace, points its symmem dependencies at this checkout with
//! a `[patch.crates-io]` section (as a user would before the crates are published, or to
//! try a local change), builds it, PTX included, and runs its kernel on 2 CPU PEs.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Copies the files of directory `from` into `to`, recursively.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

#[test]
fn a_kernel_crate_outside_the_workspace_runs_on_2_cpu_pes() {
    let dir = std::env::temp_dir().join(format!("symmem-out-of-tree-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    copy_dir(&repo().join("examples/out-of-tree"), &dir);
    assert!(
        !dir.ancestors()
            .any(|d| d.join("Cargo.toml").is_file() && d != dir),
        "{} must lie outside every workspace",
        dir.display()
    );
    let mut manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    manifest.push_str("\n[patch.crates-io]\n");
    for (name, path) in [
        ("symmem", "."),
        ("symmem-device", "device"),
        ("symmem-ptx-build", "ptx-build"),
    ] {
        let path = repo().join(path);
        manifest.push_str(&format!(
            "{name} = {{ path = {:?} }}\n",
            path.display().to_string()
        ));
    }
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    // The versions this checkout is tested with, so the build needs no registry update.
    std::fs::copy(repo().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();

    // The test's own target directory: the checkout's crates are built there already.
    let exe = std::env::current_exe().unwrap();
    let target_dir = exe
        .ancestors()
        .nth(3)
        .expect("<target>/<profile>/deps/<test>");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(&dir)
        .args(["run", "--quiet", "--example", "ring", "--target-dir"])
        .arg(target_dir)
        .args(["--", "--pes", "2"])
        .env("SYMMEM_TIMEOUT", "60")
        .output()
        .expect("starting cargo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stdout}\n{stderr}", out.status);
    for pe in 0..2 {
        let want = format!("PE {pe} of 2: ring ok, 256 u64s from PE {}", (pe + 1) % 2);
        assert!(
            stdout.lines().any(|l| l == want),
            "{want:?} missing:\n{stdout}\n{stderr}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
