//! Teams as Python objects: TEAM_WORLD and the teams split from a team
//! (`split_strided`, `split_2d`), for the team collectives and barriers.

use std::sync::{Arc, MutexGuard, TryLockError};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use symmem::{Runtime, Team};

use crate::blocking::blocking;
use crate::errors::to_py;
use crate::handle::{self, runtime};
use crate::streams::{order, settle, Order};
use crate::team_slots::{self, Slot};

/// A team of PEs: `team_world()`, or a split of a team. `my_pe`/`n_pes` number the PEs
/// within it; the collectives take it as `team=`. Splits and `destroy()` are collective
/// over the parent (the team).
#[pyclass(module = "symmem._native", name = "Team")]
pub struct PyTeam {
    slot: Arc<Slot>,
}

impl PyTeam {
    /// Wraps `team`, which borrows the runtime that `handle` holds; `_held` is the
    /// caller's reference to it, which keeps finalize out until the team is registered.
    fn wrap(_held: &Arc<Runtime>, team: Team<'_>) -> PyTeam {
        PyTeam {
            slot: team_slots::register(_held, team),
        }
    }

    /// The team, locked for one call; an error after `destroy()` or finalize, or while
    /// another thread uses it.
    pub fn lock(&self) -> PyResult<TeamGuard<'_>> {
        let guard = match self.slot.try_lock() {
            Ok(g) => g,
            Err(TryLockError::WouldBlock) => {
                return Err(PyValueError::new_err(
                    "the team is in use by another thread's call",
                ))
            }
            Err(TryLockError::Poisoned(_)) => unreachable!("no call panics holding a team"),
        };
        if guard.is_none() {
            let why = if handle::is_initialized() {
                "the team was destroyed"
            } else {
                "symmem was finalized"
            };
            return Err(PyValueError::new_err(why));
        }
        Ok(TeamGuard(guard))
    }
}

/// A live team, locked for a call.
pub struct TeamGuard<'a>(MutexGuard<'a, Option<Team<'static>>>);

impl TeamGuard<'_> {
    /// The team.
    pub fn team(&self) -> &Team<'static> {
        self.0.as_ref().expect("checked by PyTeam::lock")
    }
}

/// TEAM_WORLD: every PE, numbered as in the job.
#[pyfunction]
pub fn team_world() -> PyResult<PyTeam> {
    let rt = runtime()?;
    let world = rt.team_world();
    Ok(PyTeam::wrap(&rt, world))
}

#[pymethods]
impl PyTeam {
    /// This PE's number in the team.
    #[getter]
    fn my_pe(&self) -> PyResult<usize> {
        Ok(self.lock()?.team().my_pe())
    }

    /// Number of PEs in the team.
    #[getter]
    fn n_pes(&self) -> PyResult<usize> {
        Ok(self.lock()?.team().n_pes())
    }

    /// The job-wide number of the team's PE `pe`.
    fn world_pe(&self, pe: usize) -> PyResult<usize> {
        self.lock()?.team().world_pe(pe).map_err(to_py)
    }

    /// The number in `dest` of this team's PE `pe`, or `None` when it is not in `dest`.
    fn translate_pe(&self, pe: usize, dest: PyRef<'_, PyTeam>) -> PyResult<Option<usize>> {
        if Arc::ptr_eq(&self.slot, &dest.slot) {
            let me = self.lock()?;
            return Ok(me.team().translate_pe(pe, me.team()));
        }
        Ok(self.lock()?.team().translate_pe(pe, dest.lock()?.team()))
    }

    /// A new team of the team's PEs `start, start + stride, …` (`size` of them), or `None`
    /// on the PEs outside it (`shmem_team_split_strided`). Collective over this team.
    fn split_strided(
        &self,
        py: Python<'_>,
        start: usize,
        stride: usize,
        size: usize,
    ) -> PyResult<Option<PyTeam>> {
        let rt = runtime()?;
        settle(py, &rt)?;
        let g = self.lock()?;
        let t = g.team();
        let child = blocking(py, || t.split_strided(start, stride, size))?;
        Ok(child.map(|c| PyTeam::wrap(&rt, c)))
    }

    /// `(xteam, yteam)`: this PE's row and column of the team laid out with `xrange`
    /// columns (`shmem_team_split_2d`). Collective over this team; on a GPU PE it first
    /// waits for torch's current stream (its queued collectives), as splits and
    /// `destroy` do.
    fn split_2d(&self, py: Python<'_>, xrange: usize) -> PyResult<(PyTeam, PyTeam)> {
        let rt = runtime()?;
        settle(py, &rt)?;
        let g = self.lock()?;
        let t = g.team();
        let (x, y) = blocking(py, || t.split_2d(xrange))?;
        Ok((PyTeam::wrap(&rt, x), PyTeam::wrap(&rt, y)))
    }

    /// Waits for every PE of the team (`shmem_team_sync`). Queued on a stream (GPU PEs:
    /// `stream`, default torch's current stream), the stream waits instead and the call
    /// returns at once (`nvshmemx_team_sync_on_stream`).
    #[pyo3(signature = (stream=None))]
    fn sync(&self, py: Python<'_>, stream: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let rt = runtime()?;
        let how = order(py, &rt, "team sync", stream)?;
        let g = self.lock()?;
        let t = g.team();
        match how {
            Order::Queued(s) => t.sync_on_stream(&s).map_err(to_py),
            Order::Now => blocking(py, || t.sync()),
        }
    }

    /// Quiet, then waits for every PE of the team. Queued on a stream (GPU PEs), as
    /// [`Self::sync`] (`nvshmemx_barrier_on_stream`).
    #[pyo3(signature = (stream=None))]
    fn barrier(&self, py: Python<'_>, stream: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let rt = runtime()?;
        let how = order(py, &rt, "team barrier", stream)?;
        let g = self.lock()?;
        let t = g.team();
        match how {
            Order::Queued(s) => t.barrier_on_stream(&s).map_err(to_py),
            Order::Now => blocking(py, || t.barrier()),
        }
    }

    /// Destroys the team (`shmem_team_destroy`): collective over it; TEAM_WORLD cannot be.
    /// On a GPU PE it first waits for torch's current stream (the team's queued
    /// collectives).
    fn destroy(&self, py: Python<'_>) -> PyResult<()> {
        let mut g = self.lock()?;
        if g.team().is_predefined() {
            return Err(PyValueError::new_err(
                "destroy: TEAM_WORLD is predefined and cannot be destroyed",
            ));
        }
        settle(py, &*runtime()?)?;
        let team = g.0.take().expect("checked by lock");
        blocking(py, || team.destroy())
    }

    fn __repr__(&self) -> String {
        match self.lock() {
            Ok(g) => format!(
                "<symmem team: PE {} of {}>",
                g.team().my_pe(),
                g.team().n_pes()
            ),
            Err(e) => format!("<symmem team: {e}>"),
        }
    }
}
