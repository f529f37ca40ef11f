//! The device-initiated path: the buffers of `examples/kernels/src/moe.rs`, one step as
//! its three launches, and the expert-side checks of what the kernels counted.

use std::time::Instant;

use symmem::{Module, Runtime, SymBuf};
use symmem_example_kernels::moe::{moe_combine, moe_dispatch, moe_expert, DROPPED};

use crate::args::Scope;
use crate::check::Output;
use crate::report::Times;
use crate::routing::Shape;

/// Launch geometry.
#[derive(Debug, Clone, Copy)]
pub struct Geometry {
    /// Warp or block puts.
    pub scope: Scope,
    /// Blocks per launch.
    pub blocks: u32,
    /// Threads per block.
    pub threads: u32,
}

/// The symmetric buffers of one run (see the kernel module's layout).
pub struct DevicePath<'a> {
    rt: &'a Runtime,
    module: &'a Module,
    shape: Shape,
    geometry: Geometry,
    tokens: SymBuf<u64>,
    route: SymBuf<u64>,
    slot_of: SymBuf<u64>,
    recv: SymBuf<u64>,
    origin: SymBuf<u64>,
    combine_in: SymBuf<u64>,
    out: SymBuf<u64>,
    /// `counters[El] | dispatch_sig[n] | combine_sig[n] | sent[n] | received[n]`, zeroed
    /// before each step with one put.
    ctrl: SymBuf<u64>,
}

/// Indices of the parts of the control buffer.
struct Ctrl {
    dispatch_sig: usize,
    combine_sig: usize,
    sent: usize,
    received: usize,
    len: usize,
}

impl Ctrl {
    fn of(shape: &Shape) -> Self {
        let (el, n) = (shape.experts_per_pe(), shape.n_pes);
        Ctrl {
            dispatch_sig: el,
            combine_sig: el + n,
            sent: el + 2 * n,
            received: el + 3 * n,
            len: el + 4 * n,
        }
    }
}

/// The symmetric address of `buf` on this PE, for kernel arguments.
fn sym(rt: &Runtime, buf: &SymBuf<u64>) -> symmem::Result<*mut u64> {
    Ok(rt
        .ptr(buf, rt.my_pe())?
        .expect("own heap is mapped")
        .as_ptr())
}

impl<'a> DevicePath<'a> {
    /// Allocates the run's buffers (collective) and uploads this PE's tokens and routes.
    pub fn new(
        rt: &'a Runtime,
        module: &'a Module,
        shape: Shape,
        geometry: Geometry,
        routes: &[u64],
        tokens: &[u64],
    ) -> symmem::Result<Self> {
        let (t, h, k) = (shape.tokens, shape.hidden, shape.top_k);
        let slots = shape.experts_per_pe() * shape.capacity;
        let path = DevicePath {
            rt,
            module,
            shape,
            geometry,
            tokens: rt.alloc(t * h)?,
            route: rt.alloc(t * k)?,
            slot_of: rt.alloc(t * k)?,
            recv: rt.alloc(slots * h)?,
            origin: rt.alloc(slots)?,
            combine_in: rt.calloc(t * k * h)?,
            out: rt.alloc(t * h)?,
            ctrl: rt.alloc(Ctrl::of(&shape).len)?,
        };
        let me = rt.my_pe();
        rt.put(path.tokens.at(0), tokens, me)?;
        rt.put(path.route.at(0), routes, me)?;
        Ok(path)
    }

    /// One step: zero the counters and signals, a barrier, then dispatch, expert and
    /// combine, each timed on this PE.
    pub fn step(&self) -> symmem::Result<Times> {
        let (rt, s, g) = (self.rt, &self.shape, self.geometry);
        let ctrl = Ctrl::of(s);
        let me = rt.my_pe();
        rt.put(self.ctrl.at(0), &vec![0u64; ctrl.len], me)?;
        rt.barrier_all()?;
        let c = sym(rt, &self.ctrl)?;
        // SAFETY: the control buffer holds `ctrl.len` u64s; the parts below lie inside it.
        let (dispatch_sig, combine_sig, sent, received) = unsafe {
            (
                c.add(ctrl.dispatch_sig),
                c.add(ctrl.combine_sig),
                c.add(ctrl.sent),
                c.add(ctrl.received),
            )
        };
        let warp = u32::from(g.scope == Scope::Warp);
        let (route, slot_of) = (sym(rt, &self.route)?, sym(rt, &self.slot_of)?);
        let (recv, origin) = (sym(rt, &self.recv)?, sym(rt, &self.origin)?);
        let (combine_in, out) = (sym(rt, &self.combine_in)?, sym(rt, &self.out)?);
        let start = Instant::now();
        // SAFETY: every pointer is the symmetric address of a live allocation of this run,
        // sized by `new` for the shape the kernels are given; the counters are the first
        // `experts_per_pe` words of the control buffer.
        unsafe {
            rt.launch(
                self.module,
                moe_dispatch::KERNEL,
                g.blocks,
                g.threads,
                (
                    sym(rt, &self.tokens)?.cast_const(),
                    route.cast_const(),
                    slot_of,
                    c,
                    recv,
                    origin,
                    sent,
                    dispatch_sig,
                    s.tokens,
                    s.hidden,
                    s.top_k,
                    s.experts_per_pe(),
                    s.capacity,
                    warp,
                ),
            )?
        };
        let dispatched = Instant::now();
        // SAFETY: as above.
        unsafe {
            rt.launch(
                self.module,
                moe_expert::KERNEL,
                g.blocks,
                g.threads,
                (
                    recv,
                    origin.cast_const(),
                    c,
                    dispatch_sig,
                    received,
                    combine_in,
                    combine_sig,
                    s.hidden,
                    s.experts_per_pe(),
                    s.capacity,
                    g.blocks as usize,
                    warp,
                ),
            )?
        };
        let expert_done = Instant::now();
        // SAFETY: as above.
        unsafe {
            rt.launch(
                self.module,
                moe_combine::KERNEL,
                g.blocks,
                g.threads,
                (
                    combine_in.cast_const(),
                    route.cast_const(),
                    slot_of.cast_const(),
                    sent,
                    combine_sig,
                    out,
                    s.tokens,
                    s.hidden,
                    s.top_k,
                ),
            )?
        };
        let end = Instant::now();
        Ok(Times::of(start, dispatched, expert_done, end))
    }

    /// Reads back the step's output and checks what the kernels counted against the
    /// routing's `loads`: every expert of this PE saw one reservation per routed token,
    /// the dispatch signals announced exactly the rows its experts hold, and every row
    /// this PE sent came back.
    pub fn collect(&self, loads: &[u64]) -> Result<Output, String> {
        let (rt, s) = (self.rt, &self.shape);
        let me = rt.my_pe();
        let io = |e: symmem::Error| e.to_string();
        let ctrl_at = Ctrl::of(s);
        let mut ctrl = vec![0u64; ctrl_at.len];
        rt.get(self.ctrl.at(0), &mut ctrl, me).map_err(io)?;
        let el = s.experts_per_pe();
        let mut held = 0;
        for (local, &count) in ctrl[..el].iter().enumerate() {
            let e = me * el + local;
            if count != loads[e] {
                return Err(format!(
                    "device path: expert {e} on PE {me} counted {count} reservations, but the routing sends it {} tokens",
                    loads[e]
                ));
            }
            held += count.min(s.capacity as u64);
        }
        let received = &ctrl[ctrl_at.received..ctrl_at.received + s.n_pes];
        let announced: u64 = received.iter().sum();
        if announced != held {
            return Err(format!(
                "device path: the dispatch signals on PE {me} announce {announced} rows (per source PE: {received:?}), but its experts hold {held}"
            ));
        }
        for q in 0..s.n_pes {
            let (back, sent) = (ctrl[ctrl_at.combine_sig + q], ctrl[ctrl_at.sent + q]);
            if back != sent {
                return Err(format!(
                    "device path: PE {me} sent {sent} rows to PE {q}'s experts but got {back} back"
                ));
            }
        }
        let mut slot_of = vec![0u64; s.tokens * s.top_k];
        rt.get(self.slot_of.at(0), &mut slot_of, me).map_err(io)?;
        if let Some((c, &slot)) = slot_of
            .iter()
            .enumerate()
            .find(|(_, &x)| x != DROPPED && x >= s.capacity as u64)
        {
            return Err(format!(
                "device path: PE {me} choice {c} got slot {slot}, beyond the capacity {}",
                s.capacity
            ));
        }
        let mut out = vec![0u64; s.tokens * s.hidden];
        rt.get(self.out.at(0), &mut out, me).map_err(io)?;
        Ok(Output {
            out,
            kept: slot_of.iter().map(|&x| x != DROPPED).collect(),
        })
    }

    /// Frees the run's buffers (collective, in the reverse order of allocation).
    pub fn free(self) -> symmem::Result<()> {
        let rt = self.rt;
        rt.free(self.ctrl)?;
        rt.free(self.out)?;
        rt.free(self.combine_in)?;
        rt.free(self.origin)?;
        rt.free(self.recv)?;
        rt.free(self.slot_of)?;
        rt.free(self.route)?;
        rt.free(self.tokens)
    }
}
