//! The GPU check program and device selection, on the machine at hand. Without a GPU
//! (CI) the `gpu_check_pe` scenarios run on CPU PEs and `SYMMEM_DEVICE=cuda` must fail
//! init naming what is missing; with a GPU they run on GPU PEs
//! (`scripts/gpu-check.sh run` covers more there).

use symmem_test_harness::{run_job, Launcher};

const GPU_CHECK: &str = env!("CARGO_BIN_EXE_gpu_check_pe");

fn gpu_present() -> bool {
    symmem::cuda::driver_present()
}

#[test]
fn ipc_scenario_on_the_default_device() {
    for n in [2, 4] {
        let job = run_job(
            &Launcher::SelfLaunch,
            n,
            GPU_CHECK,
            &["ipc"],
            &[("SYMMEM_SYMMETRIC_SIZE", "64M")],
        );
        job.assert_ok(n, "ipc");
    }
}

#[test]
fn bad_module_scenario_on_the_default_device() {
    let job = run_job(
        &Launcher::SelfLaunch,
        1,
        GPU_CHECK,
        &["bad_module"],
        &[("SYMMEM_SYMMETRIC_SIZE", "64M")],
    );
    job.assert_ok(1, "bad_module");
}

#[test]
fn stream_ordered_operations_on_the_default_device() {
    for n in [2, 4] {
        let job = run_job(
            &Launcher::SelfLaunch,
            n,
            GPU_CHECK,
            &["stream"],
            &[("SYMMEM_SYMMETRIC_SIZE", "64M")],
        );
        job.assert_ok(n, "stream");
    }
}

/// `printf!` in a kernel prints one line per PE, formatted as C's printf does.
#[test]
fn device_printf_prints_on_the_default_device() {
    let job = run_job(
        &Launcher::SelfLaunch,
        2,
        GPU_CHECK,
        &["printf"],
        &[("SYMMEM_SYMMETRIC_SIZE", "64M")],
    );
    job.assert_ok(2, "printf");
    for pe in 0..2 {
        let line = format!("printf: PE {pe}: x=7 y=2.50 text");
        assert_eq!(
            job.stdout.lines().filter(|l| *l == line).count(),
            1,
            "{line:?} once in:\n{}",
            job.stdout
        );
    }
}

#[test]
fn cooperative_trap_panic_and_remote_scenarios_on_the_default_device() {
    for scenario in ["cooperative", "trap", "panic", "remote"] {
        let job = run_job(
            &Launcher::SelfLaunch,
            2,
            GPU_CHECK,
            &[scenario],
            &[("SYMMEM_SYMMETRIC_SIZE", "64M")],
        );
        job.assert_ok(2, scenario);
    }
}

/// What `gpu-check.sh run` runs through the GPU proxy channel, on the default device:
/// every scenario `device-test-pe --list-gpu-2-nodes` names, on 2 PEs that are 2
/// simulated nodes (`proxy_flood` on a 2-slot ring), as the script runs them.
#[test]
fn the_two_node_device_suite_of_the_gpu_check_on_the_default_device() {
    let pe = env!("CARGO_BIN_EXE_device-test-pe");
    let out = std::process::Command::new(pe)
        .arg("--list-gpu-2-nodes")
        .output()
        .expect("device-test-pe runs");
    let list = String::from_utf8(out.stdout).expect("utf-8");
    let scenarios: Vec<&str> = list.lines().collect();
    assert!(
        scenarios.contains(&"proxy_flood") && scenarios.contains(&"rma"),
        "{list}"
    );
    for s in scenarios {
        let slots = if s == "proxy_flood" { "2" } else { "1024" };
        let job = run_job(
            &Launcher::SelfLaunch,
            2,
            pe,
            &[s],
            &[
                ("SYMMEM_SIMULATE_NODES", "2"),
                ("SYMMEM_PROXY_SLOTS", slots),
                ("SYMMEM_SYMMETRIC_SIZE", "64M"),
            ],
        );
        job.assert_ok(2, s);
    }
}

#[test]
fn cuda_demanded_without_a_gpu_is_an_error_naming_what_is_missing() {
    if gpu_present() {
        eprintln!("SKIPPED: libcuda is present here, so SYMMEM_DEVICE=cuda is expected to work (the other tests run on the GPU)");
        return;
    }
    let job = run_job(
        &Launcher::SelfLaunch,
        2,
        GPU_CHECK,
        &["ipc"],
        &[("SYMMEM_DEVICE", "cuda")],
    );
    assert!(!job.status.success(), "{}\n{}", job.stdout, job.stderr);
    // Two PEs write to one stderr, so their lines may interleave: look for each PE's
    // message rather than for whole lines.
    for pe in 0..2 {
        let named = format!("init (SYMMEM_DEVICE=cuda): no GPU can be used on PE {pe}: the CUDA driver library (libcuda.so)");
        assert!(
            job.stderr.contains(&named),
            "{}\n{}",
            job.stdout,
            job.stderr
        );
    }
}

#[test]
fn a_bad_device_choice_names_the_variable() {
    let job = run_job(
        &Launcher::SelfLaunch,
        1,
        GPU_CHECK,
        &["ipc"],
        &[("SYMMEM_DEVICE", "tpu")],
    );
    assert!(!job.status.success());
    let all = format!("{}{}", job.stdout, job.stderr);
    assert!(
        all.contains("SYMMEM_DEVICE") && all.contains("tpu") && all.contains("auto, cpu or cuda"),
        "{all}"
    );
}
