//! `symmem._native`: the Rust half of the `symmem` Python package. The package's
//! `__init__.py` re-exports it with the Python-side conveniences (dtype names from numpy
//! and torch, `symmem.torch`, finalize at exit); see `python/README.md`.

mod alltoallv;
mod array;
mod blocking;
mod collectives;
mod dlpack;
mod dtype;
mod errors;
mod handle;
mod kernels;
mod operands;
mod ops;
mod peer;
mod setup;
mod streams;
mod team;
mod team_slots;
mod torch_tensor;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use array::SymArray;
use dtype::DType;
use errors::{to_py, SymmemError};

/// This PE's number, 0 to `n_pes() - 1`.
#[pyfunction]
fn my_pe() -> PyResult<usize> {
    Ok(handle::runtime()?.my_pe())
}

/// Number of PEs in the job.
#[pyfunction]
fn n_pes() -> PyResult<usize> {
    Ok(handle::runtime()?.n_pes())
}

/// `cpu`, or this PE's GPU (ordinal, name, architecture, PCI bus).
#[pyfunction]
fn device() -> PyResult<String> {
    Ok(handle::runtime()?.device_description())
}

/// The element type named `dtype` (numpy's names).
fn parse_dtype(dtype: &str) -> PyResult<DType> {
    DType::parse(dtype).ok_or_else(|| {
        PyTypeError::new_err(format!(
            "unsupported dtype {dtype:?} (supported: {})",
            DType::NAMES.join(", ")
        ))
    })
}

/// A new symmetric array of `shape` and `dtype` (numpy's name), uninitialized.
/// Collective: every PE calls it with the same shape and dtype, in the same order.
#[pyfunction]
fn empty(shape: Vec<i64>, dtype: &str) -> PyResult<SymArray> {
    SymArray::allocate(shape, parse_dtype(dtype)?, false)
}

/// A new symmetric array of zeros (collective, as [`empty`]; it ends with a barrier, so
/// no PE writes into a peer's copy before that peer zeroed it).
#[pyfunction]
fn zeros(shape: Vec<i64>, dtype: &str) -> PyResult<SymArray> {
    SymArray::allocate(shape, parse_dtype(dtype)?, true)
}

/// The address at which this process reaches PE `pe`'s copy of the symmetric operand
/// `array` (a same-node peer's mapped heap), or `None` where it has no direct mapping.
#[pyfunction]
fn ptr(array: &Bound<'_, PyAny>, pe: usize) -> PyResult<Option<usize>> {
    let rt = handle::runtime()?;
    let o = operands::symmetric(&rt, "ptr", array, "array")?;
    let v = operands::view::<u8>(&rt, "ptr", &o, "array", o.nbytes().max(1))?;
    Ok(rt.ptr(&v, pe).map_err(to_py)?.map(|p| p.as_ptr() as usize))
}

/// Every PE's `mine` (0: this PE agrees; anything else: why it refuses), by PE: a
/// collective over the world (every PE calls it, in the same order as its other
/// collective calls), for a decision that one PE could otherwise take alone and leave the
/// others waiting in the next collective (`rendezvous` agrees through it that every PE's
/// torch rank is its PE number). A collective point for dropped arrays too.
#[pyfunction]
fn vote(py: Python<'_>, mine: u64) -> PyResult<Vec<u64>> {
    let rt = handle::runtime()?;
    py.allow_threads(|| handle::vote(&rt, mine)).map_err(to_py)
}

/// Runs `program args…` as `n` PEs on this machine (what `python -m symmem.run` does, as
/// `symrun`); returns 0 when every PE succeeded, else the first failing PE's exit code.
#[pyfunction]
#[pyo3(signature = (n, program, args, tag_output=false))]
fn launch(
    py: Python<'_>,
    n: usize,
    program: String,
    args: Vec<String>,
    tag_output: bool,
) -> PyResult<i32> {
    if n == 0 {
        return Err(PyValueError::new_err("launch: n must be at least 1"));
    }
    let config = symmem::Config::from_env().map_err(to_py)?;
    let opts = symmem::bootstrap::launcher::LaunchOptions {
        n_pes: n,
        program: program.into(),
        args: args.into_iter().map(Into::into).collect(),
        tag_output,
        timeout: config.bootstrap_timeout,
        kill_grace: symmem::DEFAULT_KILL_GRACE,
        // symrun's default binding: a core per PE unless oversubscribed.
        binding: Default::default(),
    };
    py.allow_threads(|| symmem::bootstrap::launcher::run(&opts))
        .map_err(|e| SymmemError::new_err(format!("launch: {e}")))
}

/// The module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SymmemError", m.py().get_type::<SymmemError>())?;
    m.add("DTYPES", DType::NAMES.to_vec())?;
    m.add_class::<SymArray>()?;
    m.add_class::<team::PyTeam>()?;
    m.add_class::<peer::PeerArray>()?;
    m.add_class::<kernels::PyKernelModule>()?;
    m.add_function(wrap_pyfunction!(kernels::load_module, m)?)?;
    m.add_function(wrap_pyfunction!(peer::peer_array, m)?)?;
    m.add_function(wrap_pyfunction!(team::team_world, m)?)?;
    m.add(
        "UnfreedArrayWarning",
        m.py().get_type::<errors::UnfreedArrayWarning>(),
    )?;
    m.add_class::<setup::PyUniqueId>()?;
    m.add_function(wrap_pyfunction!(setup::init, m)?)?;
    m.add_function(wrap_pyfunction!(setup::get_unique_id, m)?)?;
    m.add_function(wrap_pyfunction!(vote, m)?)?;
    m.add_function(wrap_pyfunction!(setup::finalize, m)?)?;
    m.add_function(wrap_pyfunction!(setup::is_initialized, m)?)?;
    m.add_function(wrap_pyfunction!(setup::gpu_ordinal, m)?)?;
    m.add_function(wrap_pyfunction!(my_pe, m)?)?;
    m.add_function(wrap_pyfunction!(n_pes, m)?)?;
    m.add_function(wrap_pyfunction!(device, m)?)?;
    m.add_function(wrap_pyfunction!(empty, m)?)?;
    m.add_function(wrap_pyfunction!(zeros, m)?)?;
    m.add_function(wrap_pyfunction!(ptr, m)?)?;
    m.add_function(wrap_pyfunction!(launch, m)?)?;
    m.add_function(wrap_pyfunction!(ops::put, m)?)?;
    m.add_function(wrap_pyfunction!(ops::put_nbi, m)?)?;
    m.add_function(wrap_pyfunction!(ops::get, m)?)?;
    m.add_function(wrap_pyfunction!(ops::get_nbi, m)?)?;
    m.add_function(wrap_pyfunction!(ops::put_signal, m)?)?;
    m.add_function(wrap_pyfunction!(ops::signal_op, m)?)?;
    m.add_function(wrap_pyfunction!(ops::signal_fetch, m)?)?;
    m.add_function(wrap_pyfunction!(ops::signal_wait_until, m)?)?;
    m.add_function(wrap_pyfunction!(ops::wait_until, m)?)?;
    m.add_function(wrap_pyfunction!(ops::test, m)?)?;
    m.add_function(wrap_pyfunction!(ops::atomic_fetch, m)?)?;
    m.add_function(wrap_pyfunction!(ops::atomic_set, m)?)?;
    m.add_function(wrap_pyfunction!(ops::atomic_swap, m)?)?;
    m.add_function(wrap_pyfunction!(ops::atomic_compare_swap, m)?)?;
    m.add_function(wrap_pyfunction!(ops::atomic_fetch_add, m)?)?;
    m.add_function(wrap_pyfunction!(ops::atomic_add, m)?)?;
    m.add_function(wrap_pyfunction!(ops::atomic_fetch_inc, m)?)?;
    m.add_function(wrap_pyfunction!(ops::atomic_inc, m)?)?;
    m.add_function(wrap_pyfunction!(ops::atomic_fetch_and, m)?)?;
    m.add_function(wrap_pyfunction!(ops::atomic_and, m)?)?;
    m.add_function(wrap_pyfunction!(ops::atomic_fetch_or, m)?)?;
    m.add_function(wrap_pyfunction!(ops::atomic_or, m)?)?;
    m.add_function(wrap_pyfunction!(ops::atomic_fetch_xor, m)?)?;
    m.add_function(wrap_pyfunction!(ops::atomic_xor, m)?)?;
    m.add_function(wrap_pyfunction!(ops::fence, m)?)?;
    m.add_function(wrap_pyfunction!(ops::quiet, m)?)?;
    m.add_function(wrap_pyfunction!(ops::barrier_all, m)?)?;
    m.add_function(wrap_pyfunction!(ops::sync_all, m)?)?;
    m.add_function(wrap_pyfunction!(collectives::broadcast, m)?)?;
    m.add_function(wrap_pyfunction!(collectives::fcollect, m)?)?;
    m.add_function(wrap_pyfunction!(collectives::alltoall, m)?)?;
    m.add_function(wrap_pyfunction!(collectives::reduce, m)?)?;
    m.add_function(wrap_pyfunction!(collectives::reducescatter, m)?)?;
    m.add_function(wrap_pyfunction!(alltoallv::alltoallv, m)?)?;
    Ok(())
}
