//! The workload: seeded token values and a seeded, skewed top-k router. Every PE can
//! compute every PE's routing, so the reference and the expected per-expert loads need
//! no communication.

use symmem_example_kernels::moe::pack_route;

/// Largest integer routing weight (weights are `1..=MAX_WEIGHT`).
const MAX_WEIGHT: u64 = 4;

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
    /// u64s per token.
    pub hidden: usize,
    /// Experts per token.
    pub top_k: usize,
    /// Slots per expert.
    pub capacity: usize,
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

    /// The route words ([`pack_route`]) of PE `pe`'s tokens: `top_k` distinct experts per
    /// token, drawn by popularity without replacement, each with a weight in `1..=4`.
    pub fn routes(&self, shape: &Shape, pe: usize) -> Vec<u64> {
        let mut out = Vec::with_capacity(shape.tokens * shape.top_k);
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
                let w = 1 + rng.next() % MAX_WEIGHT;
                out.push(pack_route(e as u32, w as u32));
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
            for r in self.routes(shape, pe) {
                load[expert(r)] += 1;
            }
        }
        load
    }
}

/// The expert of a route word.
pub fn expert(route: u64) -> usize {
    (route & 0xffff_ffff) as usize
}

/// The weight of a route word.
pub fn weight(route: u64) -> u64 {
    route >> 32
}

/// PE `pe`'s token values: small integers, distinct per PE, token and element.
pub fn token_values(shape: &Shape, pe: usize, seed: u64) -> Vec<u64> {
    let mut rng = Rng::new(seed, &[0x0074_6f6b, pe as u64]);
    (0..shape.tokens * shape.hidden)
        .map(|_| rng.next() % 65_536)
        .collect()
}
