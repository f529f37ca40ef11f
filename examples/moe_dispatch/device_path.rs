//! The device-initiated path: the buffers of `examples/kernels/src/moe/`, one step as
//! its three launches (four in the deterministic mode: the count exchange first), and the
//! expert-side checks of what the kernels counted.

use std::time::Instant;

use symmem::{bf16, Module, Runtime, SymBuf};
use symmem_example_kernels::moe::{
    moe_combine, moe_count, moe_dispatch_block, moe_dispatch_warp, moe_expert_block,
    moe_expert_warp, wire_words, Ctrl, DROPPED, RUN_WORDS,
};

use crate::args::Scope;
use crate::check::Output;
use crate::report::Times;
use crate::routing::{Routes, Shape};

/// Launch geometry.
#[derive(Debug, Clone, Copy)]
pub struct Geometry {
    /// Warp or block groups: which instance of the dispatch and expert kernels runs.
    pub scope: Scope,
    /// Blocks per launch.
    pub blocks: u32,
    /// Threads per block.
    pub threads: u32,
    /// The deterministic mode: receive slots from a count exchange and prefix sums, not
    /// atomic reservations.
    pub deterministic: bool,
}

/// The symmetric buffers of one run (see the kernel module's layout).
pub struct DevicePath<'a> {
    rt: &'a Runtime,
    module: &'a Module,
    shape: Shape,
    geometry: Geometry,
    tokens: SymBuf<bf16>,
    experts: SymBuf<u32>,
    weights: SymBuf<f32>,
    pos_of: SymBuf<u32>,
    plan: SymBuf<u64>,
    send: SymBuf<u32>,
    recv: SymBuf<u32>,
    done: SymBuf<bf16>,
    runs: SymBuf<u64>,
    combine_in: SymBuf<bf16>,
    out: SymBuf<bf16>,
    /// [`Ctrl`]: counters and signals, zeroed before each step with one put.
    ctrl: SymBuf<u64>,
    /// The deterministic mode's exchanged counts, `[source PE][block][expert]`.
    counts_in: Option<SymBuf<u32>>,
}

/// The control buffer's layout for `shape`.
fn ctrl_of(shape: &Shape) -> Ctrl {
    Ctrl {
        experts_per_pe: shape.experts_per_pe(),
        n_pes: shape.n_pes,
    }
}

/// The symmetric address of `buf` on this PE, for kernel arguments.
fn sym<T>(rt: &Runtime, buf: &SymBuf<T>) -> symmem::Result<*mut T> {
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
        routes: &Routes,
        tokens: &[bf16],
    ) -> symmem::Result<Self> {
        let (t, h, k) = (shape.tokens, shape.hidden, shape.top_k);
        let words = wire_words(h, shape.fp8);
        let (n, el, blocks) = (
            shape.n_pes,
            shape.experts_per_pe(),
            geometry.blocks as usize,
        );
        let path = DevicePath {
            rt,
            module,
            shape,
            geometry,
            tokens: rt.alloc(t * h)?,
            experts: rt.alloc(t * k)?,
            weights: rt.alloc(t * k)?,
            pos_of: rt.alloc(t * k)?,
            plan: rt.alloc(blocks * shape.experts * RUN_WORDS)?,
            send: rt.alloc(t * k * words)?,
            recv: rt.alloc(el * shape.capacity * words)?,
            done: rt.alloc(el * shape.capacity * h)?,
            runs: rt.alloc(n * blocks * el * RUN_WORDS)?,
            combine_in: rt.calloc(t * k * h)?,
            out: rt.alloc(t * h)?,
            ctrl: rt.alloc(ctrl_of(&shape).words())?,
            counts_in: if geometry.deterministic {
                Some(rt.alloc(n * blocks * shape.experts)?)
            } else {
                None
            },
        };
        let me = rt.my_pe();
        rt.put(path.tokens.at(0), tokens, me)?;
        rt.put(path.experts.at(0), &routes.experts, me)?;
        rt.put(path.weights.at(0), &routes.weights, me)?;
        Ok(path)
    }

    /// One step: zero the counters and signals, a barrier, then dispatch, expert and
    /// combine, each timed on this PE.
    pub fn step(&self) -> symmem::Result<Times> {
        let (rt, s, g) = (self.rt, &self.shape, self.geometry);
        let me = rt.my_pe();
        rt.put(self.ctrl.at(0), &vec![0u64; ctrl_of(s).words()], me)?;
        rt.barrier_all()?;
        let fp8 = u32::from(s.fp8);
        let (dispatch, expert) = match g.scope {
            Scope::Warp => (moe_dispatch_warp::KERNEL, moe_expert_warp::KERNEL),
            Scope::Block => (moe_dispatch_block::KERNEL, moe_expert_block::KERNEL),
        };
        let (experts, pos_of, ctrl) = (
            sym(rt, &self.experts)?,
            sym(rt, &self.pos_of)?,
            sym(rt, &self.ctrl)?,
        );
        let (recv, done, runs) = (
            sym(rt, &self.recv)?,
            sym(rt, &self.done)?,
            sym(rt, &self.runs)?,
        );
        let (combine_in, out) = (sym(rt, &self.combine_in)?, sym(rt, &self.out)?);
        let counts_in = match &self.counts_in {
            Some(buf) => sym(rt, buf)?,
            None => std::ptr::null_mut(),
        };
        let start = Instant::now();
        if !counts_in.is_null() {
            // SAFETY: as below; `counts_in` holds n_pes × blocks × experts counts.
            unsafe {
                rt.launch(
                    self.module,
                    moe_count::KERNEL,
                    g.blocks,
                    g.threads,
                    (
                        experts.cast_const(),
                        counts_in,
                        ctrl,
                        s.tokens,
                        s.top_k,
                        s.experts_per_pe(),
                    ),
                )?
            };
        }
        // SAFETY: every pointer is the symmetric address of a live allocation of this run,
        // sized by `new` for the shape and geometry the kernels are given.
        unsafe {
            rt.launch(
                self.module,
                dispatch,
                g.blocks,
                g.threads,
                (
                    sym(rt, &self.tokens)?.cast_const(),
                    experts.cast_const(),
                    pos_of,
                    sym(rt, &self.plan)?,
                    sym(rt, &self.send)?,
                    recv,
                    runs,
                    ctrl,
                    counts_in.cast_const(),
                    s.tokens,
                    s.hidden,
                    s.top_k,
                    s.experts_per_pe(),
                    s.capacity,
                    fp8,
                ),
            )?
        };
        let dispatched = Instant::now();
        // SAFETY: as above.
        unsafe {
            rt.launch(
                self.module,
                expert,
                g.blocks,
                g.threads,
                (
                    recv.cast_const(),
                    runs.cast_const(),
                    ctrl,
                    done,
                    combine_in,
                    s.hidden,
                    s.experts_per_pe(),
                    s.capacity,
                    g.blocks as usize,
                    fp8,
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
                    sym(rt, &self.weights)?.cast_const(),
                    pos_of.cast_const(),
                    ctrl,
                    out,
                    s.tokens,
                    s.hidden,
                    s.top_k,
                    s.experts_per_pe(),
                ),
            )?
        };
        let end = Instant::now();
        Ok(Times::of(start, dispatched, expert_done, end))
    }

    /// Reads back the step's output and checks what the kernels counted against the
    /// routing's `loads`: every expert of this PE saw reservations for every routed token,
    /// the dispatch signals announced exactly the rows its experts hold, every row this PE
    /// sent came back, and every kept choice has a position inside the buffers.
    pub fn collect(&self, loads: &[u64]) -> Result<Output, String> {
        let (rt, s) = (self.rt, &self.shape);
        let me = rt.my_pe();
        let io = |e: symmem::Error| e.to_string();
        let layout = ctrl_of(s);
        let mut ctrl = vec![0u64; layout.words()];
        rt.get(self.ctrl.at(0), &mut ctrl, me).map_err(io)?;
        let el = s.experts_per_pe();
        let mut held = 0;
        let counters = self.counted(&ctrl[layout.counters()..layout.counters() + el])?;
        let what = if self.counts_in.is_some() {
            "exchanged counts"
        } else {
            "reservations"
        };
        for (local, &count) in counters.iter().enumerate() {
            let e = me * el + local;
            if count != loads[e] {
                return Err(format!(
                    "device path: expert {e} on PE {me} counted {count} {what}, but the routing sends it {} tokens",
                    loads[e]
                ));
            }
            held += count.min(s.capacity as u64);
        }
        let received = &ctrl[layout.received()..layout.received() + s.n_pes];
        let announced: u64 = received.iter().sum();
        if announced != held {
            return Err(format!(
                "device path: the dispatch signals on PE {me} announce {announced} rows (per source PE: {received:?}), but its experts hold {held}"
            ));
        }
        for q in 0..s.n_pes {
            let (back, sent) = (ctrl[layout.combine_sig() + q], ctrl[layout.sent() + q]);
            if back != sent {
                return Err(format!(
                    "device path: PE {me} sent {sent} rows to PE {q}'s experts but got {back} back"
                ));
            }
        }
        let choices = s.tokens * s.top_k;
        let mut pos_of = vec![0u32; choices];
        rt.get(self.pos_of.at(0), &mut pos_of, me).map_err(io)?;
        if let Some((c, &pos)) = pos_of
            .iter()
            .enumerate()
            .find(|(_, &x)| x != DROPPED && x as usize >= choices)
        {
            return Err(format!(
                "device path: PE {me} choice {c} got position {pos}, beyond its {choices} choices"
            ));
        }
        let mut out = vec![bf16::from_f32(0.0); s.tokens * s.hidden];
        rt.get(self.out.at(0), &mut out, me).map_err(io)?;
        Ok(Output {
            out,
            kept: pos_of.iter().map(|&x| x != DROPPED).collect(),
        })
    }

    /// Per local expert, the tokens the job routed to it as the kernels counted them: the
    /// slot `counters` (atomic mode), or the sum of every (source PE, block)'s exchanged
    /// count (deterministic mode).
    fn counted(&self, counters: &[u64]) -> Result<Vec<u64>, String> {
        let Some(buf) = &self.counts_in else {
            return Ok(counters.to_vec());
        };
        let (rt, s) = (self.rt, &self.shape);
        let me = rt.my_pe();
        let mut counts = vec![0u32; s.n_pes * self.geometry.blocks as usize * s.experts];
        rt.get(buf.at(0), &mut counts, me)
            .map_err(|e| e.to_string())?;
        let el = s.experts_per_pe();
        Ok((0..el)
            .map(|local| {
                counts
                    .chunks_exact(s.experts)
                    .map(|pair| u64::from(pair[me * el + local]))
                    .sum()
            })
            .collect())
    }

    /// This PE's experts' receive buffers after a step: `experts_per_pe × capacity` rows
    /// as they travelled.
    pub fn received(&self) -> Result<Vec<u32>, String> {
        let (rt, s) = (self.rt, &self.shape);
        let words = wire_words(s.hidden, s.fp8);
        let mut recv = vec![0u32; s.experts_per_pe() * s.capacity * words];
        rt.get(self.recv.at(0), &mut recv, rt.my_pe())
            .map_err(|e| e.to_string())?;
        Ok(recv)
    }

    /// Frees the run's buffers (collective, in the reverse order of allocation).
    pub fn free(self) -> symmem::Result<()> {
        let rt = self.rt;
        if let Some(buf) = self.counts_in {
            rt.free(buf)?;
        }
        rt.free(self.ctrl)?;
        rt.free(self.out)?;
        rt.free(self.combine_in)?;
        rt.free(self.runs)?;
        rt.free(self.done)?;
        rt.free(self.recv)?;
        rt.free(self.send)?;
        rt.free(self.plan)?;
        rt.free(self.pos_of)?;
        rt.free(self.weights)?;
        rt.free(self.experts)?;
        rt.free(self.tokens)
    }
}
