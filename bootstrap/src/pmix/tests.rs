//! The `pmix` bootstrap without a PMIx server: variables, selection, loading libpmix and
//! the C layouts. Runs under real launchers are in the facade's `tests/launchers_pmix.rs`.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use super::ffi::{major_version, MIN_MAJOR};
use super::*;
use crate::select::{decide, BootstrapChoice, Decision, Plan};

/// Where Debian 12's `libpmix-dev` puts `pmix.h`.
const PMIX_INCLUDE: &str = "/usr/lib/x86_64-linux-gnu/pmix2/include";

fn decide_with(
    choice: BootstrapChoice,
    pairs: &[(&str, &str)],
) -> Result<Decision, BootstrapError> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    decide(choice, &|k: &str| map.get(k).cloned())
}

/// What Open MPI 4.1.4's `mpirun -n 2` gives rank 1 (the PMIx part and Open MPI's own).
const MPIRUN_RANK_1: [(&str, &str); 5] = [
    ("PMIX_RANK", "1"),
    ("PMIX_NAMESPACE", "280494081"),
    ("PMIX_SERVER_URI4", "280494080.0;tcp4://127.0.0.1:45123"),
    ("OMPI_COMM_WORLD_SIZE", "2"),
    ("OMPI_COMM_WORLD_RANK", "1"),
];

fn env_of(pairs: &[(&str, &str)]) -> Result<Option<PmixEnv>, BootstrapError> {
    let map: HashMap<&str, &str> = pairs.iter().copied().collect();
    pmix_env(&|k: &str| map.get(k).map(|v| v.to_string()))
}

#[test]
fn no_pmix_variables_is_no_pmix_job() {
    assert_eq!(env_of(&[("PMI_RANK", "0")]).unwrap(), None);
}

#[test]
fn pmix_variables_are_read() {
    let env = env_of(&MPIRUN_RANK_1).unwrap().unwrap();
    assert_eq!(env.rank, Some(1));
    assert_eq!(env.namespace.as_deref(), Some("280494081"));
    assert_eq!(env.libraries, ["libpmix.so.2", "libpmix.so"]);
    assert_eq!(
        env.vars,
        "PMIX_RANK=1, PMIX_NAMESPACE=280494081, PMIX_SERVER_URI4 is set"
    );
    // A server URI alone announces a PMIx job too.
    let env = env_of(&[("PMIX_SERVER_URI41", "x")]).unwrap().unwrap();
    assert_eq!(env.rank, None);
}

#[test]
fn symmem_pmix_lib_replaces_the_default_names() {
    let env = env_of(&[
        ("PMIX_RANK", "0"),
        (ENV_PMIX_LIB, "/opt/pmix/lib/libpmix.so"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(env.libraries, ["/opt/pmix/lib/libpmix.so"]);
}

#[test]
fn a_bad_pmix_rank_is_named() {
    let err = env_of(&[("PMIX_RANK", "one")]).unwrap_err().to_string();
    assert!(err.contains("PMIX_RANK"), "{err}");
}

#[test]
fn auto_picks_pmix_under_mpirun() {
    let d = decide_with(BootstrapChoice::Auto, &MPIRUN_RANK_1).unwrap();
    if cfg!(feature = "mpi") {
        // The `mpi` feature keeps MPI preferred under MPI launchers.
        assert_eq!(d.plan, Plan::Mpi, "{d:?}");
    } else {
        assert!(matches!(d.plan, Plan::Pmix(_)), "{d:?}");
        assert!(d.why.contains("PMIX_RANK=1"), "{}", d.why);
    }
    // Named, PMIx wins with either build.
    let d = decide_with(BootstrapChoice::Pmix, &MPIRUN_RANK_1).unwrap();
    assert!(matches!(d.plan, Plan::Pmix(_)), "{d:?}");
    assert!(d.why.starts_with("SYMMEM_BOOTSTRAP=pmix"), "{}", d.why);
}

#[test]
fn pmi_1_comes_before_pmix() {
    let both = [
        ("PMI_FD", "5"),
        ("PMI_RANK", "0"),
        ("PMI_SIZE", "2"),
        ("PMIX_RANK", "0"),
    ];
    let d = decide_with(BootstrapChoice::Auto, &both).unwrap();
    if !cfg!(feature = "mpi") {
        assert!(matches!(d.plan, Plan::Pmi(_)), "{d:?}");
    }
}

#[test]
fn torchrun_comes_before_pmix() {
    let mut vars = MPIRUN_RANK_1.to_vec();
    vars.extend([
        ("RANK", "3"),
        ("WORLD_SIZE", "4"),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", "29500"),
        ("TORCHELASTIC_RUN_ID", "x"),
        ("GROUP_WORLD_SIZE", "2"),
    ]);
    let d = decide_with(BootstrapChoice::Auto, &vars).unwrap();
    assert!(matches!(d.plan, Plan::Env(_)), "{d:?}");
}

#[test]
fn srun_mpi_pmix_must_agree_with_slurm() {
    let srun = |procid: &'static str| {
        vec![
            ("PMIX_RANK", "2"),
            ("PMIX_NAMESPACE", "slurm.pmix.7.0"),
            ("SLURM_PROCID", procid),
            ("SLURM_NTASKS", "4"),
            ("SLURM_STEP_NODELIST", "node1"),
            ("SLURM_JOB_ID", "7"),
            ("SLURM_STEP_ID", "0"),
        ]
    };
    let d = decide_with(BootstrapChoice::Auto, &srun("2")).unwrap();
    if !cfg!(feature = "mpi") {
        assert!(matches!(d.plan, Plan::Pmix(_)), "{d:?}");
        let err = decide_with(BootstrapChoice::Auto, &srun("1"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("SLURM_PROCID=1") && err.contains("PMIX_RANK=2"),
            "{err}"
        );
    }
}

#[test]
fn forcing_pmix_without_pmix_variables_says_how_to_launch() {
    let err = decide_with(BootstrapChoice::Pmix, &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("SYMMEM_BOOTSTRAP=pmix")
            && err.contains("PMIX_RANK")
            && err.contains("mpirun"),
        "{err}"
    );
    let err = decide_with(
        BootstrapChoice::Pmix,
        &[
            ("SYMMEM_LAUNCH_ADDR", "127.0.0.1:1"),
            (
                "SYMMEM_LAUNCH_SECRET",
                "abababababababababababababababababababababababababababababababab",
            ),
            ("SYMMEM_LAUNCH_RANK", "0"),
            ("SYMMEM_LAUNCH_SIZE", "2"),
        ],
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("symrun"), "{err}");
}

#[test]
fn the_choice_parses_and_prints() {
    assert_eq!("pmix".parse::<BootstrapChoice>(), Ok(BootstrapChoice::Pmix));
    assert_eq!(BootstrapChoice::Pmix.to_string(), "pmix");
    let err = "pmx".parse::<BootstrapChoice>().unwrap_err();
    assert!(err.contains("pmix"), "{err}");
}

#[test]
fn a_missing_library_is_named() {
    let err = match ffi::Lib::open(&["libpmix-not-here.so.9".to_string()]) {
        Ok(_) => panic!("a nonexistent library loaded"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("libpmix-not-here.so.9") && err.contains("SYMMEM_PMIX_LIB"),
        "{err}"
    );
}

#[test]
fn a_library_that_is_not_libpmix_is_named_with_the_symbol() {
    let err = match ffi::Lib::open(&["libc.so.6".to_string()]) {
        Ok(_) => panic!("libc passed as libpmix"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("libc.so.6") && err.contains("PMIx_Get_version"),
        "{err}"
    );
}

#[test]
fn versions_are_parsed() {
    let v4 = "OpenPMIx 4.2.2rc2 (PMIx Standard: 4.2, Stable ABI: 0.0, Provisional ABI: 0.0)";
    assert_eq!(major_version(v4), Some(4));
    assert_eq!(
        major_version("OpenPMIx 3.2.3 (PMIx Standard: 3.1)"),
        Some(3)
    );
    assert_eq!(major_version("PMIx v2.1.1"), Some(2));
    assert_eq!(major_version("PMIx"), None);
}

#[test]
fn pmix_timeouts_round_up_to_whole_seconds() {
    assert_eq!(pmix_seconds(Duration::from_millis(1500)), 2);
    assert_eq!(pmix_seconds(Duration::from_millis(1)), 1);
    assert_eq!(pmix_seconds(Duration::from_secs(60)), 60);
    assert_eq!(pmix_seconds(crate::duration::MAX_WAIT), 31_536_000);
}

#[test]
fn the_installed_libpmix_loads_when_present() {
    match ffi::Lib::open(&[DEFAULT_NAMES[0].to_string()]) {
        Ok(lib) => {
            assert!(
                major_version(&lib.version).is_some_and(|m| m >= MIN_MAJOR),
                "{}",
                lib.version
            );
            assert_eq!(lib.status_name(ffi::SUCCESS), "SUCCESS");
        }
        Err(e) => println!("SKIPPED: {} does not load here: {e}", DEFAULT_NAMES[0]),
    }
}

/// The C side of the layout test: prints `name value` lines in [`ffi::layout::facts`]'s
/// order.
const LAYOUT_C: &str = r#"
#include <stdio.h>
#include <stddef.h>
#include <pmix.h>
int main(void) {
    printf("proc_size %zu\n", sizeof(pmix_proc_t));
    printf("proc_rank %zu\n", offsetof(pmix_proc_t, rank));
    printf("value_size %zu\n", sizeof(pmix_value_t));
    printf("value_data %zu\n", offsetof(pmix_value_t, data));
    printf("info_size %zu\n", sizeof(pmix_info_t));
    printf("info_flags %zu\n", offsetof(pmix_info_t, flags));
    printf("info_value %zu\n", offsetof(pmix_info_t, value));
    printf("nspace_len %d\n", PMIX_MAX_NSLEN + 1);
    printf("key_len %d\n", PMIX_MAX_KEYLEN + 1);
    printf("wildcard %u\n", (unsigned)PMIX_RANK_WILDCARD);
    return 0;
}
"#;

#[test]
fn declared_layouts_match_pmix_h_when_installed() {
    if !Path::new(PMIX_INCLUDE).join("pmix.h").exists() {
        println!("SKIPPED: {PMIX_INCLUDE}/pmix.h is absent (install libpmix-dev); the layouts are documented in pmix/ffi.rs");
        return;
    }
    let dir = std::env::temp_dir().join(format!("symmem-pmix-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&src, LAYOUT_C).unwrap();
    let built = Command::new("cc")
        .arg(format!("-I{PMIX_INCLUDE}"))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output();
    let built = match built {
        Ok(out) if out.status.success() => out,
        Ok(out) => panic!(
            "compiling against {PMIX_INCLUDE}/pmix.h failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => {
            println!("SKIPPED: no C compiler (cc) to read pmix.h with: {e}");
            return;
        }
    };
    drop(built);
    let out = Command::new(&exe).output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let c: HashMap<&str, usize> = text
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k, v.parse().unwrap()))
        .collect();
    for (name, rust) in ffi::layout::facts() {
        assert_eq!(c[name], rust, "{name}: C says {}, Rust {rust}", c[name]);
    }
    assert_eq!(c["nspace_len"], ffi::NSPACE_LEN);
    assert_eq!(c["key_len"], ffi::KEY_LEN);
    assert_eq!(c["wildcard"], ffi::RANK_WILDCARD as usize);
}

#[test]
fn a_step_that_overruns_the_deadline_fails_naming_it() {
    let timeout = Duration::from_millis(200);
    let start = std::time::Instant::now();
    let deadline = crate::duration::deadline_after(timeout);
    let err = bounded("PMIx_Fence", "PMIX_RANK=1", timeout, deadline, || {
        std::thread::sleep(Duration::from_secs(5));
        Ok(())
    })
    .unwrap_err()
    .to_string();
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    assert!(
        err.contains("PMIx_Fence")
            && err.contains("SYMMEM_BOOTSTRAP_TIMEOUT")
            && err.contains("PMIX_RANK=1"),
        "{err}"
    );
}

#[test]
fn pmix_errors_carry_the_launcher_variables_and_a_hint() {
    let vars = "PMIX_RANK=0, PMIX_NAMESPACE=x";
    let fail = |status| {
        let deadline = crate::duration::deadline_after(Duration::from_secs(5));
        bounded(
            "PMIx_Init",
            vars,
            Duration::from_secs(5),
            deadline,
            move || {
                Err::<(), _>(BootstrapError::Pmix {
                    call: "PMIx_Init".into(),
                    status,
                    name: "UNREACHABLE".into(),
                    context: String::new(),
                })
            },
        )
        .unwrap_err()
        .to_string()
    };
    let err = fail(ffi::ERR_UNREACH);
    assert!(
        err.contains("PMIx_Init failed with UNREACHABLE (PMIx status -25)")
            && err.contains(vars)
            && err.contains("still running"),
        "{err}"
    );
    let err = fail(ffi::ERR_PARTIAL_SUCCESS);
    assert!(err.contains("ended before reaching the fence"), "{err}");
}
