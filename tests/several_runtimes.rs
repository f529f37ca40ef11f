//! Several runtimes in one process (tests/support/several_runtimes.rs): in every process
//! of a job, a runtime in the launcher's job and one made with a unique id, on two threads
//! at once and on one thread in turns, each torn down while the other lives; and a second
//! runtime in the launcher's job refused while the first lives.

mod common;
use common::run_scenario;

#[test]
fn two_jobs_on_two_threads_4_pes() {
    let job = run_scenario(4, "two_jobs_two_threads", &[]);
    job.assert_success();
    assert_eq!(job.stdout.matches("two_jobs_two_threads ok").count(), 4);
}

/// On 2 simulated nodes of 2 PEs: each runtime has its own socket transport (listeners,
/// ports, threads), and B's is gone when B is.
#[test]
fn two_jobs_on_two_threads_2_nodes() {
    let job = run_scenario(4, "two_jobs_two_threads", &common::TWO_NODES);
    job.assert_success();
    assert_eq!(job.stdout.matches("two_jobs_two_threads ok").count(), 4);
}

#[test]
fn two_jobs_on_one_thread_in_turns() {
    let job = run_scenario(2, "two_jobs_one_thread", &[]);
    job.assert_success();
    assert_eq!(job.stdout.matches("two_jobs_one_thread ok").count(), 2);
    for e in job.lines_with("ERROR:") {
        assert!(e.contains("belongs to runtime instance"), "{e}");
    }
    assert_eq!(job.lines_with("ERROR:").len(), 2, "{}", job.stdout);
}

#[test]
fn a_second_runtime_in_the_launchers_job_is_refused() {
    let job = run_scenario(2, "second_launcher_init", &[]);
    job.assert_success();
    assert_eq!(job.stdout.matches("second_launcher_init ok").count(), 2);
    let errors = job.lines_with("ERROR:");
    assert_eq!(errors.len(), 2, "{}", job.stdout);
    for e in errors {
        assert!(
            e.contains("already has a live runtime in the job that")
                && e.contains("init_with_unique_id"),
            "{e}"
        );
    }
}
