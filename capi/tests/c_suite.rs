//! The C test suite (`capi/tests/c/*.c`, written against OpenSHMEM 1.5 and NVSHMEM's host
//! API): each program is built with `symcc` (generated next to `libsymmem.so`) and run
//! under `symrun -np N` on 2 and 4 PEs and on 2 simulated nodes of 1 and 2 PEs
//! (`SYMMEM_SIMULATE_NODES=2`, the socket transport between them), with P2P off, and in
//! weak-ordering mode (`SYMMEM_ORDERING=weak`) on 2 nodes; three also run under
//! Open MPI's `mpirun` (the pmix bootstrap). Every PE must print `PE i: <program> ok`.
//! `statics.c` also runs linked with `libsymmem.a`. `errors.c` checks the C error
//! contract: a bad PE or a non-symmetric address ends the job with a message naming the
//! routine, the PE and the address. The last tests check that `shmem.h` and the library
//! agree, that `symcc` builds in two steps, and that `shmem.h` works from C++.
//!
//! Needs a C compiler (`cc`, or `SYMCC_CC`) and the workspace's `symrun` (built by
//! `cargo test --workspace`, or `cargo build --bin symrun`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use symmem_test_harness::{run_job, Job, Launcher};

/// `target/<profile>`: where cargo put this test's binary's parent `deps/`, `libsymmem.so`,
/// `symcc` and `symrun`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("the test binary lives in target/<profile>/deps")
        .to_path_buf()
}

/// The `symrun` launcher, which `cargo test --workspace` builds.
fn symrun() -> PathBuf {
    let p = profile_dir().join("symrun");
    assert!(
        p.exists(),
        "{} is missing: run `cargo build --bin symrun` (cargo test --workspace builds it)",
        p.display()
    );
    p
}

/// Compiles `capi/tests/c/<name>.c` with symcc once per test binary; returns the program.
fn build(name: &str) -> PathBuf {
    build_as(name, name, &[])
}

/// Compiles `capi/tests/c/<name>.c` with symcc and `extra` flags into `out_name`, once per
/// test binary.
fn build_as(name: &str, out_name: &str, extra: &[&str]) -> PathBuf {
    static BUILT: OnceLock<std::sync::Mutex<Vec<String>>> = OnceLock::new();
    let dir = profile_dir().join("capi-tests");
    std::fs::create_dir_all(&dir).expect("creating target/<profile>/capi-tests");
    let out = dir.join(out_name);
    let built = BUILT.get_or_init(Default::default);
    let mut built = built.lock().unwrap_or_else(|p| p.into_inner());
    if built.iter().any(|b| b == out_name) {
        return out;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(format!("{name}.c"));
    let symcc = profile_dir().join("symcc");
    let lib = profile_dir().join("libsymmem.so");
    assert!(
        lib.exists(),
        "{} is missing: build the package symmem-capi",
        lib.display()
    );
    // A unique temporary name, then a rename: test binaries may build the same program
    // at once.
    let tmp = dir.join(format!("{out_name}.{}.tmp", std::process::id()));
    let result = Command::new(&symcc)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-g"])
        .args(extra)
        .arg(&src)
        .arg("-o")
        .arg(&tmp)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", symcc.display()));
    assert!(
        result.status.success(),
        "symcc {} failed:\n{}{}",
        src.display(),
        String::from_utf8_lossy(&result.stdout),
        String::from_utf8_lossy(&result.stderr)
    );
    std::fs::rename(&tmp, &out).expect("renaming the built program");
    built.push(out_name.to_string());
    out
}

/// Runs `name` on `n` PEs under `launcher` with `env`.
fn run(launcher: &Launcher, name: &str, n: usize, env: &[(&str, &str)]) -> Job {
    let prog = build(name);
    let mut all = vec![("SYMMEM_TIMEOUT", "100")];
    all.extend_from_slice(env);
    run_job(launcher, n, prog.to_str().expect("UTF-8 path"), &[], &all)
}

/// Runs `name` on `n` PEs under symrun; every PE must report `<name> ok`.
fn run_ok(name: &str, n: usize, env: &[(&str, &str)]) {
    let job = run(&Launcher::Symrun(symrun()), name, n, env);
    job.assert_ok(n, name);
}

/// Two simulated nodes, the socket transport between them.
const TWO_NODES: [(&str, &str); 2] = [
    ("SYMMEM_SIMULATE_NODES", "2"),
    ("SYMMEM_REMOTE_TRANSPORT", "socket"),
];

macro_rules! c_programs {
    ($($name:ident),* $(,)?) => {
        mod on_2_pes {
            $( #[test] fn $name() { super::run_ok(stringify!($name), 2, &[]); } )*
        }
        mod on_4_pes {
            $( #[test] fn $name() { super::run_ok(stringify!($name), 4, &[]); } )*
        }
        /// 2 nodes × 1 PE: every operation crosses the socket transport.
        mod on_2_nodes_of_1_pe {
            $( #[test] fn $name() { super::run_ok(stringify!($name), 2, &super::TWO_NODES); } )*
        }
        /// 4 PEs with P2P off: no PE maps another's heap (SHMEM_TEAM_SHARED is each PE).
        mod p2p_off {
            $( #[test] fn $name() { super::run_ok(stringify!($name), 4, &[("SYMMEM_DISABLE_P2P", "1")]); } )*
        }
        /// 2 nodes × 2 PEs in weak-ordering mode: puts and signals are buffered and
        /// delivered in a seeded order, so a program relying on an order the
        /// specification does not give fails.
        mod weak_ordering {
            $( #[test] fn $name() {
                super::run_ok(stringify!($name), 4, &[
                    ("SYMMEM_SIMULATE_NODES", "2"),
                    ("SYMMEM_REMOTE_TRANSPORT", "socket"),
                    ("SYMMEM_ORDERING", "weak"),
                ]);
            } )*
        }
        /// 2 nodes × 2 PEs: direct within a node, the socket transport across.
        mod on_2_nodes_of_2_pes {
            $( #[test] fn $name() { super::run_ok(stringify!($name), 4, &super::TWO_NODES); } )*
        }
    };
}

c_programs!(
    setup,
    align,
    rma,
    amo,
    sync,
    teams,
    collectives,
    active_set,
    contexts,
    nvshmem,
    statics,
    generic,
    empty_collectives
);

/// One PE passing 0 elements where the others pass 1, under `SYMMEM_CHECK_COLLECTIVES=1`:
/// every PE's call fails, or (the collectives built from barriers) every PE leaves it in
/// step; the next broadcast is right. Before, PE 0 ran a bare team barrier instead of the
/// collective and returned 0 while the others' collective paired with its next call.
#[test]
fn a_pe_passing_no_elements_takes_part_in_the_others_collective() {
    let check = ("SYMMEM_CHECK_COLLECTIVES", "1");
    run_ok("empty_collectives", 2, &[check]);
    run_ok("empty_collectives", 4, &[check]);
    run_ok("empty_collectives", 4, &[check, TWO_NODES[0], TWO_NODES[1]]);
}

/// Symmetric statics in a program linked with `libsymmem.a` (`symcc -static-symmem`),
/// where the runtime's own statics share the program's data segment.
#[test]
fn statics_with_the_static_library() {
    let prog = build_as("statics", "statics-static", &["-static-symmem"]);
    for (n, env) in [(2, &[][..]), (4, &TWO_NODES[..])] {
        let mut all = vec![("SYMMEM_TIMEOUT", "100")];
        all.extend_from_slice(env);
        let job = run_job(
            &Launcher::Symrun(symrun()),
            n,
            prog.to_str().expect("UTF-8 path"),
            &[],
            &all,
        );
        job.assert_ok(n, "statics");
    }
}

/// The same program under Open MPI's `mpirun` (PEs join through PMIx).
#[test]
fn under_mpirun() {
    for name in ["setup", "rma", "statics"] {
        let job = run(&Launcher::MpirunPmix, name, 2, &[]);
        job.assert_ok(2, name);
    }
}

/// Runs `errors.c` with `case` on 2 PEs: the job must fail, after PE 0 got to the bad
/// put, with a log line containing every one of `expect`.
fn bad_put_ends_the_job(case: &str, expect: &[&str]) {
    let prog = build("errors");
    let job = run_job(
        &Launcher::Symrun(symrun()),
        2,
        prog.to_str().expect("UTF-8 path"),
        &[case],
        &[("SYMMEM_TIMEOUT", "100")],
    );
    if job.status.success() {
        job.fail("the job succeeded");
    }
    if !job.stdout.contains("PE 0: errors reached the bad put") {
        job.fail("the program did not get to the bad put");
    }
    if job.stdout.contains("the bad put returned") {
        job.fail("the bad put returned");
    }
    if !job
        .stderr
        .lines()
        .any(|l| expect.iter().all(|e| l.contains(e)))
    {
        job.fail(&format!("no error line containing all of {expect:?}"));
    }
}

/// A put to a PE that does not exist ends the job; the log names the routine, the PE and
/// the address.
#[test]
fn bad_pe_ends_the_job_naming_routine_pe_and_address() {
    bad_put_ends_the_job(
        "pe",
        &["PE 0: shmem_long_put", "PE 7 does not exist", "address 0x"],
    );
}

/// A put to a stack variable (not symmetric) ends the job; the log names the routine,
/// the address, the size and the heap's range.
#[test]
fn non_symmetric_address_ends_the_job_naming_it() {
    bad_put_ends_the_job(
        "address",
        &[
            "PE 0: shmem_long_put",
            "(1 elements of 8 bytes) is not inside the symmetric heap of PE 0",
        ],
    );
}

/// `shmem_global_exit(status)` from the last PE, while the others wait on a flag or in a
/// barrier: the job exits with `status` (0 included), on one node and on two.
#[test]
fn global_exit_ends_the_job_with_its_status() {
    let prog = build("global_exit");
    for env in [&[][..], &TWO_NODES[..]] {
        for status in [0, 3] {
            let mut all = vec![("SYMMEM_TIMEOUT", "100")];
            all.extend_from_slice(env);
            let arg = status.to_string();
            let job = run_job(
                &Launcher::Symrun(symrun()),
                4,
                prog.to_str().expect("UTF-8 path"),
                &[&arg],
                &all,
            );
            if job.status.code() != Some(status) {
                job.fail(&format!("expected exit code {status} ({env:?})"));
            }
            if !job.stdout.contains("PE 3: calling shmem_global_exit") {
                job.fail("PE 3 did not get to shmem_global_exit");
            }
            if job.stdout.contains("got past the wait") {
                job.fail("a PE got past its wait");
            }
        }
    }
}

/// `shmem.h` from C++ (`SYMCC_CC=c++`, or `$CXX`): `capi/tests/cxx/header.cpp` uses the
/// typed API, a context, a team reduction and the inline long double and complex
/// reductions; it builds with `-Wall -Wextra -Werror` and runs on 2 PEs.
#[test]
fn shmem_h_works_from_cxx() {
    let dir = profile_dir().join("capi-tests");
    std::fs::create_dir_all(&dir).expect("creating target/<profile>/capi-tests");
    let out = dir.join(format!("cxx-header.{}", std::process::id()));
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cxx/header.cpp");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let built = Command::new(profile_dir().join("symcc"))
        .env("SYMCC_CC", &cxx)
        .args(["-std=c++17", "-Wall", "-Wextra", "-Werror", "-O2"])
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .output()
        .expect("running symcc");
    assert!(
        built.status.success(),
        "SYMCC_CC={cxx} symcc {} failed:\n{}",
        src.display(),
        String::from_utf8_lossy(&built.stderr)
    );
    let job = run_job(
        &Launcher::Symrun(symrun()),
        2,
        out.to_str().expect("UTF-8 path"),
        &[],
        &[("SYMMEM_TIMEOUT", "100")],
    );
    let _ = std::fs::remove_file(&out);
    job.assert_ok(2, "cxx");
}

/// Every routine `shmem.h` declares (outside its inline wrappers) is exported by
/// `libsymmem.so`, and the library exports no `shmem_` routine the header lacks.
#[test]
fn shmem_h_and_the_library_agree() {
    let header = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/shmem.h");
    let pre = Command::new(std::env::var("SYMCC_CC").unwrap_or_else(|_| "cc".into()))
        .args(["-E", "-P", "-x", "c"])
        .arg(&header)
        .output()
        .expect("running the C preprocessor");
    assert!(pre.status.success(), "cc -E {} failed", header.display());
    let text = String::from_utf8_lossy(&pre.stdout);
    let mut declared: Vec<String> = text
        .split(';')
        .filter(|decl| !decl.contains("static inline"))
        .flat_map(called_names)
        .collect();
    declared.sort();
    declared.dedup();
    let lib = profile_dir().join("libsymmem.so");
    let nm = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&lib)
        .output()
        .expect("running nm");
    assert!(nm.status.success(), "nm {} failed", lib.display());
    let mut exported: Vec<String> = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter(|s| s.starts_with("shmem_"))
        .map(str::to_string)
        .collect();
    exported.sort();
    exported.dedup();
    let missing: Vec<_> = declared.iter().filter(|d| !exported.contains(d)).collect();
    let undeclared: Vec<_> = exported.iter().filter(|e| !declared.contains(e)).collect();
    assert!(
        missing.is_empty() && undeclared.is_empty(),
        "declared in shmem.h but not exported: {missing:?}; exported but not declared: {undeclared:?}"
    );
    assert!(
        declared.len() > 900,
        "only {} routines declared",
        declared.len()
    );
}

/// The `shmem_` identifiers in `text` that are followed by `(` (declarations and calls).
fn called_names(text: &str) -> Vec<String> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(|c: char| ident(c)) {
        let word_len = rest[at..]
            .find(|c: char| !ident(c))
            .unwrap_or(rest.len() - at);
        let word = &rest[at..at + word_len];
        let after = rest[at + word_len..].trim_start();
        if word.starts_with("shmem_") && after.starts_with('(') {
            names.push(word.to_string());
        }
        rest = &rest[at + word_len..];
    }
    names
}

/// `symcc` works like `oshcc` in a two-step build (`-c`, then a link of the object, with
/// `-Werror` and no warning about unused linker flags), `--showme:link` names the
/// library, and the program runs as one PE without a launcher.
#[test]
fn symcc_compiles_and_links_in_separate_steps() {
    let symcc = profile_dir().join("symcc");
    let dir = profile_dir().join("capi-tests");
    std::fs::create_dir_all(&dir).expect("creating the output directory");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/setup.c");
    let obj = dir.join(format!("setup.{}.o", std::process::id()));
    let exe = dir.join(format!("setup-two-step.{}", std::process::id()));
    let step = |args: &[&std::ffi::OsStr]| {
        let out = Command::new(&symcc)
            .args(args)
            .output()
            .expect("running symcc");
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "symcc {args:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    step(&[
        "-c".as_ref(),
        "-Wall".as_ref(),
        "-Werror".as_ref(),
        "-DUNUSED_MACRO=1".as_ref(),
        src.as_os_str(),
        "-o".as_ref(),
        obj.as_os_str(),
    ]);
    step(&[obj.as_os_str(), "-o".as_ref(), exe.as_os_str()]);
    assert!(step(&["--showme:link".as_ref()]).contains("-lsymmem"));
    let run = Command::new(&exe)
        .env("SYMMEM_TIMEOUT", "60")
        .output()
        .expect("running the program");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success() && stdout.contains("PE 0: setup ok"),
        "{}: {stdout}\n{}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    let _ = std::fs::remove_file(obj);
    let _ = std::fs::remove_file(exe);
}
