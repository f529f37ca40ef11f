//! Measuring: which benchmarks run together ([`groups`]), and how one size of a group is
//! warmed up, timed and sampled ([`measure`]).

use crate::args::{Options, MIN_ITERS};
use crate::ctx::Ctx;
use crate::initiator::Initiator;
use crate::stats::{Sampler, Stats};
use crate::table::{Bench, Kind, Transport, BENCHES};

/// The benchmark named `metric` of `initiator` that runs on this kind of PE, if any (a
/// CPU baseline has no GPU counterpart of the same name).
pub fn bench(metric: &str, initiator: Initiator, gpu: bool) -> Option<&'static Bench> {
    BENCHES
        .iter()
        .find(|b| b.metric == metric && b.initiator == initiator && b.on.includes(gpu))
}

/// The selected benchmarks in measuring order, each with its baseline in front (unless
/// `--no-baseline`): a group is measured together. A baseline that a selected benchmark
/// refers to is measured in that benchmark's group rather than on its own.
pub fn groups(o: &Options, gpu: bool, transport: Transport) -> Vec<Vec<&'static Bench>> {
    // Remote PEs are measured from the host: device initiators reach them only through
    // the proxy channel.
    // Baselines (memcpy, a flag ping-pong through the mapping) need P2P.
    let p2p = transport == Transport::P2p;
    let is_baseline = |b: &Bench| BENCHES.iter().any(|d| d.baseline == Some(b.metric));
    let reaches = |b: &Bench| p2p || (b.initiator == Initiator::Host && !is_baseline(b));
    let selected: Vec<&Bench> = BENCHES
        .iter()
        .filter(|b| {
            o.selected(b.metric)
                && o.runs_initiator(b.initiator)
                && b.on.includes(gpu)
                && reaches(b)
        })
        .collect();
    selected
        .iter()
        .filter(|b| !selected.iter().any(|d| d.baseline == Some(b.metric)))
        .map(|b| {
            b.baseline
                .filter(|_| p2p && o.baselines)
                .and_then(|m| BENCHES.iter().find(|d| d.metric == m && d.on.includes(gpu)))
                .into_iter()
                .chain([*b])
                .collect()
        })
        .collect()
}

/// How many directions `b` moves bytes in at once: 2 with `--bidir` where it applies.
pub fn directions(b: &Bench, o: &Options) -> usize {
    if o.bidir && b.bidir {
        2
    } else {
        1
    }
}

/// Measures one size of a group: a warm-up run of each member, then `reps` rounds in
/// which every member runs once, each run after a barrier. Interleaving keeps a benchmark
/// and its baseline under the same conditions (clock speed and neighbours drift on a
/// shared VM over seconds). Host latency rows run a second time in each round, timed in
/// batches sized from the warm-up (see [`Sampler::batch_for`]), each batch one sample;
/// the value comes from the first, bare run. Returns one summary per member (meaningful
/// on the initiator only).
pub fn measure(c: &Ctx, group: &[&Bench], size: usize, o: &Options) -> symmem::Result<Vec<Stats>> {
    let iters_of = |b: &Bench| {
        let iters = o.iters_for(size);
        b.max_iters.map_or(iters, |m| iters.min(m).max(MIN_ITERS))
    };
    let sampled =
        |b: &Bench| matches!(b.kind, Kind::Latency { .. }) && b.initiator == Initiator::Host;
    let mut batches = Vec::with_capacity(group.len());
    for b in group {
        let warmup = o.warmup_for(iters_of(b));
        set_batch(c, 0);
        c.rt.barrier_all()?;
        let elapsed = if warmup > 0 {
            (b.run)(c, size, warmup)?
        } else {
            Default::default()
        };
        batches.push(match (sampled(b), warmup) {
            (false, _) => 0,
            // No warm-up to size the batches from: every operation is one sample.
            (true, 0) => 1,
            (true, w) => Sampler::batch_for(elapsed.div_f64(w as f64)),
        });
    }
    let mut reps = vec![Vec::with_capacity(o.reps); group.len()];
    let mut samples = vec![Vec::new(); group.len()];
    for _ in 0..o.reps {
        for (i, b) in group.iter().enumerate() {
            let iters = iters_of(b);
            set_batch(c, 0);
            c.rt.barrier_all()?;
            let elapsed = (b.run)(c, size, iters)?;
            reps[i].push(b.kind.value(elapsed, iters, size, directions(b, o)));
            if sampled(b) {
                // A second run, timed batch by batch: the clock reads and the batch
                // loop stay out of the run the value comes from.
                set_batch(c, batches[i]);
                c.rt.barrier_all()?;
                (b.run)(c, size, iters)?;
                let sampler = c.sampler.borrow();
                samples[i].extend(
                    sampler
                        .batches
                        .iter()
                        .map(|&(d, n)| b.kind.value(d, n, size, 1)),
                );
            }
        }
    }
    Ok(group
        .iter()
        .zip(reps)
        .zip(samples)
        .zip(batches)
        .map(|(((b, reps), samples), batch)| {
            let sample_ops = if samples.is_empty() {
                iters_of(b)
            } else {
                batch
            };
            Stats::of(reps, samples, sample_ops)
        })
        .collect())
}

/// Sets the batch size of the next run and forgets the batches of the last one.
fn set_batch(c: &Ctx, batch: usize) {
    let mut s = c.sampler.borrow_mut();
    s.batch = batch;
    s.batches.clear();
}
