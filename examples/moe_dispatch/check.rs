//! The checks of one step against the host reference, shared by both paths: the combined
//! tokens element by element, and the dropped tokens per expert against the routing and
//! the capacity.

use symmem::collectives::Sum;
use symmem::Runtime;
use symmem_example_kernels::moe::expert_fn;

use crate::args::Overflow;
use crate::routing::{expert, weight, Shape};

/// What a step left on this PE: the combined tokens and which choices were kept.
pub struct Output {
    /// `tokens × hidden` combined values.
    pub out: Vec<u64>,
    /// Per choice (`token * k + j`): whether its expert had room for it.
    pub kept: Vec<bool>,
}

/// Compares `got` with the reference: each token's weighted sum of `expert_fn` over its
/// kept choices. The error names the path, PE, token and element.
pub fn check_output(
    path: &str,
    shape: &Shape,
    me: usize,
    routes: &[u64],
    tokens: &[u64],
    got: &Output,
) -> Result<(), String> {
    let (h_n, k) = (shape.hidden, shape.top_k);
    for t in 0..shape.tokens {
        for h in 0..h_n {
            let want = (0..k)
                .filter(|&j| got.kept[t * k + j])
                .map(|j| {
                    let r = routes[t * k + j];
                    weight(r).wrapping_mul(expert_fn(tokens[t * h_n + h], expert(r) as u64))
                })
                .fold(0u64, u64::wrapping_add);
            let have = got.out[t * h_n + h];
            if have != want {
                let choices: Vec<String> = (0..k)
                    .map(|j| {
                        let r = routes[t * k + j];
                        let state = if got.kept[t * k + j] {
                            "kept"
                        } else {
                            "dropped"
                        };
                        format!("expert {} weight {} {state}", expert(r), weight(r))
                    })
                    .collect();
                return Err(format!(
                    "{path}: PE {me} token {t} element {h}: expected {want}, got {have} (input {}; {})",
                    tokens[t * h_n + h],
                    choices.join(", ")
                ));
            }
        }
    }
    Ok(())
}

/// Sums every PE's dropped choices per expert (collective), checks them against the
/// routing's `loads` and the capacity, and applies the overflow policy. Returns the
/// tokens dropped in the whole job.
pub fn check_drops(
    rt: &Runtime,
    path: &str,
    shape: &Shape,
    routes: &[u64],
    kept: &[bool],
    loads: &[u64],
    policy: Overflow,
) -> Result<u64, Box<dyn std::error::Error>> {
    let mut mine = vec![0u64; shape.experts];
    for (r, _) in routes.iter().zip(kept).filter(|(_, &k)| !k) {
        mine[expert(*r)] += 1;
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
