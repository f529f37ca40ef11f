//! Detection and parsing of launcher variables, from maps (no process environment).

use std::collections::HashMap;

use super::*;
use crate::select::{decide, BootstrapChoice, Decision, Plan};

fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn decide_with(
    choice: BootstrapChoice,
    pairs: &[(&str, &str)],
) -> Result<Decision, BootstrapError> {
    let map = vars(pairs);
    decide(choice, &|k: &str| map.get(k).cloned())
}

fn auto(pairs: &[(&str, &str)]) -> Result<Decision, BootstrapError> {
    decide_with(BootstrapChoice::Auto, pairs)
}

fn env_job(pairs: &[(&str, &str)]) -> EnvJob {
    match auto(pairs)
        .unwrap_or_else(|e| panic!("{pairs:?}: {e}"))
        .plan
    {
        Plan::Env(job) => job,
        other => panic!("{pairs:?}: expected the env bootstrap, got {other:?}"),
    }
}

fn auto_err(pairs: &[(&str, &str)]) -> String {
    match auto(pairs) {
        Ok(d) => panic!("{pairs:?} was accepted: {d:?}"),
        Err(e) => e.to_string(),
    }
}

/// What torchrun 2.x sets for a worker (`torchrun --nnodes 1 --nproc-per-node 2`).
const TORCHRUN_RANK1: &[(&str, &str)] = &[
    ("RANK", "1"),
    ("WORLD_SIZE", "2"),
    ("LOCAL_RANK", "1"),
    ("LOCAL_WORLD_SIZE", "2"),
    ("GROUP_RANK", "0"),
    ("GROUP_WORLD_SIZE", "1"),
    ("MASTER_ADDR", "127.0.0.1"),
    ("MASTER_PORT", "29500"),
    ("TORCHELASTIC_RUN_ID", "x"),
    ("TORCHELASTIC_RESTART_COUNT", "0"),
];

#[test]
fn the_reported_bug_joins_the_job_instead_of_running_alone() {
    let job = env_job(&[
        ("RANK", "1"),
        ("WORLD_SIZE", "2"),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", "29500"),
        ("TORCHELASTIC_RUN_ID", "x"),
    ]);
    assert_eq!(
        (job.source, job.rank, job.size),
        (EnvSource::Torchrun, 1, 2)
    );
    assert_eq!(
        job.root_addr(),
        format!("127.0.0.1:{}", 29500 + MASTER_PORT_OFFSET)
    );
    // srun without PMI and without a step node list: an error naming what is missing.
    let err = auto_err(&[("SLURM_PROCID", "1"), ("SLURM_NTASKS", "2")]);
    assert!(
        err.contains("SLURM_STEP_NODELIST") && err.contains("SLURM_PROCID=1"),
        "{err}"
    );
}

#[test]
fn torchrun_never_uses_master_port_itself() {
    let job = env_job(TORCHRUN_RANK1);
    assert_ne!(job.root_port, 29500);
    assert!(job.origin.contains("MASTER_PORT+1000"), "{}", job.origin);
    let mut with_port = TORCHRUN_RANK1.to_vec();
    with_port.push(("SYMMEM_ROOT_PORT", "31000"));
    assert_eq!(env_job(&with_port).root_port, 31000);
    let mut high = TORCHRUN_RANK1.to_vec();
    high.retain(|(k, _)| *k != "MASTER_PORT");
    high.push(("MASTER_PORT", "65000"));
    let err = auto_err(&high);
    assert!(
        err.contains("MASTER_PORT=65000") && err.contains("SYMMEM_ROOT_PORT"),
        "{err}"
    );
}

#[test]
fn kubeflow_pytorchjob_variables_are_used_without_torchrun() {
    // Kubeflow training-operator v1 PyTorchJob, worker 2 of a master + 3 workers.
    let job = env_job(&[
        ("MASTER_ADDR", "mnist-master-0"),
        ("MASTER_PORT", "23456"),
        ("WORLD_SIZE", "4"),
        ("RANK", "3"),
        ("PYTHONUNBUFFERED", "1"),
    ]);
    assert_eq!(
        (job.source, job.rank, job.size),
        (EnvSource::PyTorchEnv, 3, 4)
    );
    assert_eq!(job.root_addr(), "mnist-master-0:24456");
    assert!(job
        .derived_from
        .as_deref()
        .unwrap()
        .contains("MASTER_ADDR=mnist-master-0"));
}

#[test]
fn kubernetes_indexed_job_needs_root_addr_and_size() {
    let base = [
        ("JOB_COMPLETION_INDEX", "2"),
        ("SYMMEM_WORLD_SIZE", "4"),
        ("SYMMEM_ROOT_ADDR", "train-0.train"),
    ];
    let job = env_job(&base);
    assert_eq!(
        (job.source, job.rank, job.size),
        (EnvSource::K8sIndexed, 2, 4)
    );
    assert_eq!(
        job.root_addr(),
        format!("train-0.train:{DEFAULT_ROOT_PORT}")
    );
    let err = auto_err(&base[..2]);
    assert!(err.contains("SYMMEM_ROOT_ADDR"), "{err}");
    let err = auto_err(&[base[0], base[2]]);
    assert!(err.contains("SYMMEM_WORLD_SIZE"), "{err}");
    let err = auto_err(&[("JOB_COMPLETION_INDEX", "4"), base[1], base[2]]);
    assert!(
        err.contains("JOB_COMPLETION_INDEX=4") && err.contains("SYMMEM_WORLD_SIZE=4"),
        "{err}"
    );
}

#[test]
fn slurm_fallback_uses_the_first_step_node_and_reserved_ports() {
    let base = [
        ("SLURM_PROCID", "5"),
        ("SLURM_NTASKS", "8"),
        ("SLURM_LOCALID", "1"),
        ("SLURM_JOB_ID", "4242"),
        ("SLURM_STEP_ID", "0"),
        ("SLURM_STEP_NODELIST", "node[03-06],gpu5"),
    ];
    let job = env_job(&base);
    assert_eq!((job.source, job.rank, job.size), (EnvSource::Slurm, 5, 8));
    assert_eq!(job.local_rank, Some(1));
    assert_eq!(job.root_host, "node03");
    assert_eq!(job.root_port, slurm_derived_port("4242", "0"));
    assert!((20000..32000).contains(&job.root_port));
    let mut resv = base.to_vec();
    resv.push(("SLURM_STEP_RESV_PORTS", "12000-12003"));
    assert_eq!(env_job(&resv).root_port, 12000);
    let mut bad = base.to_vec();
    bad.retain(|(k, _)| *k != "SLURM_STEP_NODELIST");
    bad.push(("SLURM_STEP_NODELIST", "node[03-"));
    let err = auto_err(&bad);
    assert!(err.contains("SLURM_STEP_NODELIST"), "{err}");
}

#[test]
fn launcher_variables_give_the_node_view() {
    let slurm = [
        ("SLURM_PROCID", "1"),
        ("SLURM_NTASKS", "2"),
        ("SLURM_STEP_NODELIST", "node[03-04]"),
        ("SLURMD_NODENAME", "node04"),
    ];
    let job = env_job(&slurm);
    let node = crate::node::LauncherNode::new("node04", "Slurm SLURMD_NODENAME");
    assert_eq!(job.node, Some(node.clone()));
    assert_eq!(
        auto(&slurm).unwrap().plan.node_source(),
        Some(node.to_string())
    );
    let mut torchrun = vec![
        ("TORCHELASTIC_RUN_ID", "r"),
        ("RANK", "3"),
        ("WORLD_SIZE", "4"),
        ("GROUP_RANK", "1"),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", "29500"),
    ];
    assert_eq!(
        env_job(&torchrun).node,
        Some(crate::node::LauncherNode::new("1", "torchrun GROUP_RANK"))
    );
    torchrun.retain(|(k, _)| *k != "GROUP_RANK");
    torchrun.push(("GROUP_RANK", "first"));
    assert!(auto_err(&torchrun).contains("GROUP_RANK"));
    // PMI-1 reads the mapping at init; Slurm's variables are its fallback.
    let pmi = auto(&[("PMI_FD", "5"), ("PMI_RANK", "0"), ("PMI_SIZE", "2")]).unwrap();
    assert_eq!(
        pmi.plan.node_source().unwrap(),
        "PMI-1 PMI_process_mapping (read at init)"
    );
    assert_eq!(auto(&[]).unwrap().plan.node_source(), None);
}

#[test]
fn a_batch_script_is_not_an_srun_task() {
    // sbatch --ntasks=8: the script itself sees SLURM_PROCID=0 and the allocation's size.
    let d = auto(&[
        ("SLURM_PROCID", "0"),
        ("SLURM_NTASKS", "8"),
        ("SLURM_JOB_ID", "7"),
    ])
    .unwrap();
    assert_eq!(d.plan, Plan::Single, "{}", d.why);
}

#[test]
fn conflicting_sources_fail_naming_both_unless_one_is_chosen() {
    let both = [
        ("SLURM_PROCID", "1"),
        ("SLURM_NTASKS", "8"),
        ("SLURM_STEP_ID", "0"),
        ("SLURM_STEP_NODELIST", "n1"),
        ("RANK", "1"),
        ("WORLD_SIZE", "2"),
        ("MASTER_ADDR", "n1"),
        ("MASTER_PORT", "29500"),
    ];
    let err = auto_err(&both);
    assert!(
        err.contains("SLURM_NTASKS=8")
            && err.contains("WORLD_SIZE=2")
            && err.contains("SYMMEM_BOOTSTRAP"),
        "{err}"
    );
    // The same under torchrun: 8 agents cannot make 2 workers.
    let mut torch = both.to_vec();
    torch.push(("TORCHELASTIC_RUN_ID", "r"));
    let err = auto_err(&torch);
    assert!(
        err.contains("SLURM_NTASKS=8") && err.contains("WORLD_SIZE=2"),
        "{err}"
    );
    let chosen = |v: &str| match decide_with(v.parse().unwrap(), &both).unwrap().plan {
        Plan::Env(j) => (j.source, j.size),
        other => panic!("{other:?}"),
    };
    assert_eq!(chosen("env:torchrun"), (EnvSource::PyTorchEnv, 2));
    assert_eq!(chosen("env:slurm"), (EnvSource::Slurm, 8));
    // Plain `env` does not say which of the two.
    let err = decide_with(BootstrapChoice::Env(None), &both)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("SLURM_NTASKS=8") && err.contains("WORLD_SIZE=2"),
        "{err}"
    );
}

#[test]
fn torchrun_under_srun_and_pmi_is_torchrun() {
    // srun --mpi=pmi2 -N 2 torchrun --nnodes 2 --nproc-per-node 4: the worker inherits the
    // agent's Slurm and PMI variables (PMI_FD included), which count agents.
    let mut vars = vec![
        ("RANK", "5"),
        ("WORLD_SIZE", "8"),
        ("LOCAL_RANK", "1"),
        ("LOCAL_WORLD_SIZE", "4"),
        ("GROUP_RANK", "1"),
        ("GROUP_WORLD_SIZE", "2"),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", "29500"),
        ("TORCHELASTIC_RUN_ID", "j"),
        ("SLURM_PROCID", "1"),
        ("SLURM_NTASKS", "2"),
        ("SLURM_STEP_ID", "0"),
        ("SLURM_STEP_NODELIST", "n[1-2]"),
        ("PMI_FD", "7"),
        ("PMI_RANK", "1"),
        ("PMI_SIZE", "2"),
    ];
    let d = auto(&vars).unwrap();
    match &d.plan {
        Plan::Env(j) => assert_eq!((j.source, j.rank, j.size), (EnvSource::Torchrun, 5, 8)),
        other => panic!("{other:?}"),
    }
    assert!(
        d.why.contains("PMI") && d.why.contains("Slurm"),
        "{}",
        d.why
    );
    // Without GROUP_WORLD_SIZE, the outer size must divide WORLD_SIZE.
    vars.retain(|(k, _)| *k != "GROUP_WORLD_SIZE");
    assert!(matches!(auto(&vars).unwrap().plan, Plan::Env(_)));
    vars.retain(|(k, _)| *k != "PMI_SIZE");
    vars.push(("PMI_SIZE", "3"));
    let err = auto_err(&vars);
    assert!(
        err.contains("PMI_SIZE=3") && err.contains("WORLD_SIZE=8"),
        "{err}"
    );
}

#[test]
// Over 100 lines on purpose: a table of bad values, one case per variable.
fn bad_values_name_the_variable() {
    let torch = |rank: &str, size: &str| {
        let mut v = vec![("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29500")];
        v.push(("RANK", rank));
        v.push(("WORLD_SIZE", size));
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect::<Vec<_>>()
    };
    for (rank, size, needle) in [
        ("0", "0", "WORLD_SIZE=0"),
        ("0", "65537", "WORLD_SIZE=65537"),
        ("2", "2", "RANK=2"),
        ("one", "2", "RANK=\"one\""),
        ("0", "two", "WORLD_SIZE=\"two\""),
        ("-1", "2", "RANK=\"-1\""),
    ] {
        let owned = torch(rank, size);
        let pairs: Vec<(&str, &str)> = owned
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let err = auto_err(&pairs);
        assert!(err.contains(needle), "RANK={rank} WORLD_SIZE={size}: {err}");
    }
    assert!(
        env_job(&[
            ("RANK", "0"),
            ("WORLD_SIZE", "65536"),
            ("MASTER_ADDR", "h"),
            ("MASTER_PORT", "1")
        ])
        .size
            == 65536
    );
    for (pairs, needle) in [
        (
            vec![("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_PORT", "1")],
            "MASTER_ADDR",
        ),
        (
            vec![("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "h")],
            "MASTER_PORT",
        ),
        (
            vec![
                ("RANK", "0"),
                ("WORLD_SIZE", "2"),
                ("MASTER_ADDR", "h"),
                ("MASTER_PORT", "http"),
            ],
            "MASTER_PORT=\"http\"",
        ),
        (vec![("WORLD_SIZE", "2")], "RANK"),
        (
            vec![
                ("RANK", "0"),
                ("WORLD_SIZE", "2"),
                ("MASTER_ADDR", "h"),
                ("MASTER_PORT", "1"),
                ("SYMMEM_ROOT_PORT", "0"),
            ],
            "SYMMEM_ROOT_PORT",
        ),
        (
            vec![
                ("SLURM_PROCID", "x"),
                ("SLURM_NTASKS", "2"),
                ("SLURM_STEP_ID", "0"),
            ],
            "SLURM_PROCID",
        ),
        (
            vec![
                ("SLURM_PROCID", "3"),
                ("SLURM_NTASKS", "2"),
                ("SLURM_STEP_ID", "0"),
            ],
            "SLURM_PROCID=3",
        ),
        (
            vec![
                ("SLURM_PROCID", "0"),
                ("SLURM_NTASKS", "0"),
                ("SLURM_STEP_ID", "0"),
            ],
            "SLURM_NTASKS=0",
        ),
        (vec![("JOB_COMPLETION_INDEX", "a")], "JOB_COMPLETION_INDEX"),
        (
            vec![
                ("RANK", "0"),
                ("WORLD_SIZE", "2"),
                ("MASTER_ADDR", "h"),
                ("MASTER_PORT", "1"),
                ("LOCAL_RANK", "first"),
            ],
            "LOCAL_RANK=\"first\"",
        ),
    ] {
        let err = auto_err(&pairs);
        assert!(err.contains(needle), "{pairs:?}: {err}");
    }
}

#[test]
fn secrets_separate_jobs_and_the_user_secret_wins() {
    let a = env_job(TORCHRUN_RANK1);
    let mut other_run = TORCHRUN_RANK1.to_vec();
    other_run.retain(|(k, _)| *k != "TORCHELASTIC_RUN_ID");
    other_run.push(("TORCHELASTIC_RUN_ID", "y"));
    let b = env_job(&other_run);
    assert_ne!(a.key, b.key);
    assert!(a
        .derived_from
        .as_deref()
        .unwrap()
        .contains("TORCHELASTIC_RUN_ID=x"));
    let mut secret = TORCHRUN_RANK1.to_vec();
    secret.push(("SYMMEM_JOB_SECRET", "s3cret"));
    let c = env_job(&secret);
    assert_eq!(c.derived_from, None);
    assert_ne!(c.key, a.key);
    assert!(!format!("{c:?}").contains("key"), "{c:?}");
    // Rank 0 and rank 1 of one job compute the same key.
    let mut rank0 = TORCHRUN_RANK1.to_vec();
    rank0.retain(|(k, _)| *k != "RANK" && *k != "LOCAL_RANK");
    rank0.extend([("RANK", "0"), ("LOCAL_RANK", "0")]);
    assert_eq!(env_job(&rank0).key, a.key);
}

#[test]
fn world_size_one_and_no_variables() {
    assert_eq!(auto(&[]).unwrap().plan, Plan::Single);
    // A job of one needs no rendezvous, so no MASTER_ADDR either.
    for one in [
        &[("RANK", "0"), ("WORLD_SIZE", "1")][..],
        &[("WORLD_SIZE", "1")],
        &[
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "1"),
            ("SLURM_STEP_ID", "0"),
        ],
        &[("JOB_COMPLETION_INDEX", "0"), ("SYMMEM_WORLD_SIZE", "1")],
    ] {
        assert_eq!(auto(one).unwrap().plan, Plan::Single, "{one:?}");
    }
    let err = decide_with(BootstrapChoice::Env(None), &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("SYMMEM_BOOTSTRAP=env"), "{err}");
}

#[test]
fn bootstrap_choice_parses_the_env_values() {
    assert_eq!("env".parse(), Ok(BootstrapChoice::Env(None)));
    assert_eq!(
        "env:slurm".parse(),
        Ok(BootstrapChoice::Env(Some(EnvSource::Slurm)))
    );
    assert_eq!(
        "env:k8s".parse(),
        Ok(BootstrapChoice::Env(Some(EnvSource::K8sIndexed)))
    );
    assert_eq!(
        "env:torchrun".parse(),
        Ok(BootstrapChoice::Env(Some(EnvSource::Torchrun)))
    );
    assert!("env:pbs".parse::<BootstrapChoice>().is_err());
}

#[test]
fn rank_zero_refuses_a_root_address_of_another_host() {
    let job = env_job(&[
        ("RANK", "0"),
        ("WORLD_SIZE", "2"),
        ("MASTER_ADDR", "192.0.2.1"),
        ("MASTER_PORT", "1"),
    ]);
    let err = job.join(Duration::from_secs(1)).err().unwrap().to_string();
    assert!(
        err.contains("MASTER_ADDR")
            && err.contains("192.0.2.1")
            && err.contains("SYMMEM_ROOT_ADDR"),
        "{err}"
    );
}

#[test]
fn rank_zero_names_the_port_it_cannot_bind() {
    let taken = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let job = env_job(&[
        ("RANK", "0"),
        ("WORLD_SIZE", "2"),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", "1"),
        ("SYMMEM_ROOT_PORT", &port),
    ]);
    let err = job.join(Duration::from_secs(1)).err().unwrap().to_string();
    assert!(
        err.contains(&port) && err.contains("SYMMEM_ROOT_PORT"),
        "{err}"
    );
}

#[test]
fn pmi_fd_or_pmi_port_picks_the_pmi_bootstrap() {
    // What Hydra (MPICH 4.0.2, Debian 12) gives each process.
    let hydra = [("PMI_FD", "6"), ("PMI_RANK", "1"), ("PMI_SIZE", "4")];
    let d = auto(&hydra).unwrap();
    if cfg!(feature = "mpi") && crate::select::linked_mpi_speaks_pmi1() {
        // An MPI that speaks PMI-1 (MPICH) joins through MPI_Init...
        assert_eq!(d.plan, Plan::Mpi, "{d:?}");
        // ... unless pmi is named.
        let d = decide_with(BootstrapChoice::Pmi, &hydra).unwrap();
        assert!(matches!(d.plan, Plan::Pmi(_)), "{d:?}");
    } else {
        // No MPI, or Open MPI, whose MPI_Init cannot use a PMI-1 server: the PMI-1 client.
        let Plan::Pmi(env) = &d.plan else {
            panic!("expected pmi: {d:?}")
        };
        assert_eq!((env.rank, env.size), (Some(1), Some(4)));
        assert!(d.why.contains("PMI_FD=6"), "{}", d.why);
    }
    // PMI_PORT with PMI_ID: rank and size come later, from the server.
    let d = auto(&[("PMI_PORT", "node1:4000"), ("PMI_ID", "3")]).unwrap();
    assert!(matches!(d.plan, Plan::Pmi(_)), "{d:?}");
    // A job of one needs no server.
    let d = auto(&[("PMI_FD", "6"), ("PMI_RANK", "0"), ("PMI_SIZE", "1")]).unwrap();
    if !cfg!(feature = "mpi") {
        assert_eq!(d.plan, Plan::Single, "{d:?}");
    }
}

#[test]
fn pmi_under_srun_must_agree_with_slurm_and_torchrun_still_wins() {
    // srun --mpi=pmi2 (Slurm 22.05): both describe this process.
    let srun = [
        ("PMI_FD", "7"),
        ("PMI_RANK", "2"),
        ("PMI_SIZE", "4"),
        ("SLURM_PROCID", "2"),
        ("SLURM_NTASKS", "4"),
        ("SLURM_STEP_ID", "0"),
    ];
    if !cfg!(feature = "mpi") {
        assert!(matches!(auto(&srun).unwrap().plan, Plan::Pmi(_)));
        let mut bad = srun.to_vec();
        bad.retain(|(k, _)| *k != "SLURM_NTASKS");
        bad.push(("SLURM_NTASKS", "8"));
        let err = auto_err(&bad);
        assert!(
            err.contains("PMI (PMI_FD=7") && err.contains("SLURM_NTASKS=8"),
            "{err}"
        );
    }
    let mut torch = srun.to_vec();
    torch.extend([
        ("RANK", "5"),
        ("WORLD_SIZE", "8"),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", "29500"),
        ("TORCHELASTIC_RUN_ID", "x"),
        ("GROUP_WORLD_SIZE", "4"),
    ]);
    assert!(matches!(auto(&torch).unwrap().plan, Plan::Env(_)));
}

#[test]
fn bootstrap_pmi_needs_a_pmi_server_and_refuses_symrun() {
    let err = decide_with(BootstrapChoice::Pmi, &[("PMI_SIZE", "2")])
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("neither PMI_FD nor PMI_PORT is set"), "{err}");
    let err = decide_with(
        BootstrapChoice::Pmi,
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
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("started by symrun"), "{err}");
    assert_eq!("pmi".parse::<BootstrapChoice>(), Ok(BootstrapChoice::Pmi));
    assert_eq!(BootstrapChoice::Pmi.to_string(), "pmi");
}

#[test]
fn launcher_variables_name_the_node() {
    let node = |source, pairs: &[(&str, &str)]| {
        let map = vars(pairs);
        env_node(source, &|k: &str| map.get(k).cloned())
    };
    assert_eq!(
        node(
            EnvSource::Slurm,
            &[("SLURMD_NODENAME", "n07"), ("SLURM_NODEID", "3")]
        )
        .unwrap(),
        Some(LauncherNode::new("n07", "Slurm SLURMD_NODENAME"))
    );
    assert_eq!(
        node(EnvSource::Slurm, &[("SLURM_NODEID", "3")]).unwrap(),
        Some(LauncherNode::new("3", "Slurm SLURM_NODEID"))
    );
    assert_eq!(node(EnvSource::Slurm, &[]).unwrap(), None);
    assert_eq!(
        node(EnvSource::Torchrun, &[("GROUP_RANK", "1")]).unwrap(),
        Some(LauncherNode::new("1", "torchrun GROUP_RANK"))
    );
    assert_eq!(node(EnvSource::PyTorchEnv, &[]).unwrap(), None);
    assert_eq!(
        node(EnvSource::K8sIndexed, &[("SLURMD_NODENAME", "n07")]).unwrap(),
        None
    );
    for (source, var) in [
        (EnvSource::Torchrun, "GROUP_RANK"),
        (EnvSource::Slurm, "SLURM_NODEID"),
    ] {
        let err = node(source, &[(var, "two")]).unwrap_err().to_string();
        assert!(err.contains(var), "{err}");
    }
}
