//! Where the PEs of a launcher's job append their hang reports (`SYMMEM_HANG_REPORT_FILE`),
//! so that `symrun --report PID` can find the report it asked for.
//!
//! The user's `SYMMEM_HANG_REPORT_FILE` wins. Without it the launcher gives its PEs
//! `<dir>/symrun-<launcher pid>-hang-reports.jsonl`, where `<dir>` is `symmem-<uid>` in
//! `$XDG_RUNTIME_DIR`, else in `$TMPDIR`, else in `/tmp`: a directory of the user's own,
//! mode 0700, so that no other user can place a file or link there.

use std::ffi::OsString;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The variable that names the file (read by the runtime).
pub const VAR: &str = "SYMMEM_HANG_REPORT_FILE";

/// The report file of the job whose launcher is process `launcher`, as its environment
/// (`var`, which looks a variable up) names it: [`VAR`] if set, else the default
/// described in the [module docs](self).
pub fn path(launcher: u32, var: impl Fn(&str) -> Option<OsString>) -> PathBuf {
    if let Some(file) = var(VAR).filter(|v| !v.is_empty()) {
        return file.into();
    }
    user_dir(var).join(format!("symrun-{launcher}-hang-reports.jsonl"))
}

/// The user's own directory for symmem's files, as the environment (`var`) places it:
/// `symmem-<uid>` in `$XDG_RUNTIME_DIR`, else in `$TMPDIR`, else in `/tmp`. Make it with
/// [`prepare_dir`] before use.
pub fn user_dir(var: impl Fn(&str) -> Option<OsString>) -> PathBuf {
    let base = ["XDG_RUNTIME_DIR", "TMPDIR"]
        .iter()
        .find_map(|v| var(v).filter(|d| !d.is_empty()))
        .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    base.join(format!("symmem-{uid}"))
}

/// Makes `file`'s directory ([`path`], [`user_dir`]) where missing, mode 0700, and checks
/// that it is a directory of this user that nobody else may write; says what is wrong
/// otherwise.
pub fn prepare_dir(file: &Path) -> Result<(), String> {
    let Some(dir) = file.parent() else {
        return Ok(());
    };
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("creating {}: {e}", dir.display())),
    }
    let meta =
        std::fs::symlink_metadata(dir).map_err(|e| format!("reading {}: {e}", dir.display()))?;
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o022 != 0 {
        return Err(format!(
            "{} is not a directory of user {uid} that only it may write",
            dir.display()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |k| {
            vars.iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn the_users_file_wins_then_the_runtime_dir_then_tmp() {
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        let name = "symrun-42-hang-reports.jsonl";
        assert_eq!(
            path(
                42,
                lookup(&[(VAR, "/x/r.jsonl"), ("XDG_RUNTIME_DIR", "/run/u")])
            ),
            PathBuf::from("/x/r.jsonl")
        );
        assert_eq!(
            path(
                42,
                lookup(&[("XDG_RUNTIME_DIR", "/run/u"), ("TMPDIR", "/t")])
            ),
            PathBuf::from(format!("/run/u/symmem-{uid}/{name}"))
        );
        assert_eq!(
            path(42, lookup(&[(VAR, ""), ("TMPDIR", "/t")])),
            PathBuf::from(format!("/t/symmem-{uid}/{name}"))
        );
        assert_eq!(
            path(42, lookup(&[])),
            PathBuf::from(format!("/tmp/symmem-{uid}/{name}"))
        );
    }

    #[test]
    fn the_directory_is_made_private_and_a_shared_one_is_refused() {
        let base = std::env::temp_dir().join(format!("symmem-report-dir-{}", std::process::id()));
        let file = base.join("private").join("f.jsonl");
        std::fs::create_dir_all(&base).unwrap();
        prepare_dir(&file).unwrap();
        let mode = std::fs::metadata(file.parent().unwrap()).unwrap().mode();
        assert_eq!(mode & 0o777, 0o700);
        prepare_dir(&file).expect("an existing private directory is fine");
        let shared = base.join("shared").join("f.jsonl");
        std::fs::create_dir_all(shared.parent().unwrap()).unwrap();
        let mut perms = std::fs::metadata(shared.parent().unwrap())
            .unwrap()
            .permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o777);
        std::fs::set_permissions(shared.parent().unwrap(), perms).unwrap();
        let err = prepare_dir(&shared).unwrap_err();
        assert!(err.contains("only it may write"), "{err}");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
