// A miscompile found with the transpose example's tile loop (examples/kernels/src/transpose.rs,
// `add_transposed`, which is `#[inline(never)]` because of it).
//
//   rustc -O --edition 2021 docs/rustc_div_miscompile_repro.rs -o /tmp/repro && /tmp/repro
//
// rustc 1.95.0 (59807616e 2026-04-14), x86-64, opt-level 2 or 3: killed by SIGFPE (a `div` by a
// register holding 0), although the only divisor, `tiles_a`, is 4 on every call and the loop
// guard excludes 0. opt-level 1 prints "ok 8192". No unsafe operation goes out of bounds:
// `b < nb` and `a < a1 <= nb`, and `out` holds nb² elements.
use std::hint::black_box;

#[inline(never)]
unsafe fn kernel(out: *mut f64, nb: usize, blocks: usize, block: usize, warps: usize) {
    let rows = nb.div_ceil(blocks);
    let (a0, a1) = ((block * rows).min(nb), ((block + 1) * rows).min(nb));
    let (tiles_a, tiles_b) = ((a1 - a0).div_ceil(32), nb.div_ceil(32));
    let mut tile = 0;
    while tile < tiles_a * tiles_b {
        let a = a0 + (tile % tiles_a) * 32;
        let b0 = (tile / tiles_a) * 32;
        if a < a1 {
            let mut b = b0;
            while b < nb.min(b0 + 32) {
                // SAFETY: b < nb and a < nb, inside the nb² elements of `out`.
                unsafe { *out.add(b * nb + a) += 1.0 };
                b += 1;
            }
        }
        tile += warps;
    }
}

fn main() {
    let nb = black_box(512);
    let mut out = vec![0.0; nb * nb];
    for block in 0..4 {
        // SAFETY: `out` holds nb² elements.
        unsafe { kernel(out.as_mut_ptr(), nb, black_box(4), black_box(block), black_box(1)) };
    }
    println!("ok {}", out.iter().sum::<f64>());
}
