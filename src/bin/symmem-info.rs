//! `symmem-info`: prints symmem's version, the build's features, every configuration
//! variable with its effective value, default and meaning, the GPUs and RDMA devices it
//! finds, how kernels run on CPU PEs and how to debug them there before they go to a
//! GPU, and which launcher it detects in the current environment and what init would do.
//!
//! `symmem-info --pes N [--bind-to core|numa|none] [--map-by core|numa]` then starts N local
//! PEs of itself and prints the job's topology: each PE's node (and what decided the node
//! identity), CPUs (and who bound them), device and NIC, and the route
//! every PE takes to every other PE (direct p2p, cuda copy, socket, ib; weak ordering
//! when set) and why. Run under `symrun -n N`, it prints that topology only.
//!
//! `symmem-info --json` prints the same report as one JSON document, for scripts (like
//! `ompi_info --parsable`); with `--pes N` (or under `symrun -n N`) PE 0 prints it with
//! the topology as a list `pes`. The command line is [`symmem::cli::info::Args`].

use std::process::ExitCode;

use clap::Parser;
use serde_json::{json, Value};
use symmem::bootstrap::affinity::{numa, CpuSet};
use symmem::bootstrap::env::ENV_JOB_SECRET;
use symmem::bootstrap::launcher::ENV_RANK;
use symmem::bootstrap::vars::process_env;
use symmem::bootstrap::{decide, Plan};
use symmem::cli::info::Args;
use symmem::config::{Category, MemoryOrdering, Variable, VARIABLES};
use symmem::SelfLaunch;

fn main() -> ExitCode {
    // SAFETY: setting a signal disposition to SIG_DFL before any thread is started has no
    // memory-safety preconditions. Rust ignores SIGPIPE, which turns `symmem-info | head`
    // into a panic in println!; the default action ends the process quietly instead.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    if std::env::var_os(ENV_RANK).is_some() {
        // One PE of a job (started by `--pes N` or symrun): the topology, as text or (with
        // `--json`, which the launcher passed on) in PE 0's JSON document.
        let json = Args::parse().json;
        return match topology(json) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("symmem-info: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let args = Args::parse();
    if let Err(e) = args.launch.check() {
        eprintln!("symmem-info: {e}\n\nFor more information, try '--help'.");
        return ExitCode::from(2);
    }
    if args.calibrate {
        return calibrate(args.json);
    }
    let pes = args.launch.pes;
    let config = match symmem::Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("symmem-info: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(n) = pes else {
        if args.json {
            println!("{:#}", report_json(&config));
        } else {
            report(&config);
        }
        return ExitCode::SUCCESS;
    };
    if !args.json {
        report(&config);
        println!("\ntopology of {n} local PEs (symmem-info --pes {n}):");
    }
    match symmem::self_launch() {
        Ok(SelfLaunch::Finished(code)) => ExitCode::from(code.clamp(0, 255) as u8),
        Ok(SelfLaunch::InJob) => {
            eprintln!("symmem-info: --pes {n} did not start a job");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("symmem-info: --pes {n}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The RDMA device and port the ib transport would use here, or why there is none.
fn rdma_device(config: &symmem::Config) -> Result<String, String> {
    symmem::transport_probe("ib", config)
}

/// Version, features, configuration, devices, CPU debugging modes and launcher.
fn report(config: &symmem::Config) {
    println!("symmem {}", env!("CARGO_PKG_VERSION"));
    let build = symmem::build_features();
    let features: Vec<String> = build
        .iter()
        .map(|f| format!("{} {}", f.name, if f.on { "on" } else { "off" }))
        .collect();
    let meanings: Vec<String> = build
        .iter()
        .map(|f| format!("{}: {}", f.name, f.what))
        .collect();
    let off: Vec<&str> = build.iter().filter(|f| !f.on).map(|f| f.name).collect();
    let rebuild = if off.is_empty() {
        String::new()
    } else {
        format!(
            "; rebuild with --features {} for what is off",
            off.join(",")
        )
    };
    println!(
        "build features: {} ({}{rebuild})",
        features.join(", "),
        meanings.join("; ")
    );
    println!(
        "device API: CPU executor built in; PTX via symmem-ptx-build; device state layout v{}",
        symmem::device::DEVICE_STATE_VERSION
    );
    let values = config.describe();
    for (category, title) in [
        (Category::Runtime, "configuration (environment)"),
        (
            Category::BuildTime,
            "build-time variables (read while building kernel crates, not by a running program)",
        ),
        (
            Category::Testing,
            "testing-only variables (never set in production)",
        ),
    ] {
        println!("\n{title}:");
        for var in VARIABLES.iter().filter(|v| v.category == category) {
            let (value, origin) = value_of(var, &values);
            let origin = match origin {
                "environment" => "from the environment",
                other => other,
            };
            println!(
                "  {:<26} = {value}  ({origin})\n      {} [default {}]",
                var.name, var.doc, var.default
            );
        }
    }
    for unknown in symmem::Config::unknown_variables() {
        println!("  warning: {unknown} is not a symmem variable (typo?)");
    }
    println!("\ndevices:");
    println!(
        "  GPUs: {}",
        gpus().map_or_else(|why| format!("none: {why}"), |g| g.join("; "))
    );
    println!(
        "  RDMA: {}",
        match rdma_device(config) {
            Ok(dev) => format!("{dev} (what the ib transport would use)"),
            Err(why) => format!("none usable: {why}"),
        }
    );
    println!("\nCPUs:");
    println!("{}", describe_cpus());
    println!("\nkernels on CPU PEs (the debugging modes):");
    println!("{}", describe_cpu_modes(config));
    println!("\nlauncher (SYMMEM_BOOTSTRAP={}):", config.bootstrap);
    println!("  {}", describe_launch(config));
}

/// A variable's effective value (the parsed configuration's, else the environment's; the
/// job secret only as "(set)") and where it comes from.
fn value_of(var: &Variable, values: &[(&str, String)]) -> (String, &'static str) {
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
        "environment"
    } else {
        "default"
    };
    (value, origin)
}

/// The report of [`report`] as one JSON document: version, features, the variables by
/// category (value, origin, default, meaning), unknown `SYMMEM_*` variables, devices,
/// CPUs and launcher.
fn report_json(config: &symmem::Config) -> Value {
    let values = config.describe();
    let mut variables = serde_json::Map::new();
    for category in [Category::Runtime, Category::BuildTime, Category::Testing] {
        let list: Vec<Value> = VARIABLES
            .iter()
            .filter(|v| v.category == category)
            .map(|var| {
                let (value, origin) = value_of(var, &values);
                json!({
                    "name": var.name,
                    "value": value,
                    "origin": origin,
                    "default": var.default,
                    "doc": var.doc,
                })
            })
            .collect();
        variables.insert(category.name().into(), list.into());
    }
    let features: serde_json::Map<String, Value> = symmem::build_features()
        .iter()
        .map(|f| (f.name.to_string(), Value::Bool(f.on)))
        .collect();
    let rdma = match rdma_device(config) {
        Ok(dev) => json!({ "device": dev.to_string() }),
        Err(why) => json!({ "device": null, "why": why.to_string() }),
    };
    let gpus = match gpus() {
        Ok(list) => json!({ "gpus": list }),
        Err(why) => json!({ "gpus": [], "why": why }),
    };
    let cpus = match CpuSet::of_this_thread() {
        Ok(allowed) => json!({
            "allowed": allowed.to_string(),
            "count": allowed.len(),
            "numa_nodes": numa::nodes()
                .iter()
                .map(|n| json!({ "id": n.id, "cpus": n.cpus.to_string() }))
                .collect::<Vec<_>>(),
        }),
        Err(e) => json!({ "why": format!("sched_getaffinity failed: {e}") }),
    };
    let launcher = match decide(config.bootstrap, &process_env) {
        Ok(d) => json!({
            "bootstrap": config.bootstrap.to_string(),
            "plan": describe_launch(config),
            "why": d.why.to_string(),
            "node_identity": config.node_identity_source(d.plan.node_source().as_deref()).to_string(),
        }),
        Err(e) => json!({ "bootstrap": config.bootstrap.to_string(), "error": e.to_string() }),
    };
    json!({
        "symmem": env!("CARGO_PKG_VERSION"),
        "build_features": features,
        "device_state_version": symmem::device::DEVICE_STATE_VERSION,
        "variables": variables,
        "unknown_variables": symmem::Config::unknown_variables(),
        "devices": { "gpu": gpus, "rdma": rdma },
        "cpus": cpus,
        "cpu_pes": describe_cpu_modes(config),
        "launcher": launcher,
    })
}

/// The visible GPUs: none in a build without GPU PEs.
#[cfg(not(feature = "cuda"))]
fn gpus() -> Result<Vec<String>, String> {
    Err("symmem was built without the `cuda` feature (no GPU PEs)".into())
}

/// The visible GPUs (ordinal, name, compute capability, memory, one string each), or why
/// there are none.
#[cfg(feature = "cuda")]
fn gpus() -> Result<Vec<String>, String> {
    use cudarc::driver::sys;
    // Checks that libcuda loads before any call into it (cudarc panics otherwise).
    if !symmem::cuda::driver_present() {
        return Err("the CUDA driver library (libcuda.so) cannot be loaded (no NVIDIA driver, or not on the loader path)".into());
    }
    let ok = |rc: sys::CUresult| rc == sys::CUresult::CUDA_SUCCESS;
    // SAFETY: libcuda is loaded (checked above); cuInit may be called any number of times.
    if !ok(unsafe { sys::cuInit(0) }) {
        return Err("cuInit failed (is the NVIDIA kernel module loaded?)".into());
    }
    let mut count = 0;
    // SAFETY: cuInit succeeded; `count` is a valid out-parameter.
    if !ok(unsafe { sys::cuDeviceGetCount(&mut count) }) || count <= 0 {
        return Err(format!(
            "the CUDA driver sees no GPU (CUDA_VISIBLE_DEVICES={:?})",
            std::env::var("CUDA_VISIBLE_DEVICES").unwrap_or_default()
        ));
    }
    let mut gpus = Vec::new();
    for ordinal in 0..count {
        let mut dev = 0;
        // SAFETY: `ordinal` is below the device count; `dev` is a valid out-parameter.
        if !ok(unsafe { sys::cuDeviceGet(&mut dev, ordinal) }) {
            gpus.push(format!("{ordinal}: cuDeviceGet failed"));
            continue;
        }
        let mut name = [0 as std::ffi::c_char; 256];
        // SAFETY: `name` is writable for its length, which is passed; `dev` is valid.
        let named = ok(unsafe { sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, dev) });
        let name = if named {
            // SAFETY: cuDeviceGetName wrote a NUL-terminated string into `name`.
            unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
                .to_string_lossy()
                .into_owned()
        } else {
            "(name unknown)".into()
        };
        let attr = |a: sys::CUdevice_attribute| {
            let mut v = 0;
            // SAFETY: `dev` is valid; `v` is a valid out-parameter.
            ok(unsafe { sys::cuDeviceGetAttribute(&mut v, a, dev) }).then_some(v)
        };
        let sm = match (
            attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
            attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
        ) {
            (Some(a), Some(b)) => format!("sm_{a}{b}"),
            _ => "sm unknown".into(),
        };
        let mut bytes = 0usize;
        // SAFETY: `dev` is valid; `bytes` is a valid out-parameter.
        let mem = if ok(unsafe { sys::cuDeviceTotalMem_v2(&mut bytes, dev) }) {
            format!("{} MiB", bytes >> 20)
        } else {
            "memory unknown".into()
        };
        gpus.push(format!("{ordinal}: {name} ({sm}, {mem})"));
    }
    Ok(gpus)
}

/// One PE's part of `--pes N` (or of `symrun -n N symmem-info`): its node, CPUs, device,
/// NIC and route to every other PE. PE 0 gathers every PE's part through the symmetric
/// heap and prints them in PE order, as text or, with `json`, as the list `pes` of the
/// JSON report.
fn topology(json: bool) -> symmem::Result<()> {
    let rt = symmem::init()?;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let config = rt.config();
    let nic = match rdma_device(config) {
        Ok(dev) => format!("RDMA {dev}"),
        Err(why) => format!("no RDMA device ({why})"),
    };
    let ifname = config.socket_ifname.as_deref().unwrap_or("auto");
    let routes = (0..n)
        .filter(|&pe| pe != me)
        .map(|pe| Ok((pe, rt.route_to(pe)?)))
        .collect::<symmem::Result<Vec<_>>>()?;
    let text = if json {
        json!({
            "pe": me,
            "node": rt.node_of(me)?,
            "node_identity": rt.node_identity_source(),
            "host": rt.hostname_of(me)?,
            "pid": std::process::id(),
            "device": rt.device_description(),
            "cpus": rt.cpu_binding(),
            "cpus_allowed": CpuSet::of_this_thread().map_or_else(|e| format!("unknown: {e}"), |c| c.to_string()),
            "nic": nic,
            "socket_interface": ifname,
            "routes": routes
                .iter()
                .map(|(pe, r)| json!({
                    "to": pe,
                    "path": r.path.to_string(),
                    "weak": r.weak,
                    "why": r.why,
                }))
                .collect::<Vec<_>>(),
        })
        .to_string()
    } else {
        let mut text = format!(
            "PE {me}: node {}\n  node identity: {}\n  host {}, pid {}, device {}\n  CPUs: {}\n  NIC: {nic}; sockets: interface {ifname} (SYMMEM_SOCKET_IFNAME)\n",
            rt.node_of(me)?,
            rt.node_identity_source(),
            rt.hostname_of(me)?,
            std::process::id(),
            rt.device_description(),
            rt.cpu_binding(),
        );
        for (pe, route) in &routes {
            text.push_str(&format!("  PE {me} -> PE {pe}: {route}\n"));
        }
        text
    };
    // Every PE's text length, so that all allocate the same (largest) buffer.
    let lens = rt.calloc::<u64>(1)?;
    rt.put(lens.at(0), &[text.len() as u64], me)?;
    rt.barrier_all()?;
    let mut all = vec![0usize; n];
    for (pe, len) in all.iter_mut().enumerate() {
        let mut v = [0u64];
        rt.get(lens.at(0), &mut v, pe)?;
        *len = v[0] as usize;
    }
    let texts = rt.calloc::<u8>(all.iter().copied().max().unwrap_or(1))?;
    rt.put(texts.at(0), text.as_bytes(), me)?;
    rt.barrier_all()?;
    if me == 0 {
        let mut parts = Vec::with_capacity(n);
        for (pe, &len) in all.iter().enumerate() {
            let mut bytes = vec![0u8; len];
            rt.get(texts.at(0), &mut bytes, pe)?;
            parts.push(String::from_utf8_lossy(&bytes).into_owned());
        }
        if json {
            let pes: Vec<Value> = parts
                .iter()
                .map(|p| serde_json::from_str(p).expect("every PE wrote one JSON object"))
                .collect();
            let mut doc = report_json(config);
            doc["pes"] = Value::Array(pes);
            println!("{doc:#}");
        } else {
            print!("{}", parts.concat());
        }
    }
    // Nobody frees (or exits) while PE 0 still reads.
    rt.barrier_all()?;
    rt.free(texts)?;
    rt.free(lens)?;
    rt.finalize()
}

/// The CPUs this process may run on, the NUMA nodes, and how symrun would bind PEs.
fn describe_cpus() -> String {
    let allowed = match CpuSet::of_this_thread() {
        Ok(c) => c,
        Err(e) => return format!("  unknown: sched_getaffinity failed: {e}"),
    };
    let nodes: Vec<String> = numa::nodes()
        .iter()
        .map(|n| format!("node {}: {}", n.id, n.cpus))
        .collect();
    let n = allowed.len();
    format!(
        "  this process may run on CPUs {allowed} ({n})\n  NUMA nodes: {}\n  symrun -n N and --pes N bind each PE to one of them when N <= {n}, else none (--bind-to core|numa|none, --map-by core|numa); PEs of other launchers keep their binding; a GPU PE is narrowed to its GPU's NUMA node",
        if nodes.is_empty() {
            "not listed (one node)".to_string()
        } else {
            nodes.join("; ")
        }
    )
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
quiet. See docs/src/debugging.md (the book's \"Debugging kernels on CPU PEs\").",
        config.exec_stack_size >> 10
    )
}

/// `--calibrate`: measures the host copies, prints what was measured and chosen, and
/// keeps it for init ([`symmem::copy_calibration`]).
fn calibrate(json: bool) -> ExitCode {
    let (c, kept) = symmem::copy_calibration::calibrate_and_save();
    let rows = |ts: &[symmem::copy_calibration::Timing]| -> Vec<Value> {
        ts.iter()
            .map(|t| json!({"bytes": t.bytes, "memcpy_gbs": t.memcpy, "method_gbs": t.other}))
            .collect()
    };
    let bound = |b: usize, off: usize| (b != off).then_some(b);
    if json {
        let doc = json!({
            "vector_copy_below": bound(c.vector_below, 0),
            "nt_copy_from": bound(c.nt_from, usize::MAX),
            "sliced_memcpy_from": c.sliced_band().map(|(from, _)| from),
            "sliced_memcpy_below": c.sliced_band().map(|(_, below)| below),
            "vector_copy": rows(&c.vector),
            "sliced_memcpy": rows(&c.sliced),
            "nt_copy": rows(&c.nt),
            "kept_in": kept.as_ref().map(|p| p.display().to_string()),
        });
        println!("{doc:#}");
        return ExitCode::SUCCESS;
    }
    println!("host copies measured on this machine (GB/s, the same buffers copied over and over):");
    for (name, ts) in [
        ("vector copy (aligned + 8 bytes off)", &c.vector),
        (
            "memcpy in 256 KiB slices (aligned + 8 bytes off)",
            &c.sliced,
        ),
        ("non-temporal stores", &c.nt),
    ] {
        for t in ts.iter() {
            println!(
                "  {:>9} B  {name}: {:6.1}   memcpy: {:6.1}",
                t.bytes, t.other, t.memcpy
            );
        }
    }
    let vector = match c.vector_below {
        0 => "never".to_string(),
        b => format!("from 2048 bytes up to {b}"),
    };
    let nt = match c.nt_from {
        usize::MAX => "never".to_string(),
        b => format!("from {b} bytes"),
    };
    let sliced = match c.sliced_band() {
        Some((from, below)) => format!("from {from} up to {below} bytes"),
        None => "never".to_string(),
    };
    println!(
        "chosen: the vector copy {vector}; memcpy in slices {sliced}; non-temporal stores {nt}"
    );
    if !symmem::copy_calibration::MEASURABLE {
        println!("not kept: this symmem-info is an unoptimized (debug) build, whose own copies are slow; init measures in optimized builds only");
        return ExitCode::SUCCESS;
    }
    match kept {
        Some(p) => println!(
            "kept for this boot in {} (init reads it; delete it to measure again)",
            p.display()
        ),
        None => println!(
            "not kept: no boot id or no private directory to keep it in; init measures again"
        ),
    }
    ExitCode::SUCCESS
}
