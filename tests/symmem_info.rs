//! `symmem-info` explains the CPU debugging modes with the values it finds in the
//! environment: the ordering mode and its seed, the lane schedule, the stack size, and how
//! to debug a kernel on CPU PEs.

use std::process::Command;

/// `symmem-info`'s output with `env` set and every other `SYMMEM_*` variable removed.
fn info(env: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_symmem-info"));
    for (k, _) in std::env::vars() {
        if k.starts_with("SYMMEM_") {
            cmd.env_remove(k);
        }
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().expect("running symmem-info");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "symmem-info failed:\n{stdout}");
    stdout
}

/// The lines of `out` from the CPU-modes section on.
fn section(out: &str) -> &str {
    let start = out
        .find("kernels on CPU PEs")
        .unwrap_or_else(|| panic!("no CPU-modes section in:\n{out}"));
    &out[start..]
}

fn assert_has(text: &str, needles: &[&str]) {
    for n in needles {
        assert!(text.contains(n), "{n:?} missing from:\n{text}");
    }
}

#[test]
fn the_default_modes_are_explained() {
    let out = info(&[]);
    assert_has(
        section(&out),
        &[
            "ordering (SYMMEM_ORDERING): strict",
            "a missing fence goes unseen",
            "thread index order",
            "(SYMMEM_EXEC_STACK_SIZE): 256 KiB",
            "SYMMEM_ORDERING=weak SYMMEM_ORDERING_SEED=$s",
            "rerun with both to replay",
        ],
    );
}

#[test]
fn weak_mode_its_seed_the_schedule_and_the_stack_size_are_shown() {
    let out = info(&[
        ("SYMMEM_ORDERING", "weak"),
        ("SYMMEM_ORDERING_SEED", "5"),
        ("SYMMEM_EXEC_SEED", "3"),
        ("SYMMEM_EXEC_STACK_SIZE", "1M"),
    ]);
    assert_has(
        section(&out),
        &[
            "ordering (SYMMEM_ORDERING): weak",
            "seed 5 (SYMMEM_ORDERING_SEED)",
            "drawn from SYMMEM_EXEC_SEED=3",
            "(SYMMEM_EXEC_STACK_SIZE): 1024 KiB",
        ],
    );
    let out = info(&[("SYMMEM_ORDERING", "weak")]);
    assert_has(section(&out), &["drawn from the clock by PE 0"]);
}
