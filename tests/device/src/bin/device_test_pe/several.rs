//! Two runtimes in every process, launching kernels at the same time: the launcher's job
//! (the scenario's runtime) and a job made with a unique id it broadcasts, on a thread of
//! its own. Each kernel must see its own runtime's device state (PE, heap, peer pointers)
//! and move data within its own runtime's heaps.

use symmem::Runtime;

use super::{collective, e2s, ring, Outcome};

/// Rounds of kernels each runtime runs.
const ROUNDS: usize = 3;

/// The kernels of one round: the ring's put_signal, every PE's identity and pointers
/// compared with the host's, and the device-side team collectives.
fn kernels(rt: &Runtime) -> Outcome {
    ring::ring_put_signal(rt)?;
    ring::identity(rt)?;
    collective::team_collectives(rt)
}

/// Job A (`a`) and job B, made here with `a`'s unique id, run [`kernels`] for [`ROUNDS`]
/// rounds at once, A on this thread and B on another; B finalizes first, then A runs a
/// round more alone.
pub fn two_runtimes(a: &Runtime) -> Outcome {
    let (me, n) = (a.my_pe(), a.n_pes());
    let id = a.broadcast_unique_id().map_err(e2s)?;
    std::thread::scope(|s| {
        let job_b = s.spawn(move || -> Outcome {
            let b = symmem::init_with_unique_id(me, n, &id).map_err(|e| format!("init B: {e}"))?;
            for round in 0..ROUNDS {
                kernels(&b).map_err(|e| format!("B, round {round}: {e}"))?;
            }
            b.finalize().map_err(|e| format!("finalize B: {e}"))
        });
        for round in 0..ROUNDS {
            kernels(a).map_err(|e| format!("A, round {round}: {e}"))?;
        }
        job_b
            .join()
            .map_err(|_| "B's thread panicked".to_string())?
    })?;
    kernels(a).map_err(|e| format!("A after B: {e}"))
}
