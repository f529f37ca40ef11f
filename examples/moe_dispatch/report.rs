//! Timings: per-step phase times, the slowest PE per step (a max reduce), medians over
//! the iterations, and the table and JSON lines PE 0 prints.

use std::time::Instant;

use symmem::collectives::Max;
use symmem::Runtime;
use symmem_example_kernels::moe::wire_words;

use crate::args::Dispatch;

/// Phases of one step, in nanoseconds: dispatch, expert, combine, and the whole step.
#[derive(Debug, Clone, Copy, Default)]
pub struct Times(pub [u64; 4]);

impl Times {
    /// The phases between the four instants of a step.
    pub fn of(start: Instant, dispatched: Instant, expert_done: Instant, end: Instant) -> Self {
        let ns = |a: Instant, b: Instant| b.duration_since(a).as_nanos() as u64;
        Times([
            ns(start, dispatched),
            ns(dispatched, expert_done),
            ns(expert_done, end),
            ns(start, end),
        ])
    }
}

/// One line of the report.
pub struct Row {
    /// `device` or `host-a2a`.
    pub path: &'static str,
    /// PEs.
    pub pes: usize,
    /// Tokens per PE.
    pub tokens: usize,
    /// Experts in total.
    pub experts: usize,
    /// Experts per token.
    pub top_k: usize,
    /// bf16 elements per token.
    pub hidden: usize,
    /// How rows travel to the experts.
    pub dispatch: Dispatch,
    /// Slots per expert.
    pub capacity: usize,
    /// Put scope and `blocks`x`threads` (device path), or `-`.
    pub scope: String,
    /// Tokens the job dropped per step.
    pub dropped: u64,
    /// With fp8 dispatch, the largest difference from the bf16 result as a fraction of its
    /// bound (0 with bf16).
    pub fp8_error: f32,
    /// Median phase times of the slowest PE, nanoseconds.
    pub median: Times,
}

impl Row {
    /// Tokens dispatched and combined per second by the whole job.
    pub fn tokens_per_s(&self) -> f64 {
        (self.pes * self.tokens) as f64 / (self.median.0[3] as f64 / 1e9)
    }

    /// GB/s of the rows in flight: the job's kept rows as they travel, over the dispatch
    /// time (DeepEP's dispatch bandwidth), and as bf16 results, over the expert and
    /// combine times (its combine bandwidth).
    pub fn gb_per_s(&self) -> (f64, f64) {
        let rows = (self.pes * self.tokens * self.top_k) as u64 - self.dropped;
        let fp8 = self.dispatch == Dispatch::Fp8;
        let wire = (rows as usize * wire_words(self.hidden, fp8) * 4) as f64;
        let back = (rows as usize * self.hidden * 2) as f64;
        let m = &self.median.0;
        (wire / m[0] as f64, back / (m[1] + m[2]) as f64)
    }

    /// The row as a JSON object on one line.
    pub fn json(&self) -> String {
        let us = |i: usize| self.median.0[i] as f64 / 1e3;
        let (dispatch_gbs, combine_gbs) = self.gb_per_s();
        format!(
            "{{\"example\":\"moe_dispatch\",\"path\":\"{}\",\"pes\":{},\"tokens\":{},\"experts\":{},\"top_k\":{},\"hidden\":{},\"dispatch\":\"{}\",\"capacity\":{},\"scope\":\"{}\",\"dropped\":{},\"fp8_error_of_bound\":{:.3},\"dispatch_gb_s\":{:.3},\"combine_gb_s\":{:.3},\"dispatch_us\":{:.1},\"expert_us\":{:.1},\"combine_us\":{:.1},\"step_us\":{:.1},\"tokens_per_s\":{:.0}}}",
            self.path,
            self.pes,
            self.tokens,
            self.experts,
            self.top_k,
            self.hidden,
            self.dispatch,
            self.capacity,
            self.scope,
            self.dropped,
            self.fp8_error,
            dispatch_gbs,
            combine_gbs,
            us(0),
            us(1),
            us(2),
            us(3),
            self.tokens_per_s()
        )
    }
}

/// The table of `rows`, with a header line.
pub fn table(rows: &[Row]) -> String {
    let mut s = format!(
        "{:<9} {:>6} {:>4} {:>2} {:>5} {:>4} {:>6} {:>12} {:>7} {:>12} {:>10} {:>11} {:>10} {:>11}\n",
        "path",
        "T",
        "E",
        "k",
        "H",
        "wire",
        "cap",
        "scope",
        "dropped",
        "dispatch_us",
        "expert_us",
        "combine_us",
        "step_us",
        "tokens/s"
    );
    for r in rows {
        let us = |i: usize| r.median.0[i] as f64 / 1e3;
        s += &format!(
            "{:<9} {:>6} {:>4} {:>2} {:>5} {:>4} {:>6} {:>12} {:>7} {:>12.1} {:>10.1} {:>11.1} {:>10.1} {:>11.0}\n",
            r.path,
            r.tokens,
            r.experts,
            r.top_k,
            r.hidden,
            r.dispatch.to_string(),
            r.capacity,
            r.scope,
            r.dropped,
            us(0),
            us(1),
            us(2),
            us(3),
            r.tokens_per_s()
        );
    }
    s
}

/// The per-phase medians over `steps` of the slowest PE of each step (collective: every
/// PE passes the same number of steps).
pub fn slowest_pe_medians(rt: &Runtime, steps: &[Times]) -> symmem::Result<Times> {
    let flat: Vec<u64> = steps.iter().flat_map(|t| t.0).collect();
    let src = rt.alloc::<u64>(flat.len())?;
    let dst = rt.alloc::<u64>(flat.len())?;
    rt.put(src.at(0), &flat, rt.my_pe())?;
    rt.team_world().reduce(&dst, &src, flat.len(), Max)?;
    let mut slowest = vec![0u64; flat.len()];
    rt.get(dst.at(0), &mut slowest, rt.my_pe())?;
    rt.free(dst)?;
    rt.free(src)?;
    let mut median = Times::default();
    for (phase, m) in median.0.iter_mut().enumerate() {
        let mut v: Vec<u64> = slowest.chunks_exact(4).map(|t| t[phase]).collect();
        v.sort_unstable();
        *m = v[v.len() / 2];
    }
    Ok(median)
}
