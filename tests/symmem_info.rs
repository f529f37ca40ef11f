//! `symmem-info`: every variable of the configuration table with its default (and the
//! table matches what the code reads and what the book's configuration chapter lists), the build features and
//! devices, the CPU debugging modes with the values it finds in the environment (the
//! ordering mode and its seed, the lane schedule, the stack size, how to debug a kernel on
//! CPU PEs), and with `--pes N` the route of every PE pair: direct within a (simulated)
//! node, sockets across, weak ordering when set; bad `--pes` values name the flag.

use std::process::Command;

/// `symmem-info`'s output with `env` set and every other `SYMMEM_*` variable removed.
fn info(env: &[(&str, &str)]) -> String {
    info_args(&[], env)
}

/// `symmem-info ARGS`'s output with `env` set and every other `SYMMEM_*` variable removed.
fn info_args(args: &[&str], env: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_symmem-info"));
    cmd.args(args);
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

/// Every variable of the configuration table, printed with its default; the table is the
/// one list of variables, so the printout, the book and the code cannot drift apart.
#[test]
fn every_variable_of_the_table_is_printed_with_its_default() {
    let out = info(&[]);
    for var in symmem::config::VARIABLES {
        assert_has(
            &out,
            &[
                &format!("\n  {:<26} = ", var.name),
                &format!("[default {}]", var.default),
            ],
        );
    }
    assert_has(
        &out,
        &[
            "build features: cuda on, ib ",
            "devices:\n  GPUs: ",
            "\n  RDMA: ",
        ],
    );
}

/// The repository's root (this package's manifest directory).
fn repo() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `SYMMEM_*` name mentioned in the library sources is in the table, except the
/// launcher's and the tests' internal variables (`SYMMEM_LAUNCH_*`, `SYMMEM_TEST_*`, which
/// init does not warn about), the PTX symbols `SYMMEM_DEVICE_STATE` and
/// `SYMMEM_MAX_THREADS_<kernel>` (the launch-bound markers), `SYMMEM_DEVICE_RUSTC` (set by
/// the device crate's build script for the kernel-library ABI check), and the device
/// crate's cargo metadata (`DEP_SYMMEM_*`).
#[test]
fn every_variable_the_code_names_is_in_the_table() {
    fn sources(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    for dir in [
        "runtime/src",
        "bootstrap/src",
        "src",
        "device/src",
        "ptx-build/src",
    ] {
        sources(&repo().join(dir), &mut files);
    }
    let known = |name: &str| {
        symmem::config::VARIABLES.iter().any(|v| v.name == name)
            || name.starts_with("SYMMEM_LAUNCH")
            || name.starts_with("SYMMEM_TEST")
            || name == "SYMMEM_DEVICE_STATE"
            || name == "SYMMEM_MAX_THREADS"
            || name == "SYMMEM_DEVICE_RUSTC"
            // `SYMMEM_*`: the prefix, in prose.
            || name == "SYMMEM"
    };
    let mut unknown = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a source file");
        let mut rest = text.as_str();
        while let Some(at) = rest.find("SYMMEM_") {
            // `DEP_SYMMEM_*`: symmem-device's `links` metadata, which cargo hands to the
            // build scripts of crates that depend on it, not a variable users set.
            let metadata = rest[..at].ends_with("DEP_");
            let tail = &rest[at..];
            let len = tail
                .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(tail.len());
            let name = tail[..len].trim_end_matches('_');
            if !metadata && !known(name) {
                unknown.push(format!("{name} ({})", file.display()));
            }
            rest = &tail[len..];
        }
    }
    assert!(
        files.len() > 50,
        "only {} source files found under {}",
        files.len(),
        repo().display()
    );
    assert!(
        unknown.is_empty(),
        "named in the code but missing from symmem::config::VARIABLES: {unknown:?}"
    );
}

/// The book's configuration chapter lists exactly the table's variables, in its order,
/// each with the default its declaration gives (backticks aside).
#[test]
fn the_book_lists_exactly_the_tables_variables_with_their_defaults() {
    let chapter = repo().join("docs/src/configuration.md");
    let text = std::fs::read_to_string(&chapter).expect("docs/src/configuration.md");
    // The chapter's own section, before its first subsection.
    let section = &text[..text.find("\n## ").unwrap_or(text.len())];
    // `| `NAME` | default | meaning |` rows: (name, default without backticks).
    let listed: Vec<(&str, String)> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once("` | "))
        .map(|(name, rest)| {
            let default = rest.split_once(" | ").map_or(rest, |(d, _)| d);
            (name, default.replace('`', ""))
        })
        .collect();
    let table: Vec<(&str, String)> = symmem::config::VARIABLES
        .iter()
        .map(|v| (v.name, v.default.to_string()))
        .collect();
    for (name, default) in &table {
        match listed.iter().find(|(n, _)| n == name) {
            None => panic!("{name} is missing from the table in docs/src/configuration.md"),
            Some((_, d)) => assert_eq!(
                d, default,
                "docs/src/configuration.md gives {name} another default than its declaration"
            ),
        }
    }
    for (name, _) in &listed {
        assert!(
            table.iter().any(|(n, _)| n == name),
            "docs/src/configuration.md lists {name}, which is not in the table"
        );
    }
    let names = |l: &[(&str, String)]| l.iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>();
    assert_eq!(
        names(&listed),
        names(&table),
        "docs/src/configuration.md lists the variables in another order than the table"
    );
}

/// `symmem-info ARGS` (a `--pes` job) with `env` and every other `SYMMEM_*` variable
/// removed, run to its end (at most two minutes) and checked to succeed.
fn info_job(args: &[&str], env: &[(&str, &str)]) -> symmem_test_harness::Job {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_symmem-info"));
    for (k, _) in std::env::vars() {
        if k.starts_with("SYMMEM_") {
            cmd.env_remove(k);
        }
    }
    cmd.args(args)
        .env("SYMMEM_SYMMETRIC_SIZE", "64M")
        .env("SYMMEM_BOOTSTRAP_TIMEOUT", "60")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().expect("starting symmem-info");
    let job = symmem_test_harness::wait_job(child, std::time::Duration::from_secs(120));
    job.assert_success();
    job
}

/// `symmem-info --pes N` with `env`: the routes it prints, `(from, to) -> path`.
fn routes(n: usize, env: &[(&str, &str)]) -> std::collections::BTreeMap<(usize, usize), String> {
    let job = info_job(&["--pes", &n.to_string()], env);
    let topology = job
        .stdout
        .find(&format!("topology of {n} local PEs"))
        .map(|at| &job.stdout[at..])
        .unwrap_or_else(|| job.fail("no topology section"));
    let mut routes = std::collections::BTreeMap::new();
    for line in topology.lines().map(str::trim) {
        // "PE 0 -> PE 1: socket: different nodes; ..."
        let Some((pair, rest)) = line.split_once(": ") else {
            continue;
        };
        let Some((from, to)) = pair.split_once(" -> ") else {
            continue;
        };
        let pe = |s: &str| s.strip_prefix("PE ").and_then(|p| p.parse::<usize>().ok());
        let (Some(from), Some(to)) = (pe(from), pe(to)) else {
            job.fail(&format!("bad route line {line:?}"));
        };
        let path = rest.split_once(": ").map_or(rest, |(p, _)| p);
        routes.insert((from, to), path.to_string());
    }
    for pe in 0..n {
        if !topology.contains(&format!("PE {pe}: node ")) {
            job.fail(&format!("PE {pe}'s node is not shown"));
        }
    }
    if routes.len() != n * (n - 1) {
        job.fail(&format!("{} routes for {n} PEs: {routes:?}", routes.len()));
    }
    routes
}

/// `--pes N --json`: one document, the report with every PE's part under `pes`, in PE
/// order: its CPUs (bound one core each here when the machine has a core per PE) and its
/// route to every other PE.
#[test]
fn json_with_pes_adds_every_pe_and_its_routes() {
    let job = info_job(&["--pes", "2", "--json"], &[("SYMMEM_SIMULATE_NODES", "2")]);
    let doc: serde_json::Value = serde_json::from_str(&job.stdout)
        .unwrap_or_else(|e| job.fail(&format!("not one JSON document: {e}")));
    assert_eq!(doc["symmem"], env!("CARGO_PKG_VERSION"));
    assert!(doc["variables"]["runtime"].is_array(), "{doc:#}");
    let pes = doc["pes"]
        .as_array()
        .unwrap_or_else(|| job.fail("no pes list"));
    assert_eq!(pes.len(), 2, "{doc:#}");
    for (i, pe) in pes.iter().enumerate() {
        let other = 1 - i;
        assert_eq!(pe["pe"], i, "{pe:#}");
        assert!(pe["cpus"].as_str().is_some_and(|c| !c.is_empty()), "{pe:#}");
        assert!(
            pe["cpus_allowed"].as_str().is_some_and(|c| !c.is_empty()),
            "{pe:#}"
        );
        assert!(pe["node"].as_str().is_some_and(|n| !n.is_empty()), "{pe:#}");
        let routes = pe["routes"]
            .as_array()
            .unwrap_or_else(|| job.fail("no routes"));
        assert_eq!(routes.len(), 1, "{pe:#}");
        assert_eq!(routes[0]["to"], other, "{pe:#}");
        assert_eq!(routes[0]["path"], "socket", "two simulated nodes: {pe:#}");
        assert!(
            routes[0]["why"]
                .as_str()
                .is_some_and(|w| w.contains("different nodes")),
            "{pe:#}"
        );
    }
    assert_ne!(pes[0]["node"], pes[1]["node"], "two simulated nodes");
}

#[test]
fn two_simulated_nodes_of_one_pe_talk_over_sockets() {
    let r = routes(2, &[("SYMMEM_SIMULATE_NODES", "2")]);
    assert_eq!(r[&(0, 1)], "socket", "{r:?}");
    assert_eq!(r[&(1, 0)], "socket", "{r:?}");
}

#[test]
fn four_pes_on_two_simulated_nodes_map_within_and_use_sockets_across() {
    let r = routes(4, &[("SYMMEM_SIMULATE_NODES", "2")]);
    for ((from, to), path) in &r {
        // PE p is on simulated node p * 2 / 4.
        let want = if from / 2 == to / 2 {
            "direct p2p"
        } else {
            "socket"
        };
        assert_eq!(path, want, "PE {from} -> PE {to}: {r:?}");
    }
}

#[test]
fn weak_ordering_is_shown_on_every_route() {
    let r = routes(2, &[("SYMMEM_ORDERING", "weak")]);
    assert_eq!(r[&(0, 1)], "weak ordering over direct p2p", "{r:?}");
    assert_eq!(r[&(1, 0)], "weak ordering over direct p2p", "{r:?}");
}

#[test]
fn bad_pes_values_are_errors_naming_the_flag() {
    for bad in [
        &["--pes", "0"][..],
        &["--pes", "abc"],
        &["--pes"],
        &["--pes", "-1"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_symmem-info"))
            .args(bad)
            .output()
            .expect("running symmem-info");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {stderr}");
        assert!(stderr.contains("--pes"), "{bad:?}: {stderr}");
        if let Some(v) = bad.get(1) {
            assert!(stderr.contains(&format!("{v:?}")), "{bad:?}: {stderr}");
        }
        assert!(out.stdout.is_empty(), "{bad:?} printed a report");
    }
}

/// `--json`: one JSON document with every variable of the table under its category
/// (value, origin, default, meaning), the features, devices, CPUs and launcher.
#[test]
fn json_is_one_document_with_the_variables_by_category() {
    let out = info_args(&["--json"], &[("SYMMEM_ORDERING", "weak")]);
    let doc: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}:\n{out}"));
    assert_eq!(doc["symmem"], env!("CARGO_PKG_VERSION"));
    for feature in ["cuda", "ib", "ofi", "mpi"] {
        assert!(
            doc["build_features"][feature].is_boolean(),
            "{feature}: {doc:#}"
        );
    }
    for var in symmem::config::VARIABLES {
        let list = doc["variables"][var.category.name()]
            .as_array()
            .unwrap_or_else(|| panic!("no {} list in {doc:#}", var.category.name()));
        let entry = list
            .iter()
            .find(|v| v["name"] == var.name)
            .unwrap_or_else(|| panic!("{} missing from {}", var.name, var.category.name()));
        assert_eq!(entry["default"], var.default, "{entry}");
        assert_eq!(entry["doc"], var.doc, "{entry}");
    }
    let weak = doc["variables"]["runtime"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "SYMMEM_ORDERING")
        .unwrap();
    assert_eq!(
        (&weak["value"], &weak["origin"]),
        (&"weak".into(), &"environment".into())
    );
    let build: Vec<&str> = doc["variables"]["build-time"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert!(build.contains(&"SYMMEM_SKIP_PTX"), "{build:?}");
    assert_eq!(
        doc["variables"]["testing"][0]["name"],
        "SYMMEM_TEST_EXIT_AT"
    );
    assert!(doc["devices"]["gpu"]["gpus"].is_array(), "{doc:#}");
    assert!(
        doc["cpus"]["count"].as_u64().is_some_and(|n| n >= 1),
        "{doc:#}"
    );
    assert_eq!(doc["launcher"]["bootstrap"], "auto");
}

/// The text report lists the build-time and testing-only variables apart.
#[test]
fn build_time_and_testing_variables_are_listed_apart() {
    let out = info(&[]);
    let build = out
        .find("\nbuild-time variables")
        .expect("a build-time section");
    let testing = out
        .find("\ntesting-only variables")
        .expect("a testing section");
    let runtime = out.find("\nconfiguration (environment):").unwrap();
    assert!(runtime < build && build < testing, "{out}");
    assert!(out[build..testing].contains("SYMMEM_SKIP_PTX"));
    assert!(!out[runtime..build].contains("SYMMEM_SKIP_PTX"));
    assert!(out[testing..].contains("SYMMEM_TEST_EXIT_AT"));
}

#[test]
fn help_version_and_typos_behave_like_other_tools() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_symmem-info"))
            .args(args)
            .output()
            .expect("running symmem-info")
    };
    let help = run(&["--help"]);
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("--json"));
    let version = run(&["--version"]);
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        format!("symmem-info {}", env!("CARGO_PKG_VERSION"))
    );
    let typo = run(&["--jsno"]);
    assert_eq!(typo.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&typo.stderr).contains("'--json'"));
    let unpaired = run(&["--map-by=numa"]);
    assert_eq!(unpaired.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unpaired.stderr).contains("need --pes N"));
}

/// `--calibrate` measures every copy method the CPU has at each size and says what it
/// chose; this test's build is unoptimized, so it says that nothing is kept for init.
#[test]
fn calibrate_measures_the_copies_and_says_what_it_chose() {
    let out = info_args(&["--calibrate"], &[]);
    assert_has(
        &out,
        &[
            "host copies measured on this machine",
            "memcpy:",
            "16777216 B  non-temporal stores:",
            "2097152 B  memcpy in 256 KiB slices (aligned + 8 bytes off):",
            "chosen: the vector copy ",
            "; memcpy in slices ",
            "not kept: this symmem-info is an unoptimized (debug) build",
        ],
    );
    let json: serde_json::Value =
        serde_json::from_str(&info_args(&["--calibrate", "--json"], &[])).expect("JSON");
    assert!(
        json["nt_copy"]
            .as_array()
            .is_some_and(|rows| rows.len() == 7),
        "{json}"
    );
    assert!(
        json["sliced_memcpy"]
            .as_array()
            .is_some_and(|rows| rows.len() == 5),
        "{json}"
    );
    assert!(json["kept_in"].is_null(), "{json}");
}
