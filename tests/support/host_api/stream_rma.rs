//! Stream-ordered transfers: `get_on_stream` between symmetric buffers, and the forms whose
//! local operand lies outside the symmetric heap (`put_on_stream_from`,
//! `get_on_stream_into`, `put_signal_on_stream_from` with `signal_wait_until_on_stream`
//! on the receiver), each to the right neighbour with every element checked; then their
//! argument errors, returned before anything is queued.
//!
//! On a CPU PE the local operand is a `Vec` (host memory) and a stream is the calling
//! thread. On a GPU PE (`scripts/gpu-check.sh`) it is the device address of a heap buffer
//! of this PE's (device memory the runtime checks with the driver), the copies are queued
//! on the stream and read after `Stream::synchronize`; a neighbour on another node (2
//! simulated nodes) is reached by the `stream_rma` helper kernel through the proxy.

use symmem::{Runtime, Stream, SymBuf};

use super::{check_eq, elem, expect_err, finish, key, neighbours, OrFail, Outcome};

/// Elements moved per transfer: more than one page of u64s on the host.
const LEN: usize = 600;

/// The stream transfers and their errors: `stream_rma ok` on every PE.
pub fn stream_rma(rt: &Runtime) -> Outcome {
    finish(rt, "stream_rma", inner(rt))
}

/// The values PE `writer` sends in `round`.
fn values(writer: usize, round: u64) -> Vec<u64> {
    let seed = key(&[writer as u64, round]);
    (0..LEN).map(|i| elem(seed, i)).collect()
}

/// Local memory of this PE for a transfer: a `Vec` on a CPU PE, on a GPU PE a heap buffer
/// addressed raw (device memory of this PE's GPU).
struct Local<'a> {
    rt: &'a Runtime,
    host: Vec<u64>,
    device: &'a SymBuf<u64>,
}

impl Local<'_> {
    /// Its address, holding `data` first.
    fn holding(&mut self, data: &[u64]) -> Result<*mut u64, String> {
        if self.rt.is_gpu() {
            self.rt
                .put(self.device.at(0), data, self.rt.my_pe())
                .or_fail()?;
        } else {
            self.host.copy_from_slice(data);
        }
        self.addr()
    }

    /// Its address.
    fn addr(&mut self) -> Result<*mut u64, String> {
        if self.rt.is_gpu() {
            let p = self.rt.ptr(self.device, self.rt.my_pe()).or_fail()?;
            Ok(p.ok_or("no address for this PE's own heap")?.as_ptr())
        } else {
            Ok(self.host.as_mut_ptr())
        }
    }

    /// What it holds (after the stream has run).
    fn read(&self) -> Result<Vec<u64>, String> {
        if self.rt.is_gpu() {
            let mut out = vec![0u64; LEN];
            self.rt.read_local(self.device.at(0), &mut out).or_fail()?;
            Ok(out)
        } else {
            Ok(self.host.clone())
        }
    }
}

fn inner(rt: &Runtime) -> Outcome {
    let (me, _, right, left) = neighbours(rt);
    let stream = rt.create_stream().or_fail()?;
    let dst = rt.calloc::<u64>(LEN).or_fail()?;
    let src = rt.calloc::<u64>(LEN).or_fail()?;
    let sig = rt.calloc::<u64>(1).or_fail()?;
    let scratch = rt.calloc::<u64>(LEN).or_fail()?;
    let mut local = Local {
        rt,
        host: vec![0; LEN],
        device: &scratch,
    };
    let read = |buf: &SymBuf<u64>| -> Result<Vec<u64>, String> {
        let mut out = vec![0u64; LEN];
        rt.read_local(buf.at(0), &mut out).or_fail()?;
        Ok(out)
    };

    // put_on_stream_from: local memory into the right neighbour's dst.
    let p = local.holding(&values(me, 1))?;
    // SAFETY: `p` holds LEN elements until the stream is synchronized below.
    unsafe { rt.put_on_stream_from(dst.at(0), p, LEN, right, &stream) }.or_fail()?;
    stream.synchronize().or_fail()?;
    rt.barrier_all().or_fail()?;
    check_eq!(
        read(&dst)?,
        values(left, 1),
        "put_on_stream_from from PE {left}"
    );

    // get_on_stream: the right neighbour's src into this PE's dst.
    rt.put(src.at(0), &values(me, 2), me).or_fail()?;
    rt.barrier_all().or_fail()?;
    rt.get_on_stream(dst.at(0), src.at(0), LEN, right, &stream)
        .or_fail()?;
    stream.synchronize().or_fail()?;
    check_eq!(
        read(&dst)?,
        values(right, 2),
        "get_on_stream from PE {right}"
    );

    // get_on_stream_into: the right neighbour's src into local memory.
    let p = local.holding(&[0; LEN])?;
    // SAFETY: `p` holds LEN writable elements until the stream is synchronized below.
    unsafe { rt.get_on_stream_into(p, src.at(0), LEN, right, &stream) }.or_fail()?;
    stream.synchronize().or_fail()?;
    check_eq!(
        local.read()?,
        values(right, 2),
        "get_on_stream_into from PE {right}"
    );
    rt.barrier_all().or_fail()?;

    // put_signal_on_stream_from: data then signal; the receiver's stream waits for it.
    let p = local.holding(&values(me, 3))?;
    let add = symmem::SignalOp::Add;
    // SAFETY: as for put_on_stream_from.
    unsafe { rt.put_signal_on_stream_from(dst.at(0), p, LEN, sig.at(0), 5, add, right, &stream) }
        .or_fail()?;
    rt.signal_wait_until_on_stream(sig.at(0), symmem::Cmp::Ge, 5, &stream)
        .or_fail()?;
    stream.synchronize().or_fail()?;
    check_eq!(
        read(&dst)?,
        values(left, 3),
        "data behind the signal from PE {left}"
    );
    rt.barrier_all().or_fail()?;

    errors(rt, &stream, &dst, &mut local)?;
    rt.barrier_all().or_fail()
}

/// The argument errors, on this PE alone (no collective state involved).
fn errors(rt: &Runtime, stream: &Stream, dst: &SymBuf<u64>, local: &mut Local<'_>) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let s = |x: &str| x.to_string();
    let p = local.addr()?;
    // SAFETY (every call below): refused before any memory is touched, or no elements.
    unsafe {
        expect_err(
            rt.put_on_stream_from(dst.at(0), std::ptr::null(), 1, me, stream),
            "InvalidArgument",
            &[s("put_on_stream_from"), s("null address")],
        )?;
        let odd = p.cast::<u8>().wrapping_add(1).cast::<u64>();
        expect_err(
            rt.get_on_stream_into(odd, dst.at(0), 1, me, stream),
            "InvalidArgument",
            &[
                s("get_on_stream_into"),
                s("not aligned for its elements (8 bytes)"),
            ],
        )?;
        expect_err(
            rt.put_on_stream_from(dst.at(0), p, LEN + 1, me, stream),
            "OutOfBounds",
            &[s("put_on_stream_from")],
        )?;
        expect_err(
            rt.put_on_stream_from(dst.at(0), p, 1, n, stream),
            "InvalidPe",
            &[s("put_on_stream_from")],
        )?;
        expect_err(
            rt.put_signal_on_stream_from(
                dst.at(0),
                p,
                1,
                dst.at(0),
                1,
                symmem::SignalOp::Set,
                n,
                stream,
            ),
            "InvalidPe",
            &[s("put_signal_on_stream_from")],
        )?;
        // No elements: nothing to check or move, even at a null address.
        rt.put_on_stream_from(dst.at(0), std::ptr::null(), 0, me, stream)
            .or_fail()?;
        if rt.is_gpu() {
            // Host memory is not device memory of this PE's GPU.
            let host = [0u64; 4];
            expect_err(
                rt.put_on_stream_from(dst.at(0), host.as_ptr(), 4, me, stream),
                "InvalidArgument",
                &[s("put_on_stream_from"), s("is not device memory")],
            )?;
        }
    }
    expect_err(
        rt.get_on_stream(dst.at(0), dst.at(0), LEN, n, stream),
        "InvalidPe",
        &[s("get_on_stream")],
    )?;
    stream.synchronize().or_fail()
}
