//! The deterministic mode's receive order, modelled on the host: each expert's slots
//! filled in (source PE, token) order, so the first `capacity` of its choices in that
//! order keep a slot; what every slot of this PE's experts then holds; and a digest of a
//! step's results, to compare steps and runs.

use symmem::bf16;
use symmem_example_kernels::moe::wire::{encode_fp8_row, pack_bf16, wire_words};

use crate::check::Output;
use crate::routing::{token_values, Router, Shape};

/// What a deterministic step must leave on this PE.
pub struct ReceiveOrder {
    /// Per choice of this PE (`token * k + j`): whether it keeps a slot.
    kept: Vec<bool>,
    /// This PE's experts' receive buffers, `experts_per_pe × capacity` rows of `words`.
    recv: Vec<u32>,
    /// Per local expert, the slots its choices fill.
    filled: Vec<usize>,
    /// u32 words per row in flight.
    words: usize,
    /// Slots per expert.
    capacity: usize,
}

impl ReceiveOrder {
    /// The model for PE `me` of the job's routing by `router` and token values of `seed`.
    pub fn new(shape: &Shape, router: &Router, seed: u64, me: usize) -> Self {
        let (el, h, k, cap) = (
            shape.experts_per_pe(),
            shape.hidden,
            shape.top_k,
            shape.capacity,
        );
        let words = wire_words(h, shape.fp8);
        let mut fill = vec![0usize; shape.experts];
        let mut recv = vec![0u32; el * cap * words];
        let mut kept = Vec::with_capacity(shape.tokens * k);
        for pe in 0..shape.n_pes {
            let routes = router.routes(shape, pe);
            let values = token_values(shape, pe, seed);
            for (c, &e) in routes.experts.iter().enumerate() {
                let e = e as usize;
                let slot = fill[e];
                let keep = slot < cap;
                if pe == me {
                    kept.push(keep);
                }
                if !keep {
                    continue;
                }
                fill[e] += 1;
                if shape.pe_of(e) == me {
                    let at = ((e % el) * cap + slot) * words;
                    encode(
                        &values[c / k * h..][..h],
                        &mut recv[at..at + words],
                        shape.fp8,
                    );
                }
            }
        }
        ReceiveOrder {
            kept,
            recv,
            filled: fill[me * el..(me + 1) * el].to_vec(),
            words,
            capacity: cap,
        }
    }

    /// Compares a step's kept choices and this PE's receive buffers `recv` with the model,
    /// bit for bit; the error names the path, PE, and the first choice or slot that differs.
    pub fn check(&self, path: &str, me: usize, kept: &[bool], recv: &[u32]) -> Result<(), String> {
        if let Some(c) = (0..kept.len()).find(|&c| kept[c] != self.kept[c]) {
            return Err(format!(
                "{path}: PE {me} choice {c} was {}, but in (source PE, token) order it {}",
                if kept[c] { "kept" } else { "dropped" },
                if self.kept[c] {
                    "has a slot"
                } else {
                    "comes after the expert's capacity"
                }
            ));
        }
        for (local, &filled) in self.filled.iter().enumerate() {
            for slot in 0..filled {
                let at = (local * self.capacity + slot) * self.words;
                let range = at..at + self.words;
                if recv[range.clone()] != self.recv[range] {
                    return Err(format!(
                        "{path}: PE {me} local expert {local} slot {slot} does not hold the row that (source PE, token) order puts there"
                    ));
                }
            }
        }
        Ok(())
    }

    /// A digest of a step's results on this PE: the combined tokens, the kept choices and
    /// the filled slots of `recv` (FNV-1a, 64 bits).
    pub fn digest(&self, output: &Output, recv: &[u32]) -> u64 {
        let mut d = Fnv::default();
        output
            .out
            .iter()
            .for_each(|x| d.add(u64::from(x.to_bits())));
        output.kept.iter().for_each(|&k| d.add(u64::from(k)));
        for (local, &filled) in self.filled.iter().enumerate() {
            let at = local * self.capacity * self.words;
            recv[at..at + filled * self.words]
                .iter()
                .for_each(|&w| d.add(u64::from(w)));
        }
        d.0
    }
}

/// `row` as it travels: bf16 pairs, or fp8 with its scales.
fn encode(row: &[bf16], wire: &mut [u32], fp8: bool) {
    if fp8 {
        encode_fp8_row(row, wire);
    } else {
        for (w, pair) in wire.iter_mut().zip(row.chunks_exact(2)) {
            *w = pack_bf16(pair[0], pair[1]);
        }
    }
}

/// The FNV-1a hash, fed a value at a time.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn add(&mut self, v: u64) {
        for byte in v.to_le_bytes() {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}
