//! The workload: seeded bf16 token values and a seeded, skewed top-k router with f32
//! weights. Every PE can compute every PE's routing, so the reference and the expected
//! per-expert loads need no communication.

use symmem::bf16;

/// SplitMix64: a small, well-mixed seeded generator (no dependency needed).
pub struct Rng(u64);

impl Rng {
    /// A generator for the stream named by `seed` and `parts`.
    pub fn new(seed: u64, parts: &[u64]) -> Self {
        let mut r = Rng(seed ^ 0x9e37_79b9_7f4a_7c15);
        for &p in parts {
            r.0 ^= p;
            r.next();
        }
        r
    }

    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform float in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One run's workload shape.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// PEs in the job.
    pub n_pes: usize,
    /// Tokens per PE.
    pub tokens: usize,
    /// Experts in total.
    pub experts: usize,
    /// bf16 elements per token.
    pub hidden: usize,
    /// Experts per token.
    pub top_k: usize,
    /// Slots per expert.
    pub capacity: usize,
    /// Rows travel as fp8 with per-128 scales (true) or as bf16.
    pub fp8: bool,
}

impl Shape {
    /// Experts on each PE.
    pub fn experts_per_pe(&self) -> usize {
        self.experts / self.n_pes
    }

    /// The PE that holds expert `e`.
    pub fn pe_of(&self, e: usize) -> usize {
        e / self.experts_per_pe()
    }
}

/// The router: expert popularity follows a Zipf law of exponent `skew` over a seeded
/// permutation of the experts, so the hot experts are spread over the PEs by the seed.
pub struct Router {
    /// Popularity of each expert (unnormalized).
    weight: Vec<f64>,
    seed: u64,
}

impl Router {
    /// The router of `experts` experts.
    pub fn new(experts: usize, skew: f64, seed: u64) -> Self {
        let mut order: Vec<usize> = (0..experts).collect();
        let mut rng = Rng::new(seed, &[0x726f_7574]);
        for i in (1..experts).rev() {
            order.swap(i, (rng.next() % (i as u64 + 1)) as usize);
        }
        let mut weight = vec![0.0; experts];
        for (rank, &e) in order.iter().enumerate() {
            weight[e] = 1.0 / ((rank + 1) as f64).powf(skew);
        }
        Router { weight, seed }
    }

    /// PE `pe`'s routing: `top_k` distinct experts per token, drawn by popularity without
    /// replacement, each with a weight in `(0, 1]` (a multiple of 1/256).
    pub fn routes(&self, shape: &Shape, pe: usize) -> Routes {
        let choices = shape.tokens * shape.top_k;
        let mut out = Routes {
            experts: Vec::with_capacity(choices),
            weights: Vec::with_capacity(choices),
        };
        let mut taken = vec![false; self.weight.len()];
        for t in 0..shape.tokens {
            let mut rng = Rng::new(self.seed, &[pe as u64, t as u64]);
            let mut chosen = Vec::with_capacity(shape.top_k);
            for _ in 0..shape.top_k {
                let left: f64 = (0..self.weight.len())
                    .filter(|&e| !taken[e])
                    .map(|e| self.weight[e])
                    .sum();
                let mut u = rng.unit() * left;
                // The last expert not yet taken, should rounding leave `u` past the end.
                let mut pick = (0..self.weight.len()).rev().find(|&e| !taken[e]);
                for e in (0..self.weight.len()).filter(|&e| !taken[e]) {
                    if u < self.weight[e] {
                        pick = Some(e);
                        break;
                    }
                    u -= self.weight[e];
                }
                let e = pick.expect("top_k <= experts leaves an expert to pick");
                taken[e] = true;
                chosen.push(e);
                out.experts.push(e as u32);
                out.weights.push((1 + rng.next() % 256) as f32 / 256.0);
            }
            for e in chosen {
                taken[e] = false;
            }
        }
        out
    }

    /// How many choices of the whole job go to each expert.
    pub fn loads(&self, shape: &Shape) -> Vec<u64> {
        let mut load = vec![0u64; shape.experts];
        for pe in 0..shape.n_pes {
            for e in self.routes(shape, pe).experts {
                load[e as usize] += 1;
            }
        }
        load
    }
}

/// One PE's routing, per choice (`token * k + j`).
pub struct Routes {
    /// The chosen expert.
    pub experts: Vec<u32>,
    /// The choice's weight in the token's combined output.
    pub weights: Vec<f32>,
}

/// PE `pe`'s token values: bf16 in `[-4, 4)`, distinct per PE, token and element.
pub fn token_values(shape: &Shape, pe: usize, seed: u64) -> Vec<bf16> {
    let mut rng = Rng::new(seed, &[0x0074_6f6b, pe as u64]);
    (0..shape.tokens * shape.hidden)
        .map(|_| bf16::from_f32((rng.unit() * 8.0 - 4.0) as f32))
        .collect()
}
