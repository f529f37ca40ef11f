//! The checks of one step against the host reference, shared by both paths: the combined
//! tokens bit for bit, with fp8 dispatch also within its error bound of the bf16 result,
//! and the dropped tokens per expert against the routing and the capacity.

use symmem::collectives::Sum;
use symmem::{bf16, Runtime};
use symmem_example_kernels::moe::wire::{
    encode_fp8_row, expert_fn, expert_scale, fp8_element, wire_words, SCALE_BLOCK,
};

use crate::args::Overflow;
use crate::routing::{Routes, Shape};

/// What a step left on this PE: the combined tokens and which choices were kept.
pub struct Output {
    /// `tokens × hidden` combined values.
    pub out: Vec<bf16>,
    /// Per choice (`token * k + j`): whether its expert had room for it.
    pub kept: Vec<bool>,
}

/// The host model of this PE's tokens: what the experts read of each element (the bf16
/// value, or its fp8 round trip) and, with fp8, each element's fp8 error bound.
pub struct Reference<'a> {
    shape: Shape,
    routes: &'a Routes,
    tokens: &'a [bf16],
    /// Per element, the value an expert reads.
    inputs: Vec<f32>,
    /// Per element, the most its fp8 round trip may differ from the bf16 value (empty
    /// with bf16 dispatch).
    input_error: Vec<f32>,
}

/// `2^-8`: the largest relative rounding error of bf16 (8 significand bits).
const BF16_HALF_ULP: f32 = 1.0 / 256.0;

impl<'a> Reference<'a> {
    /// The model of `tokens` routed by `routes`.
    pub fn new(shape: Shape, routes: &'a Routes, tokens: &'a [bf16]) -> Self {
        let h = shape.hidden;
        if !shape.fp8 {
            let inputs = tokens.iter().map(|x| x.to_f32()).collect();
            return Reference {
                shape,
                routes,
                tokens,
                inputs,
                input_error: Vec::new(),
            };
        }
        let mut wire = vec![0u32; wire_words(h, true)];
        let (mut inputs, mut input_error) = (Vec::with_capacity(tokens.len()), Vec::new());
        input_error.reserve(tokens.len());
        for row in tokens.chunks_exact(h) {
            encode_fp8_row(row, &mut wire);
            for (i, x) in row.iter().enumerate() {
                inputs.push(fp8_element(&wire, h, i));
                // E4M3 keeps 4 significand bits (half an ulp is 2^-4 of the value) down to
                // 2^-6; below, steps of 2^-9 (half: 2^-10), both times the block's scale;
                // plus the f32 roundings of x * inverse and q * scale.
                let scale = f32::from_bits(wire[h / 4 + i / SCALE_BLOCK]);
                input_error.push(x.to_f32().abs() * (1.0 / 16.0 + 1e-6) + scale / 1024.0);
            }
        }
        Reference {
            shape,
            routes,
            tokens,
            inputs,
            input_error,
        }
    }

    /// Element `h` of token `t` combined over the kept choices, from expert inputs
    /// `inputs`: f32 products in choice order, rounded once (the kernels' order).
    fn combined(&self, inputs: &[f32], kept: &[bool], t: usize, h: usize) -> bf16 {
        let (hn, k) = (self.shape.hidden, self.shape.top_k);
        let mut acc = 0f32;
        let choices = t * k..(t + 1) * k;
        let routes = self.routes.experts[choices.clone()]
            .iter()
            .zip(&self.routes.weights[choices.clone()]);
        for ((&e, &w), _) in routes.zip(&kept[choices]).filter(|(_, &k)| k) {
            acc += w * expert_fn(inputs[t * hn + h], e).to_f32();
        }
        bf16::from_f32(acc)
    }

    /// The fp8 error bound of element `h` of token `t` against the bf16 dispatch: each
    /// kept choice's input error through its expert (`scale_e` times it, plus the bf16
    /// roundings of both outputs), weighted, plus the final roundings of both results
    /// and the f32 sums.
    fn fp8_bound(&self, kept: &[bool], t: usize, h: usize, exact: bf16, got: bf16) -> f32 {
        let (hn, k) = (self.shape.hidden, self.shape.top_k);
        let at = t * hn + h;
        let mut bound = BF16_HALF_ULP * (exact.to_f32().abs() + got.to_f32().abs());
        for c in (t * k..(t + 1) * k).filter(|&c| kept[c]) {
            let e = self.routes.experts[c];
            let y = expert_fn(self.tokens[at].to_f32(), e).to_f32();
            let y8 = expert_fn(self.inputs[at], e).to_f32();
            let through =
                expert_scale(e) * self.input_error[at] + BF16_HALF_ULP * (y.abs() + y8.abs());
            bound += self.routes.weights[c] * (through + 1e-6 * (y.abs() + y8.abs()));
        }
        bound
    }

    /// Compares `got` with the model, bit for bit, and with fp8 dispatch also against the
    /// bf16 dispatch within [`Self::fp8_bound`]. The error names the path, PE, token and
    /// element. Returns the largest fp8 error as a fraction of its bound (0 with bf16).
    pub fn check(&self, path: &str, me: usize, got: &Output) -> Result<f32, String> {
        let hn = self.shape.hidden;
        let exact_inputs: Vec<f32> = if self.shape.fp8 {
            self.tokens.iter().map(|x| x.to_f32()).collect()
        } else {
            Vec::new()
        };
        let mut worst = 0f32;
        for t in 0..self.shape.tokens {
            for h in 0..hn {
                let want = self.combined(&self.inputs, &got.kept, t, h);
                let have = got.out[t * hn + h];
                if have.to_bits() != want.to_bits() {
                    return Err(self.mismatch(path, me, got, t, h, want));
                }
                if self.shape.fp8 {
                    let exact = self.combined(&exact_inputs, &got.kept, t, h);
                    let bound = self.fp8_bound(&got.kept, t, h, exact, have);
                    let error = (have.to_f32() - exact.to_f32()).abs();
                    if error > bound {
                        return Err(format!(
                            "{path}: PE {me} token {t} element {h}: the fp8 result {have} is {error} from the bf16 result {exact}, beyond its bound {bound}"
                        ));
                    }
                    if bound > 0.0 {
                        worst = worst.max(error / bound);
                    }
                }
            }
        }
        Ok(worst)
    }

    /// The error of a mismatch at token `t`, element `h`.
    fn mismatch(
        &self,
        path: &str,
        me: usize,
        got: &Output,
        t: usize,
        h: usize,
        want: bf16,
    ) -> String {
        let k = self.shape.top_k;
        let choices: Vec<String> = (t * k..(t + 1) * k)
            .map(|c| {
                let state = if got.kept[c] { "kept" } else { "dropped" };
                format!(
                    "expert {} weight {} {state}",
                    self.routes.experts[c], self.routes.weights[c]
                )
            })
            .collect();
        let have = got.out[t * self.shape.hidden + h];
        format!(
            "{path}: PE {me} token {t} element {h}: expected {want} ({:#06x}), got {have} ({:#06x}) (input {}; {})",
            want.to_bits(),
            have.to_bits(),
            self.tokens[t * self.shape.hidden + h],
            choices.join(", ")
        )
    }
}

/// Sums every PE's dropped choices per expert (collective), checks them against the
/// routing's `loads` and the capacity, and applies the overflow policy. Returns the
/// tokens dropped in the whole job.
pub fn check_drops(
    rt: &Runtime,
    path: &str,
    shape: &Shape,
    routes: &Routes,
    kept: &[bool],
    loads: &[u64],
    policy: Overflow,
) -> Result<u64, Box<dyn std::error::Error>> {
    let mut mine = vec![0u64; shape.experts];
    for (&e, _) in routes.experts.iter().zip(kept).filter(|(_, &k)| !k) {
        mine[e as usize] += 1;
    }
    let src = rt.alloc::<u64>(shape.experts)?;
    let dst = rt.alloc::<u64>(shape.experts)?;
    rt.put(src.at(0), &mine, rt.my_pe())?;
    rt.team_world().reduce(&dst, &src, shape.experts, Sum)?;
    let mut dropped = vec![0u64; shape.experts];
    rt.get(dst.at(0), &mut dropped, rt.my_pe())?;
    rt.free(dst)?;
    rt.free(src)?;
    let cap = shape.capacity as u64;
    for e in 0..shape.experts {
        let want = loads[e].saturating_sub(cap);
        if dropped[e] != want {
            return Err(format!(
                "{path}: expert {e} (PE {}): {} of its tokens were dropped, but the routing sends it {} and its capacity is {cap}, so {want} should be",
                shape.pe_of(e),
                dropped[e],
                loads[e]
            )
            .into());
        }
        if want > 0 && policy == Overflow::Error {
            return Err(format!(
                "{path}: capacity overflow: expert {e} on PE {} received {} tokens, more than its capacity of {cap} (--capacity); the {want} extra tokens were not written. Use a larger --capacity, or --on-overflow drop",
                shape.pe_of(e),
                cap + dropped[e]
            )
            .into());
        }
    }
    Ok(dropped.iter().sum())
}
