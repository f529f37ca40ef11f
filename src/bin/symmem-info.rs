//! `symmem-info`: prints symmem's version, every configuration variable with its
//! effective value and meaning, what this build supports, how kernels run on CPU PEs and
//! how to debug them there before they go to a GPU, and which launcher it detects in the
//! current environment and what init would do.

use std::process::ExitCode;

use symmem::bootstrap::env::ENV_JOB_SECRET;
use symmem::bootstrap::select::process_env;
use symmem::bootstrap::{decide, Plan};
use symmem::config::{MemoryOrdering, VARIABLES};

fn main() -> ExitCode {
    println!("symmem {}", env!("CARGO_PKG_VERSION"));
    println!(
        "features: mpi bootstrap {}",
        if cfg!(feature = "mpi") {
            "built in"
        } else {
            "not built (rebuild with --features mpi)"
        }
    );
    println!(
        "device API: CPU executor built in; PTX via symmem-ptx-build; device state layout v{}",
        symmem::device::DEVICE_STATE_VERSION
    );
    let config = match symmem::Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("symmem-info: {e}");
            return ExitCode::from(2);
        }
    };
    println!("\nconfiguration (environment):");
    let values = config.describe();
    for var in VARIABLES {
        let value = values
            .iter()
            .find(|(name, _)| *name == var.name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| match process_env(var.name) {
                // The secret is not printed, only whether there is one.
                Some(_) if var.name == ENV_JOB_SECRET => "(set)".into(),
                Some(v) => v,
                None => "(unset)".into(),
            });
        let origin = if std::env::var_os(var.name).is_some() {
            "from the environment"
        } else {
            "default"
        };
        println!(
            "  {:<26} = {value}  ({origin})\n      {} [default {}]",
            var.name, var.doc, var.default
        );
    }
    for unknown in symmem::Config::unknown_variables() {
        println!("  warning: {unknown} is not a symmem variable (typo?)");
    }
    println!("\nkernels on CPU PEs (the debugging modes):");
    println!("{}", describe_cpu_modes(&config));
    println!("\nlauncher (SYMMEM_BOOTSTRAP={}):", config.bootstrap);
    println!("  {}", describe_launch(&config));
    ExitCode::SUCCESS
}

/// What `symmem::init()` would do in this environment, in a few lines.
fn describe_launch(config: &symmem::Config) -> String {
    let decision = match decide(config.bootstrap, &process_env) {
        Ok(d) => d,
        Err(e) => return format!("init would fail: {e}"),
    };
    let what = match &decision.plan {
        Plan::Symrun(env) => format!(
            "symrun: rank {} of {}, rendezvous at {}",
            env.rank, env.size, env.addr
        ),
        Plan::Mpi if cfg!(feature = "mpi") => "MPI: rank and size come from MPI_COMM_WORLD".into(),
        Plan::Mpi => "MPI, but this build has no `mpi` feature: init would fail".into(),
        Plan::Pmi(env) => format!(
            "PMI-1 ({}): rank 0 publishes its rendezvous address and a random job secret through the process manager's KVS",
            env.vars
        ),
        Plan::Pmix(env) => format!(
            "PMIx ({}): loads {} at init; PMIx_Init gives the rank, PMIX_JOB_SIZE the size; rank 0 publishes its rendezvous address and a random job secret with PMIx_Put, the others read it after PMIx_Fence",
            env.vars,
            env.libraries.join(" or ")
        ),
        Plan::Env(job) if job.size == 1 => format!("{}: a job of one PE", job.source),
        Plan::Env(job) => format!(
            "{}: rank {} of {}{}; rank 0 hosts the rendezvous at {} ({}); secret: {}",
            job.source,
            job.rank,
            job.size,
            job.local_rank
                .map_or(String::new(), |l| format!(" (local rank {l})")),
            job.root_addr(),
            job.origin,
            match &job.derived_from {
                None => ENV_JOB_SECRET.to_string(),
                Some(from) => format!(
                    "derived from {from} (anyone who can reach the port and guess these can join; set {ENV_JOB_SECRET})"
                ),
            }
        ),
        Plan::Single => "none: this process is a single PE".into(),
    };
    format!(
        "{what}\n  why: {}\n  node identity: {}",
        decision.why,
        config.node_identity_source(decision.plan.node_source().as_deref())
    )
}

/// The CPU executor's and weak ordering's settings in this environment, and how to use
/// them to debug a kernel before it runs on a GPU.
fn describe_cpu_modes(config: &symmem::Config) -> String {
    let ordering = match (config.ordering, config.ordering_seed) {
        (MemoryOrdering::Strict, _) => "strict: puts, p, AMOs and signals to a peer land in \
             program order, as x86 makes them, so a missing fence goes unseen"
            .to_string(),
        (MemoryOrdering::Weak, seed) => format!(
            "weak: puts, p, put_nbi, non-fetching AMOs and signals to peers are buffered and \
             delivered in a seeded random order that only fence, quiet, barrier and put_signal \
             constrain; put_nbi sources are checked and get_nbi results hidden until quiet; \
             seed {}",
            seed.map_or(
                "drawn from the clock by PE 0 at init and logged at warn level".to_string(),
                |s| format!("{s} (SYMMEM_ORDERING_SEED)"),
            )
        ),
    };
    let schedule = match config.exec_seed {
        None => "thread index order after every switch point, the same in every run".to_string(),
        Some(s) => format!("drawn from SYMMEM_EXEC_SEED={s}, replayed by the same seed"),
    };
    let overflow = if cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        "an overflow fails the launch naming the block and thread"
    } else {
        "an overflow hits the guard page and the process dies of SIGSEGV (reported as \
         such only on x86-64 Linux)"
    };
    format!(
        "  ordering (SYMMEM_ORDERING): {ordering}
  lane schedule (SYMMEM_EXEC_SEED): the threads of a block run as fibers of one OS thread; \
their order: {schedule}
  stack per kernel thread (SYMMEM_EXEC_STACK_SIZE): {} KiB; {overflow}
  to debug a kernel before it goes to a GPU, run it on CPU PEs (SYMMEM_DEVICE=cpu):
    for s in 1 2 3 4 5 6 7 8; do SYMMEM_ORDERING=weak SYMMEM_ORDERING_SEED=$s SYMMEM_EXEC_SEED=$s \
symrun -n 2 PROGRAM || break; done
    weak mode logs its seed (\"SYMMEM_ORDERING_SEED=N replays this run\") and a failed launch \
names its lane schedule (\"[lane schedule: SYMMEM_EXEC_SEED=N]\"); rerun with both to replay \
the failure. A missing fence shows as wrong data, a reused put_nbi source as an error from \
quiet. See the README's \"Debugging kernels on CPU PEs\".",
        config.exec_stack_size >> 10
    )
}
