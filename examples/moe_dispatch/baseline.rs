//! The host-driven baseline, two-sided style: the same routing, moved with host
//! collectives. Counts alltoall (each expert PE learns how many rows come from each
//! source), a max reduce to size the padded payload blocks, payload alltoall, the expert
//! function on the host, alltoall back, and the weighted sum on the host.
//!
//! A payload row is `H + 1` u64s: a header, then the token. Forward headers are
//! `local expert << 32 | choice`, returned headers the choice; unused rows of a returned
//! block have the header [`EMPTY`]. An expert PE keeps the first `capacity` rows for
//! each expert in source-PE order and drops the rest.

use std::time::Instant;

use symmem::collectives::Max;
use symmem::{Runtime, SymBuf};
use symmem_example_kernels::moe::expert_fn;

use crate::check::Output;
use crate::report::Times;
use crate::routing::{expert, weight, Shape};

/// Header of an unused row in a returned block.
const EMPTY: u64 = u64::MAX;

/// The symmetric buffers of one run.
pub struct Baseline<'a> {
    rt: &'a Runtime,
    shape: Shape,
    routes: &'a [u64],
    tokens: &'a [u64],
    counts_send: SymBuf<u64>,
    counts_recv: SymBuf<u64>,
    block_max: SymBuf<u64>,
    block_max_all: SymBuf<u64>,
    payload_send: SymBuf<u64>,
    payload_recv: SymBuf<u64>,
}

impl<'a> Baseline<'a> {
    /// Allocates the run's buffers (collective); payload buffers fit the largest block
    /// possible, every choice of a PE to one PE.
    pub fn new(
        rt: &'a Runtime,
        shape: Shape,
        routes: &'a [u64],
        tokens: &'a [u64],
    ) -> symmem::Result<Self> {
        let n = shape.n_pes;
        let counts = n * shape.experts_per_pe();
        let payload = n * shape.tokens * shape.top_k * (shape.hidden + 1);
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
        let row = h + 1;
        let world = rt.team_world();
        rt.barrier_all()?;
        let start = Instant::now();

        // Dispatch: bucket rows by PE, exchange counts, then the padded payload.
        let mut counts = vec![0u64; n * el];
        let mut rows: Vec<Vec<u64>> = vec![Vec::new(); n];
        for (c, &r) in self.routes.iter().enumerate() {
            let e = expert(r);
            let q = s.pe_of(e);
            counts[q * el + e % el] += 1;
            rows[q].push(((e % el) as u64) << 32 | c as u64);
            let t = c / k;
            rows[q].extend_from_slice(&self.tokens[t * h..(t + 1) * h]);
        }
        rt.put(self.counts_send.at(0), &counts, me)?;
        world.alltoall(&self.counts_recv, &self.counts_send, el)?;
        let longest = rows.iter().map(|r| r.len() / row).max().unwrap_or(0) as u64;
        rt.put(self.block_max.at(0), &[longest], me)?;
        world.reduce(&self.block_max_all, &self.block_max, 1, Max)?;
        let mut m = [0u64];
        rt.get(self.block_max_all.at(0), &mut m, me)?;
        let block = m[0] as usize * row;
        let mut send = vec![0u64; n * block];
        for (q, r) in rows.iter().enumerate() {
            send[q * block..q * block + r.len()].copy_from_slice(r);
        }
        rt.put(self.payload_send.at(0), &send, me)?;
        world.alltoall(&self.payload_recv, &self.payload_send, block)?;
        let mut recv = vec![0u64; n * block];
        rt.get(self.payload_recv.at(0), &mut recv, me)?;
        let mut from = vec![0u64; n * el];
        rt.get(self.counts_recv.at(0), &mut from, me)?;
        let dispatched = Instant::now();

        // Experts: the first `capacity` rows per expert, in source-PE order.
        let mut ret = vec![0u64; n * block];
        for r in ret.chunks_exact_mut(row) {
            r[0] = EMPTY;
        }
        let mut accepted = vec![0usize; el];
        for p in 0..n {
            let arrived: u64 = from[p * el..(p + 1) * el].iter().sum();
            let mut back = p * block;
            for i in 0..arrived as usize {
                let at = p * block + i * row;
                let local = (recv[at] >> 32) as usize;
                if accepted[local] == s.capacity {
                    continue;
                }
                accepted[local] += 1;
                let e = (me * el + local) as u64;
                ret[back] = recv[at] & 0xffff_ffff;
                for j in 1..row {
                    ret[back + j] = expert_fn(recv[at + j], e);
                }
                back += row;
            }
        }
        let expert_done = Instant::now();

        // Combine: rows back to their origins, then the weighted sums.
        rt.put(self.payload_send.at(0), &ret, me)?;
        world.alltoall(&self.payload_recv, &self.payload_send, block)?;
        rt.get(self.payload_recv.at(0), &mut recv, me)?;
        let mut out = vec![0u64; s.tokens * h];
        let mut kept = vec![false; s.tokens * k];
        for r in recv.chunks_exact(row).filter(|r| r[0] != EMPTY) {
            let c = r[0] as usize;
            kept[c] = true;
            let (w, t) = (weight(self.routes[c]), c / k);
            for (o, &v) in out[t * h..(t + 1) * h].iter_mut().zip(&r[1..]) {
                *o = o.wrapping_add(w.wrapping_mul(v));
            }
        }
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
