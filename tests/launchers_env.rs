//! The `env` bootstrap under the variables real launchers set, without the launchers.
//!
//! Each test starts the test PE program N times with a cleared environment plus exactly
//! the variables the launcher sets (listed per test, with the version they come from), and
//! checks that every process prints `PE r of N`: N one-PE jobs cannot pass.

mod common;

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{test_pe, wait_output, Job};

/// Starts the test PE with only `vars` (plus `PATH` and the test settings).
fn start(scenario: &str, n_pes: usize, vars: &[(String, String)]) -> Child {
    start_under(&[], scenario, n_pes, vars)
}

/// [`start`] under `wrapper`, a command that runs the test PE (`unshare --ipc`), if any.
fn start_under(wrapper: &[&str], scenario: &str, n_pes: usize, vars: &[(String, String)]) -> Child {
    let mut cmd = match wrapper.split_first() {
        Some((program, args)) => {
            let mut cmd = Command::new(program);
            cmd.args(args).arg(test_pe());
            cmd
        }
        None => Command::new(test_pe()),
    };
    cmd.arg(scenario)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("RUST_BACKTRACE", "0")
        .env("SYMMEM_BOOTSTRAP_TIMEOUT", "20")
        .env("SYMMEM_SYMMETRIC_SIZE", "16M")
        .env("SYMMEM_TEST_EXPECT_PES", n_pes.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.spawn().expect("starting symmem-test-pe")
}

fn owned(vars: &[(&str, String)]) -> Vec<(String, String)> {
    vars.iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// Runs `n` ranks, `vars_of(rank)` giving each its launcher variables, and checks that
/// rank r printed exactly `PE r of n`.
fn run_ranks(n: usize, vars_of: impl Fn(usize) -> Vec<(String, String)>) {
    run_scenario_ranks("hello", n, vars_of, |rank| format!("PE {rank} of {n}"));
}

/// Runs `scenario` on `n` ranks and checks that rank r printed the line `want(r)`.
fn run_scenario_ranks(
    scenario: &str,
    n: usize,
    vars_of: impl Fn(usize) -> Vec<(String, String)>,
    want: impl Fn(usize) -> String,
) {
    let children: Vec<Child> = (0..n).map(|r| start(scenario, n, &vars_of(r))).collect();
    for (rank, child) in children.into_iter().enumerate() {
        let job = wait_output(child, Duration::from_secs(60));
        job.assert_success();
        let want = want(rank);
        if !job.stdout.lines().any(|l| l == want) {
            job.fail(&format!("rank {rank} did not print {want:?}"));
        }
    }
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A listener standing in for torchrun's agent store on `MASTER_PORT`, on a port whose
/// `+1000` (where symmem's rank 0 listens) is free.
fn agent_store() -> TcpListener {
    loop {
        let store = TcpListener::bind("127.0.0.1:0").expect("binding the fake store");
        let port = store.local_addr().unwrap().port();
        if port < 64000 && TcpListener::bind(("0.0.0.0", port + 1000)).is_ok() {
            return store;
        }
    }
}

/// torchrun 2.x (`torchrun --nnodes 1 --nproc-per-node N`), worker `rank`.
fn torchrun_vars(rank: usize, n: usize, master_port: u16) -> Vec<(&'static str, String)> {
    vec![
        ("RANK", rank.to_string()),
        ("LOCAL_RANK", rank.to_string()),
        ("WORLD_SIZE", n.to_string()),
        ("LOCAL_WORLD_SIZE", n.to_string()),
        ("GROUP_RANK", "0".into()),
        ("GROUP_WORLD_SIZE", "1".into()),
        ("ROLE_RANK", rank.to_string()),
        ("ROLE_WORLD_SIZE", n.to_string()),
        ("ROLE_NAME", "default".into()),
        ("MASTER_ADDR", "127.0.0.1".into()),
        ("MASTER_PORT", master_port.to_string()),
        ("TORCHELASTIC_RUN_ID", "none".into()),
        ("TORCHELASTIC_RESTART_COUNT", "0".into()),
        ("TORCHELASTIC_MAX_RESTARTS", "0".into()),
        ("TORCHELASTIC_USE_AGENT_STORE", "True".into()),
        ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1".into()),
        ("OMP_NUM_THREADS", "1".into()),
    ]
}

#[test]
fn torchrun_workers_form_one_job_and_leave_master_port_to_the_agent() {
    let store = agent_store();
    let port = store.local_addr().unwrap().port();
    run_ranks(3, |r| owned(&torchrun_vars(r, 3, port)));
    drop(store);
}

#[test]
fn torchrun_workers_can_init_again_after_finalize() {
    // Every rank's second init joins rank 0's second rendezvous, not its first.
    let store = agent_store();
    let port = store.local_addr().unwrap().port();
    run_scenario_ranks(
        "reinit",
        3,
        |r| owned(&torchrun_vars(r, 3, port)),
        |r| format!("PE {r}: reinit ok"),
    );
}

#[test]
fn torchrun_wins_over_the_pmi_fd_and_slurm_variables_its_agent_inherited() {
    // `srun --mpi=pmi2 -n 1 torchrun --nproc-per-node 2`: the workers inherit the agent's
    // PMI-1 descriptor and Slurm task variables (Slurm 23.x), describing one agent.
    let store = agent_store();
    let port = store.local_addr().unwrap().port();
    run_ranks(2, |r| {
        let mut v = torchrun_vars(r, 2, port);
        v.extend([
            ("PMI_FD", "3".to_string()),
            ("PMI_RANK", "0".into()),
            ("PMI_SIZE", "1".into()),
            ("PMI_JOBID", "77.0".into()),
            ("SLURM_PROCID", "0".into()),
            ("SLURM_LOCALID", "0".into()),
            ("SLURM_NTASKS", "1".into()),
            ("SLURM_JOB_ID", "77".into()),
            ("SLURM_STEP_ID", "0".into()),
            ("SLURM_STEP_NODELIST", "localhost".into()),
        ]);
        owned(&v)
    });
}

#[test]
fn kubeflow_pytorchjob_pods_form_one_job() {
    // Kubeflow training-operator v1 PyTorchJob (master + 2 workers, no torchrun): what the
    // operator injects into each pod. MASTER_ADDR is the master pod's service name.
    // The user's own torch.distributed store may hold MASTER_PORT, as torchrun's does.
    let store = agent_store();
    let master_port = store.local_addr().unwrap().port();
    run_ranks(3, |r| {
        owned(&[
            ("MASTER_ADDR", "localhost".into()),
            ("MASTER_PORT", master_port.to_string()),
            ("WORLD_SIZE", "3".into()),
            ("RANK", r.to_string()),
            ("PYTHONUNBUFFERED", "1".into()),
        ])
    });
    drop(store);
}

#[test]
fn kubernetes_indexed_job_pods_form_one_job() {
    // batch/v1 Job with completionMode: Indexed (Kubernetes 1.27+) sets
    // JOB_COMPLETION_INDEX; the pod spec adds SYMMEM_ROOT_ADDR (the index-0 pod's DNS name,
    // here localhost), SYMMEM_WORLD_SIZE (= completions) and a secret.
    let port = free_port();
    run_ranks(3, |r| {
        owned(&[
            ("JOB_COMPLETION_INDEX", r.to_string()),
            ("HOSTNAME", format!("train-{r}")),
            ("KUBERNETES_SERVICE_HOST", "10.96.0.1".into()),
            ("KUBERNETES_SERVICE_PORT", "443".into()),
            ("SYMMEM_ROOT_ADDR", "localhost".into()),
            ("SYMMEM_ROOT_PORT", port.to_string()),
            ("SYMMEM_WORLD_SIZE", "3".into()),
            ("SYMMEM_JOB_SECRET", "from-a-kubernetes-secret".into()),
        ])
    });
}

/// Slurm 23.x `srun -n N --mpi=none --resv-ports` task `rank` on one node. (Slurm
/// 22.05.8's srun, run by hand on this kind of machine, set the same ones; its batch script
/// has `SLURM_PROCID=0` and the allocation's `SLURM_NTASKS` but no step id, and runs as one
/// PE.)
fn slurm_vars(rank: usize, n: usize, resv_port: u16) -> Vec<(&'static str, String)> {
    vec![
        ("SLURM_PROCID", rank.to_string()),
        ("SLURM_LOCALID", rank.to_string()),
        ("SLURM_NODEID", "0".into()),
        ("SLURM_NTASKS", n.to_string()),
        ("SLURM_NPROCS", n.to_string()),
        ("SLURM_JOB_ID", "4242".into()),
        ("SLURM_JOBID", "4242".into()),
        ("SLURM_STEP_ID", "0".into()),
        ("SLURM_STEPID", "0".into()),
        ("SLURM_STEP_NODELIST", "localhost".into()),
        ("SLURM_STEP_NUM_NODES", "1".into()),
        ("SLURM_STEP_NUM_TASKS", n.to_string()),
        ("SLURM_STEP_TASKS_PER_NODE", n.to_string()),
        ("SLURM_NODELIST", "localhost".into()),
        ("SLURM_JOB_NODELIST", "localhost".into()),
        ("SLURMD_NODENAME", "localhost".into()),
        ("SLURM_STEP_RESV_PORTS", format!("{resv_port}-{resv_port}")),
    ]
}

#[test]
fn srun_tasks_without_pmi_form_one_job() {
    let port = free_port();
    run_ranks(4, |r| owned(&slurm_vars(r, 4, port)));
}

/// `slurm_vars` with Slurm placing task `rank` on node `node_of(rank)`, and a job secret
/// (a job on more than one node is refused without one).
fn slurm_vars_on(
    rank: usize,
    n: usize,
    port: u16,
    node_of: impl Fn(usize) -> String,
) -> Vec<(String, String)> {
    let mut vars = slurm_vars(rank, n, port);
    vars.retain(|(k, _)| *k != "SLURMD_NODENAME");
    vars.push(("SLURMD_NODENAME", node_of(rank)));
    vars.push(("SYMMEM_DEBUG", "info".into()));
    vars.push(("SYMMEM_JOB_SECRET", "slurm-node-tests".into()));
    owned(&vars)
}

#[test]
fn slurm_node_names_decide_which_tasks_share_a_node() {
    // Slurm places the tasks on two nodes that are this one machine (a simulated
    // multi-node run): the launcher is followed, so each task is its own node.
    let port = free_port();
    run_scenario_ranks(
        "node_layout",
        2,
        |r| slurm_vars_on(r, 2, port, |r| format!("node{r}")),
        |r| format!("PE {r} local [{r}]"),
    );
    // Both on one node, which the machine identity confirms: one node.
    let port = free_port();
    run_scenario_ranks(
        "node_layout",
        2,
        |r| slurm_vars_on(r, 2, port, |_| "node0".into()),
        |r| format!("PE {r} local [0, 1]"),
    );
}

#[test]
fn one_slurm_node_split_by_an_ipc_namespace_is_two_nodes() {
    const UNSHARE: [&str; 2] = ["unshare", "--ipc"];
    let can = Command::new(UNSHARE[0])
        .args([UNSHARE[1], "true"])
        .stderr(Stdio::null())
        .status();
    if !can.is_ok_and(|s| s.success()) {
        println!("SKIPPED: `unshare --ipc` does not work here (needs root)");
        return;
    }
    // Slurm says one node, but rank 1 runs in its own IPC namespace: two nodes, and rank
    // 0's info log says why.
    let port = free_port();
    let vars = |r| slurm_vars_on(r, 2, port, |_| "node0".into());
    let children = [
        start("node_layout", 2, &vars(0)),
        start_under(&UNSHARE, "node_layout", 2, &vars(1)),
    ];
    for (rank, child) in children.into_iter().enumerate() {
        let job = wait_output(child, Duration::from_secs(60));
        job.assert_success();
        let want = format!("PE {rank} local [{rank}]");
        if !job.stdout.lines().any(|l| l == want) {
            job.fail(&format!("rank {rank} did not print {want:?}"));
        }
        let other = 1 - rank;
        let why = format!("the launcher places PE {rank} (host ");
        if !job.stderr.contains(&why)
            || !job.stderr.contains(&format!("and PE {other} (host "))
            || !job.stderr.contains("their machine identities differ (ipc ")
        {
            job.fail("the info log does not say why the launcher's node was split");
        }
    }
}

/// Runs `n` ranks expected to fail init; returns each rank's `ERROR:` lines and its job.
fn init_errors(n: usize, vars_of: impl Fn(usize) -> Vec<(String, String)>) -> Vec<(String, Job)> {
    let children: Vec<Child> = (0..n)
        .map(|r| start("init_error", n, &vars_of(r)))
        .collect();
    children
        .into_iter()
        .enumerate()
        .map(|(rank, child)| {
            let job = wait_output(child, Duration::from_secs(60));
            job.assert_success();
            let err = job.lines_with("ERROR:").join("\n");
            if err.is_empty() {
                job.fail(&format!("rank {rank}: no ERROR line"));
            }
            (err, job)
        })
        .collect()
}

/// `torchrun_vars` with `extra` and the PEs split into two simulated nodes.
fn torchrun_on_two_nodes(
    rank: usize,
    n: usize,
    port: u16,
    extra: &[(&'static str, &str)],
) -> Vec<(String, String)> {
    let mut vars = torchrun_vars(rank, n, port);
    vars.push(("SYMMEM_SIMULATE_NODES", "2".into()));
    vars.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
    owned(&vars)
}

#[test]
fn a_job_on_two_nodes_without_a_job_secret_is_refused_on_every_pe() {
    // torchrun on 2 nodes (simulated): the key would come from MASTER_ADDR, MASTER_PORT and
    // the run id, which anyone may guess.
    let store = agent_store();
    let port = store.local_addr().unwrap().port();
    for (rank, (err, job)) in init_errors(4, |r| torchrun_on_two_nodes(r, 4, port, &[]))
        .into_iter()
        .enumerate()
    {
        for needle in [
            format!("init on PE {rank}: the job's PEs are on 2 nodes and torchrun hands out no secret"),
            format!("TORCHELASTIC_RUN_ID=none, TORCHELASTIC_RESTART_COUNT=0, MASTER_ADDR=127.0.0.1, MASTER_PORT={port}, WORLD_SIZE=4"),
            "Export SYMMEM_JOB_SECRET=<random>".into(),
            "set SYMMEM_ALLOW_PUBLIC_JOB_KEY=1 on every PE to accept that risk".into(),
        ] {
            assert!(err.contains(&needle), "rank {rank}: no {needle:?} in {err}");
        }
        assert!(
            job.elapsed < Duration::from_secs(20),
            "rank {rank} took {:?}",
            job.elapsed
        );
    }
    drop(store);
    // Slurm without PMI, tasks on two nodes as its variables say: the job and step ids.
    let port = free_port();
    let slurm = |r| {
        let mut vars = slurm_vars_on(r, 2, port, |r| format!("node{r}"));
        vars.retain(|(k, _)| k != "SYMMEM_JOB_SECRET");
        vars
    };
    for (rank, (err, _)) in init_errors(2, slurm).into_iter().enumerate() {
        for needle in [
            format!("init on PE {rank}: the job's PEs are on 2 nodes and Slurm srun (no PMI plugin) hands out no secret"),
            "(SLURM_JOB_ID=4242, SLURM_STEP_ID=0, SLURM_NTASKS=2)".into(),
        ] {
            assert!(err.contains(&needle), "rank {rank}: no {needle:?} in {err}");
        }
    }
}

#[test]
fn a_job_on_two_nodes_runs_with_a_job_secret_or_the_opt_in() {
    let store = agent_store();
    let port = store.local_addr().unwrap().port();
    run_ranks(4, |r| {
        torchrun_on_two_nodes(r, 4, port, &[("SYMMEM_JOB_SECRET", "a-random-secret")])
    });
    // The opt-in runs it, and rank 0 warns that anyone who guesses the identity can join.
    let children: Vec<Child> = (0..2)
        .map(|r| {
            let vars = torchrun_on_two_nodes(r, 2, port, &[("SYMMEM_ALLOW_PUBLIC_JOB_KEY", "1")]);
            start("hello", 2, &vars)
        })
        .collect();
    for (rank, child) in children.into_iter().enumerate() {
        let job = wait_output(child, Duration::from_secs(60));
        job.assert_success();
        if !job.stdout.lines().any(|l| l == format!("PE {rank} of 2")) {
            job.fail(&format!("rank {rank} did not print PE {rank} of 2"));
        }
        if !job.stderr.contains("SYMMEM_ALLOW_PUBLIC_JOB_KEY=1: this job on 2 nodes runs with a key derived from torchrun's public job identity") {
            job.fail(&format!("rank {rank} did not warn about the public key"));
        }
    }
    drop(store);
}

#[test]
fn a_job_on_one_node_needs_no_job_secret() {
    // The other torchrun tests run on one node without a secret too; here the same job
    // that is refused across two nodes.
    let store = agent_store();
    let port = store.local_addr().unwrap().port();
    run_ranks(4, |r| {
        let mut vars = torchrun_on_two_nodes(r, 4, port, &[]);
        vars.retain(|(k, _)| k != "SYMMEM_SIMULATE_NODES");
        vars
    });
    drop(store);
}

#[test]
fn symmem_info_shows_the_node_identity_source() {
    let info = |vars: &[(&str, String)]| {
        let out = Command::new(env!("CARGO_BIN_EXE_symmem-info"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(vars.iter().map(|(k, v)| (k, v)))
            .output()
            .expect("running symmem-info");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let slurm = slurm_vars(1, 2, free_port());
    let text = info(&slurm);
    assert!(
        text.contains("node identity: the launcher's node, localhost (Slurm SLURMD_NODENAME), and the kernel boot id"),
        "{text}"
    );
    let mut forced = slurm.clone();
    forced.push(("SYMMEM_NODE_ID", "rack3".into()));
    let text = info(&forced);
    assert!(
        text.contains("node identity: SYMMEM_NODE_ID=rack3"),
        "{text}"
    );
    let text = info(&[]);
    assert!(text.contains("(the launcher tells no node)"), "{text}");
}

/// Runs one process expected to fail init; returns its `ERROR:` line.
fn init_error(vars: &[(&str, String)]) -> (String, Job) {
    let job = wait_output(
        start("init_error", 1, &owned(vars)),
        Duration::from_secs(30),
    );
    job.assert_success();
    let err = job.lines_with("ERROR:").join("\n");
    if err.is_empty() {
        job.fail("no ERROR line");
    }
    (err, job)
}

#[test]
fn conflicting_launchers_fail_naming_both() {
    // srun -n 8 of a script that exports a stale WORLD_SIZE=2.
    let mut vars = slurm_vars(1, 8, free_port());
    vars.extend([
        ("RANK", "1".to_string()),
        ("WORLD_SIZE", "2".into()),
        ("MASTER_ADDR", "localhost".into()),
        ("MASTER_PORT", "29500".into()),
    ]);
    let (err, _) = init_error(&vars);
    assert!(
        err.contains("SLURM_NTASKS=8")
            && err.contains("WORLD_SIZE=2")
            && err.contains("SYMMEM_BOOTSTRAP"),
        "{err}"
    );
}

#[test]
fn bad_launcher_values_name_the_variable() {
    let torch = |rank: &str, size: &str| {
        vec![
            ("RANK", rank.to_string()),
            ("WORLD_SIZE", size.to_string()),
            ("MASTER_ADDR", "127.0.0.1".into()),
            ("MASTER_PORT", "29500".into()),
            ("TORCHELASTIC_RUN_ID", "x".into()),
        ]
    };
    for (vars, needle) in [
        (torch("0", "0"), "WORLD_SIZE=0"),
        (torch("0", "65537"), "WORLD_SIZE=65537"),
        (torch("2", "2"), "RANK=2"),
        (torch("zero", "2"), "RANK=\"zero\""),
        (torch("0", "2x"), "WORLD_SIZE=\"2x\""),
        (
            vec![("SLURM_PROCID", "1".into()), ("SLURM_NTASKS", "2".into())],
            "SLURM_STEP_NODELIST",
        ),
    ] {
        let (err, job) = init_error(&vars);
        assert!(err.contains(needle), "{vars:?}: {err}");
        assert!(
            job.elapsed < Duration::from_secs(10),
            "took {:?}",
            job.elapsed
        );
    }
}

#[test]
fn unreachable_master_addr_fails_within_the_bootstrap_timeout() {
    // 192.0.2.1 is TEST-NET-1: never routed.
    let mut vars = vec![
        ("RANK", "1".to_string()),
        ("WORLD_SIZE", "2".into()),
        ("MASTER_ADDR", "192.0.2.1".into()),
        ("MASTER_PORT", "29500".into()),
        ("TORCHELASTIC_RUN_ID", "x".into()),
        ("SYMMEM_BOOTSTRAP_TIMEOUT", "2".into()),
    ];
    let (err, job) = init_error(&vars);
    assert!(
        err.contains("MASTER_ADDR") && err.contains("192.0.2.1:30500"),
        "{err}"
    );
    assert!(
        job.elapsed < Duration::from_secs(10),
        "took {:?}",
        job.elapsed
    );
    // Rank 0 given another host's address says so instead of waiting for nobody.
    vars[0].1 = "0".into();
    let (err, _) = init_error(&vars);
    assert!(
        err.contains("MASTER_ADDR") && err.contains("SYMMEM_ROOT_ADDR"),
        "{err}"
    );
}
