//! The CPUs of a PE's helper threads: its transports' service threads and its proxy.

use super::CpuSet;
use crate::launcher::ENV_HELPER_CPUS;

/// Moves the calling thread, a helper thread of this PE named `name` (a transport's
/// service thread, the proxy), onto the CPUs that symrun chose for the PE's helpers
/// (`SYMMEM_LAUNCH_HELPER_CPUS`): those of the PE's NUMA node, not only the PE's own core,
/// so that a helper waking up does not preempt the PE's main thread on that core.
///
/// Without that variable (the PE is not bound, or was bound by mpirun, srun, torchrun or
/// `taskset`) the thread keeps the CPUs it inherited: a binding made by someone else is
/// never widened.
pub fn place_helper_thread(name: &str) {
    if let Ok(list) = std::env::var(ENV_HELPER_CPUS) {
        place_on(name, &list);
    }
}

/// [`place_helper_thread`] with the variable's value `list`.
fn place_on(name: &str, list: &str) {
    match list.parse::<CpuSet>() {
        Ok(cpus) => match cpus.bind_this_thread() {
            Ok(()) => tracing::debug!("{name}: on CPUs {cpus}, those of its PE's NUMA node"),
            Err(e) => tracing::warn!(
                "{name}: cannot move to CPUs {cpus} ({ENV_HELPER_CPUS}): {e}; it stays on its PE's CPUs"
            ),
        },
        Err(e) => tracing::warn!(
            "{ENV_HELPER_CPUS}={list:?} is not a CPU list ({e}); {name} stays on its PE's CPUs"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A helper thread started on one CPU moves to the list it is given; a list it cannot
    /// parse leaves it where it was.
    #[test]
    fn a_helper_thread_moves_to_the_given_cpus_and_ignores_a_bad_list() {
        let mine = CpuSet::of_this_thread().unwrap();
        let first = CpuSet::from_cpus([mine.cpus()[0]]);
        let (all, one) = (mine.to_string(), first.clone());
        std::thread::spawn(move || {
            one.bind_this_thread().unwrap();
            place_on("test helper", "not-a-list");
            assert_eq!(CpuSet::of_this_thread().unwrap(), one);
            place_on("test helper", &all);
            assert_eq!(CpuSet::of_this_thread().unwrap().to_string(), all);
        })
        .join()
        .unwrap();
    }
}
