//! The host-driven baseline, two-sided style: the same routing, moved with host
//! collectives. Counts alltoall (each expert PE learns how many rows come from each
//! source), a max reduce to size the padded payload blocks, payload alltoall, the expert
//! function on the host, alltoall back, and the weighted sum on the host.
//!
//! A payload row is `2 + H / 2` u32s: a header of two words, then the token as it travels
//! (the kernels' wire format: bf16, or fp8 with per-128 scales) or, returning, its bf16
//! result. Forward headers are `[local expert, choice]`, returned ones `[choice, 0]`; unused
//! rows of a returned block have the header [`EMPTY`]. An expert PE keeps the first
//! `capacity` rows for each expert in source-PE order and drops the rest. The combine adds
//! each token's choices in choice order, as the kernels do, so both paths give the same
//! bits.

use std::time::Instant;

use symmem::collectives::Max;
use symmem::{bf16, Runtime, SymBuf};
use symmem_example_kernels::moe::wire::{
    encode_fp8_row, expert_fn, fp8_element, pack_bf16, unpack_bf16, wire_words,
};

use crate::check::Output;
use crate::report::Times;
use crate::routing::{Routes, Shape};

/// Header of an unused row in a returned block.
const EMPTY: u32 = u32::MAX;

/// Header words of a payload row.
const HEADER: usize = 2;

/// The symmetric buffers of one run.
pub struct Baseline<'a> {
    rt: &'a Runtime,
    shape: Shape,
    routes: &'a Routes,
    tokens: &'a [bf16],
    counts_send: SymBuf<u64>,
    counts_recv: SymBuf<u64>,
    block_max: SymBuf<u64>,
    block_max_all: SymBuf<u64>,
    payload_send: SymBuf<u32>,
    payload_recv: SymBuf<u32>,
}

impl<'a> Baseline<'a> {
    /// Allocates the run's buffers (collective); payload buffers fit the largest block
    /// possible, every choice of a PE to one PE.
    pub fn new(
        rt: &'a Runtime,
        shape: Shape,
        routes: &'a Routes,
        tokens: &'a [bf16],
    ) -> symmem::Result<Self> {
        let n = shape.n_pes;
        let counts = n * shape.experts_per_pe();
        let payload = n * shape.tokens * shape.top_k * (HEADER + shape.hidden / 2);
        Ok(Baseline {
            rt,
            shape,
            routes,
            tokens,
            counts_send: rt.alloc(counts)?,
            counts_recv: rt.alloc(counts)?,
            block_max: rt.alloc(1)?,
            block_max_all: rt.alloc(1)?,
            payload_send: rt.alloc(payload)?,
            payload_recv: rt.alloc(payload)?,
        })
    }

    /// One step after a barrier, timed on this PE; returns the times and the output.
    pub fn step(&self) -> symmem::Result<(Times, Output)> {
        let (rt, s) = (self.rt, &self.shape);
        let (me, n, h, k) = (rt.my_pe(), s.n_pes, s.hidden, s.top_k);
        let el = s.experts_per_pe();
        let (row, words) = (HEADER + h / 2, wire_words(h, s.fp8));
        let world = rt.team_world();
        rt.barrier_all()?;
        let start = Instant::now();

        // Dispatch: encode the tokens, bucket rows by PE, exchange counts, then the padded
        // payload.
        let wire = encode(s, self.tokens);
        let mut counts = vec![0u64; n * el];
        let mut rows: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (c, &e) in self.routes.experts.iter().enumerate() {
            let e = e as usize;
            let q = s.pe_of(e);
            counts[q * el + e % el] += 1;
            let (t, to) = (c / k, &mut rows[q]);
            to.extend_from_slice(&[(e % el) as u32, c as u32]);
            to.extend_from_slice(&wire[t * words..(t + 1) * words]);
            to.resize(to.len() + h / 2 - words, 0);
        }
        rt.put(self.counts_send.at(0), &counts, me)?;
        world.alltoall(&self.counts_recv, &self.counts_send, el)?;
        let longest = rows.iter().map(|r| r.len() / row).max().unwrap_or(0) as u64;
        rt.put(self.block_max.at(0), &[longest], me)?;
        world.reduce(&self.block_max_all, &self.block_max, 1, Max)?;
        let mut m = [0u64];
        rt.get(self.block_max_all.at(0), &mut m, me)?;
        let block = m[0] as usize * row;
        let mut send = vec![0u32; n * block];
        for (q, r) in rows.iter().enumerate() {
            send[q * block..q * block + r.len()].copy_from_slice(r);
        }
        rt.put(self.payload_send.at(0), &send, me)?;
        world.alltoall(&self.payload_recv, &self.payload_send, block)?;
        let mut recv = vec![0u32; n * block];
        rt.get(self.payload_recv.at(0), &mut recv, me)?;
        let mut from = vec![0u64; n * el];
        rt.get(self.counts_recv.at(0), &mut from, me)?;
        let dispatched = Instant::now();

        // Experts: the first `capacity` rows per expert, in source-PE order.
        let mut ret = vec![0u32; n * block];
        for r in ret.chunks_exact_mut(row) {
            r[0] = EMPTY;
        }
        let mut accepted = vec![0usize; el];
        for p in 0..n {
            let arrived: u64 = from[p * el..(p + 1) * el].iter().sum();
            let mut back = p * block;
            for i in 0..arrived as usize {
                let at = p * block + i * row;
                let local = recv[at] as usize;
                if accepted[local] == s.capacity {
                    continue;
                }
                accepted[local] += 1;
                let e = (me * el + local) as u32;
                ret[back] = recv[at + 1];
                ret[back + 1] = 0;
                let wire = &recv[at + HEADER..at + HEADER + words];
                let y = |i: usize| expert_fn(element(wire, h, i, s.fp8), e);
                for (w, out) in ret[back + HEADER..back + row].iter_mut().enumerate() {
                    *out = pack_bf16(y(2 * w), y(2 * w + 1));
                }
                back += row;
            }
        }
        let expert_done = Instant::now();

        // Combine: rows back to their origins, then the weighted sums in choice order.
        rt.put(self.payload_send.at(0), &ret, me)?;
        world.alltoall(&self.payload_recv, &self.payload_send, block)?;
        rt.get(self.payload_recv.at(0), &mut recv, me)?;
        let mut returned: Vec<Option<&[u32]>> = vec![None; s.tokens * k];
        for r in recv.chunks_exact(row).filter(|r| r[0] != EMPTY) {
            returned[r[0] as usize] = Some(&r[HEADER..]);
        }
        let mut out = vec![bf16::from_f32(0.0); s.tokens * h];
        for (t, token) in out.chunks_exact_mut(h).enumerate() {
            for (i, o) in token.iter_mut().enumerate() {
                let mut acc = 0f32;
                let choices = t * k..(t + 1) * k;
                for (r, w) in returned[choices.clone()]
                    .iter()
                    .zip(&self.routes.weights[choices])
                {
                    if let Some(r) = r {
                        acc += w * element(r, h, i, false);
                    }
                }
                *o = bf16::from_f32(acc);
            }
        }
        let kept = returned.iter().map(Option::is_some).collect();
        let end = Instant::now();
        Ok((
            Times::of(start, dispatched, expert_done, end),
            Output { out, kept },
        ))
    }

    /// Frees the run's buffers (collective, in the reverse order of allocation).
    pub fn free(self) -> symmem::Result<()> {
        let rt = self.rt;
        rt.free(self.payload_recv)?;
        rt.free(self.payload_send)?;
        rt.free(self.block_max_all)?;
        rt.free(self.block_max)?;
        rt.free(self.counts_recv)?;
        rt.free(self.counts_send)
    }
}

/// Every token as it travels: its bf16 words, or its fp8 row.
fn encode(shape: &Shape, tokens: &[bf16]) -> Vec<u32> {
    let (h, words) = (shape.hidden, wire_words(shape.hidden, shape.fp8));
    let mut wire = vec![0u32; shape.tokens * words];
    for (row, w) in tokens.chunks_exact(h).zip(wire.chunks_exact_mut(words)) {
        if shape.fp8 {
            encode_fp8_row(row, w);
        } else {
            for (out, pair) in w.iter_mut().zip(row.chunks_exact(2)) {
                *out = pack_bf16(pair[0], pair[1]);
            }
        }
    }
    wire
}

/// Element `i` of a wire row as an expert reads it.
fn element(wire: &[u32], hidden: usize, i: usize, fp8: bool) -> f32 {
    if fp8 {
        fp8_element(wire, hidden, i)
    } else {
        let (lo, hi) = unpack_bf16(wire[i / 2]);
        if i.is_multiple_of(2) { lo } else { hi }.to_f32()
    }
}
