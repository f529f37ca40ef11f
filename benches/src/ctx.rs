//! What the run functions share: the runtime, this PE's part in the pair being measured,
//! the buffers, and the timing loop that samples batches of operations.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use symmem::{Runtime, SymBuf, SymView};

use crate::sizes::{ELEM, MAX_SIZE, ROTATION_WINDOW};
use crate::stats::Sampler;

/// What this PE does in the point-to-point benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Issues the operations and times them (PE 0, or the source of a matrix pair).
    Initiator,
    /// The target; answers ping-pongs (PE 1, or the destination of a matrix pair).
    Target,
    /// Any further PE: joins the collectives and barriers only.
    Idle,
}

/// Everything the run functions share.
pub struct Ctx<'a> {
    /// The runtime.
    pub rt: &'a Runtime,
    /// This PE's part in the pair being measured.
    pub role: Cell<Role>,
    /// The other PE of the pair.
    pub peer: Cell<usize>,
    /// Bandwidth metrics run both directions at once (`--bidir`).
    pub bidir: bool,
    /// `--misalign`: where memcpy_bw's destination starts in `scratch`.
    pub misalign: usize,
    /// The target of single-word operations.
    pub word: SymBuf<u64>,
    /// The ping-pong signal.
    pub sig: SymBuf<u64>,
    /// The target of transfers, [`MAX_SIZE`] bytes and one page.
    pub big: SymBuf<u64>,
    /// `big`'s bytes from `--misalign` on: the remote side of host puts and gets.
    pub big_bytes: SymView<u8>,
    /// Local source of transfers, [`MAX_SIZE`] bytes and one page, pre-touched.
    pub src: Vec<Page>,
    /// Local destination of gets and of the memcpy baseline, pre-touched.
    pub scratch: RefCell<Vec<Page>>,
    /// Symmetric source (and device get destination) of transfers, [`MAX_SIZE`] bytes:
    /// what device code on a GPU PE can read, where `src` is host memory.
    pub gsrc: SymBuf<u64>,
    /// The rotating bandwidth rows' buffers, allocated (collectively) at their first use.
    pub window: RefCell<Option<Window>>,
    /// The benchmark kernels, loaded for this PE (PTX on a GPU PE).
    pub module: symmem::Module,
    /// The stream of the stream-ordered rows.
    pub stream: symmem::Stream,
    /// The timed batches of the repetition being measured.
    pub sampler: RefCell<Sampler>,
}

/// Source and destination of the rotating bandwidth rows, [`ROTATION_WINDOW`] bytes each.
pub struct Window {
    /// The destination (written on the peer).
    pub dst: SymBuf<u64>,
    /// The source (read on this PE).
    pub src: SymBuf<u64>,
}

impl Ctx<'_> {
    /// The rotating rows' buffers, allocated by every PE at the first call (a collective
    /// allocation: every PE calls this at the same point of the run).
    pub fn window(&self) -> symmem::Result<std::cell::Ref<'_, Window>> {
        if self.window.borrow().is_none() {
            let alloc = || self.rt.alloc_aligned::<u64>(ROTATION_WINDOW / ELEM, PAGE);
            let (dst, src) = (alloc()?, alloc()?);
            *self.window.borrow_mut() = Some(Window { dst, src });
        }
        Ok(std::cell::Ref::map(self.window.borrow(), |w| {
            w.as_ref().expect("allocated above")
        }))
    }

    /// This PE's part.
    pub fn role(&self) -> Role {
        self.role.get()
    }

    /// The other PE of the pair.
    pub fn peer(&self) -> usize {
        self.peer.get()
    }

    /// Zeroes this PE's signal word, then waits in a barrier: each run of a signal metric
    /// counts from 1 again, and the barrier keeps the reset from overwriting a signal the
    /// peer already sent.
    pub fn reset_signal(&self) -> symmem::Result<()> {
        self.rt.atomic_set(self.sig.at(0), 0, self.rt.my_pe())?;
        self.rt.barrier_all()
    }

    /// Whether this PE issues the timed operations of a bandwidth metric: the initiator,
    /// and with `--bidir` the target too (towards the initiator).
    pub fn sends(&self) -> bool {
        match self.role() {
            Role::Initiator => true,
            Role::Target => self.bidir,
            Role::Idle => false,
        }
    }

    /// The end of a bandwidth repetition: with `--bidir`, a barrier, so that the
    /// initiator's time covers both directions.
    pub fn bw_done(&self) -> symmem::Result<()> {
        if self.bidir {
            self.rt.barrier_all()?;
        }
        Ok(())
    }
}

/// One page of a local buffer. Local buffers are vectors of pages, so they start on a
/// page boundary like `big` (allocated page-aligned): a put and the memcpy baseline then
/// copy between the same relative alignments. With different offsets within the page,
/// loads alias in-flight stores (4K aliasing), which cost a third of the 4 KiB bandwidth
/// on the machine measured and would have compared the two unfairly.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(4096))]
pub struct Page([u64; PAGE / ELEM]);

/// Bytes per [`Page`].
pub const PAGE: usize = 4096;

/// `MAX_SIZE` bytes and one page (for `--misalign`) of pages filled with `byte`; a
/// non-zero fill writes (pre-touches) every page, where zeroed memory may stay unmapped.
pub fn pages(byte: u8) -> Vec<Page> {
    vec![Page([u64::from_ne_bytes([byte; ELEM]); PAGE / ELEM]); MAX_SIZE / PAGE + 1]
}

/// The first `size` bytes of `pages` as u64 elements.
pub fn words(pages: &[Page], size: usize) -> &[u64] {
    &bytemuck::cast_slice(pages)[..size / ELEM]
}

/// `size` bytes of `pages` from byte `at`.
pub fn bytes(pages: &[Page], at: usize, size: usize) -> &[u8] {
    &bytemuck::cast_slice(pages)[at..at + size]
}

/// `size` bytes of `pages` from byte `at`, mutable.
pub fn bytes_mut(pages: &mut [Page], at: usize, size: usize) -> &mut [u8] {
    &mut bytemuck::cast_slice_mut(pages)[at..at + size]
}

/// The first `size` bytes of `pages` as mutable u64 elements.
pub fn words_mut(pages: &mut [Page], size: usize) -> &mut [u64] {
    &mut bytemuck::cast_slice_mut(pages)[..size / ELEM]
}

/// Times `iters` calls of `op` (given the iteration number). With a batch size in the
/// sampler, each batch of that many calls is also timed and recorded there ([`sampled`]);
/// without one (0), the loop is the bare loop whose total the reported values come from.
#[inline(always)]
pub fn timed(
    c: &Ctx,
    iters: usize,
    mut op: impl FnMut(usize) -> symmem::Result<()>,
) -> symmem::Result<Duration> {
    let batch = c.sampler.borrow().batch;
    if batch != 0 {
        return sampled(c, iters, batch, op);
    }
    let t0 = Instant::now();
    for i in 0..iters {
        op(i)?;
    }
    Ok(t0.elapsed())
}

/// [`timed`] batch by batch. Kept out of line: a second copy of the operation inlined
/// beside the bare loop changed how the runtime's calls inlined into it, which moved the
/// 4–8 ns rows (`p`, `put` + quiet) by up to 50%.
#[inline(never)]
fn sampled(
    c: &Ctx,
    iters: usize,
    batch: usize,
    mut op: impl FnMut(usize) -> symmem::Result<()>,
) -> symmem::Result<Duration> {
    let mut sampler = c.sampler.borrow_mut();
    // Reserved before the clock starts: no allocation inside the timed loop.
    sampler.batches.reserve(iters.div_ceil(batch));
    let t0 = Instant::now();
    let mut last = t0;
    let mut i = 0;
    while i < iters {
        let end = (i + batch).min(iters);
        for j in i..end {
            op(j)?;
        }
        let now = Instant::now();
        sampler.batches.push((now - last, end - i));
        (last, i) = (now, end);
    }
    Ok(last - t0)
}

/// Elements per PE's block of a collective moving `size` bytes in all (at least one).
pub fn block_elems(c: &Ctx, size: usize) -> usize {
    (size / ELEM / c.rt.n_pes()).max(1)
}
