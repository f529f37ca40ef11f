//! The target side of a message-based transport: checks a peer's request against this
//! PE's heap and applies it.
//!
//! Every request is checked completely (opcode, kinds, widths, alignment, and that every
//! byte it touches lies inside the heap) before anything is written, so a malformed request
//! never reaches memory. Atomics use the orderings of the host API: RMWs are `SeqCst`,
//! fetches Acquire, sets and signals Release, so data written before a signal (a
//! put_signal's payload) is visible to a PE that observes the signal.
//!
//! A host heap is applied to with loads, stores and atomics. A GPU heap cannot be: its
//! requests go through a [`DeviceHeap`] (copies, and the runtime's helper kernels for
//! atomics and signals), which the runtime attaches once its GPU resources exist, before
//! any peer may send.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};

use symmem_device::{AmoKind, Opcode, Request, SignalOp};

use crate::int::apply_signal;
use crate::int::{apply_amo, SymInt};
use crate::interface::{DeviceHeap, HeapRegion};

/// This PE's heap as the target of peers' requests.
pub(crate) struct Target {
    heap: HeapRegion,
    /// A GPU heap's access path, attached by the runtime (see [`Self::attach`]).
    device: OnceLock<Arc<dyn DeviceHeap>>,
}

// SAFETY: the heap region is a mapping owned by the runtime that outlives the transport
// (the runtime shuts the transport down before unmapping); it is only accessed through
// raw pointers and atomics.
unsafe impl Send for Target {}
// SAFETY: see above.
unsafe impl Sync for Target {}

impl Target {
    /// A target for `heap`; a GPU heap (`heap.host == false`) also needs [`Self::attach`].
    pub(crate) fn new(heap: HeapRegion) -> Self {
        Target {
            heap,
            device: OnceLock::new(),
        }
    }

    /// Gives a GPU heap its access path. Called once, before peers may send requests.
    pub(crate) fn attach(&self, device: Arc<dyn DeviceHeap>) {
        if self.device.set(device).is_err() {
            tracing::warn!(target: "init::transport", "a second GPU heap access path was attached; the first one stays");
        }
    }

    /// Whether the heap is host memory, applied to directly.
    pub(crate) fn is_host(&self) -> bool {
        self.heap.host
    }

    /// The GPU heap's access path, or why there is none.
    fn device(&self) -> Result<&dyn DeviceHeap, String> {
        self.device.get().map(|d| &**d).ok_or_else(|| {
            "this PE's GPU heap is not ready for remote requests yet (a request arrived before init finished)".into()
        })
    }

    /// Checks `req`, as received from a peer, against the heap; the error says what is
    /// wrong with it.
    pub(crate) fn check(&self, req: &Request) -> Result<Opcode, String> {
        let op = req
            .opcode()
            .ok_or_else(|| format!("unknown opcode {}", req.opcode))?;
        let range = |what: &str, off: u64, len: u64| -> Result<(), String> {
            match off.checked_add(len) {
                Some(end) if end <= self.heap.len as u64 => Ok(()),
                _ => Err(format!(
                    "{what} bytes {off:#x}..+{len} lie outside the {}-byte heap",
                    self.heap.len
                )),
            }
        };
        let word = |what: &str, off: u64, width: u8| -> Result<(), String> {
            if width != 4 && width != 8 {
                return Err(format!("{what} width {width} is not 4 or 8"));
            }
            if !off.is_multiple_of(width as u64) {
                return Err(format!("{what} at {off:#x} is not {width}-byte aligned"));
            }
            range(what, off, width as u64)
        };
        let signal = || -> Result<(), String> {
            req.signal_kind()
                .ok_or_else(|| format!("unknown signal operation {}", req.signal_op))?;
            if req.width != 8 {
                return Err(format!("signal width {} is not 8", req.width));
            }
            Ok(())
        };
        match op {
            Opcode::Put => range("put", req.remote, req.len)?,
            Opcode::Get => range("get", req.remote, req.len)?,
            Opcode::Amo => {
                req.amo_kind()
                    .ok_or_else(|| format!("unknown AMO kind {}", req.amo))?;
                word("AMO", req.remote, req.width)?;
            }
            Opcode::PutSignal => {
                range("put_signal data", req.remote, req.len)?;
                signal()?;
                word("signal", req.signal, 8)?;
            }
            Opcode::Signal => {
                signal()?;
                word("signal", req.remote, 8)?;
            }
            Opcode::Fence | Opcode::Quiet => {
                return Err(format!("{} is not a request a peer sends", op.name()))
            }
        }
        Ok(op)
    }

    /// The address of heap offset `off` of a host heap, checked by [`Self::check`].
    pub(crate) fn at(&self, off: u64) -> *mut u8 {
        debug_assert!(self.heap.host, "direct addresses exist only in a host heap");
        (self.heap.base + off) as *mut u8
    }

    /// Copies the checked range at `off` into `dst` (a get).
    pub(crate) fn read(&self, off: u64, dst: &mut [u8]) -> Result<(), String> {
        if !self.heap.host {
            return self.device()?.read(off, dst).map_err(|e| e.to_string());
        }
        // SAFETY: checked to lie within the heap; `dst` is a separate buffer. Peers may
        // write the range concurrently, as with any get.
        unsafe { std::ptr::copy_nonoverlapping(self.at(off), dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    /// Copies `src` to the checked range at `off` of a GPU heap (a staged put; puts to a
    /// host heap are read straight into [`Self::at`]).
    pub(crate) fn write_device(&self, off: u64, src: &[u8]) -> Result<(), String> {
        self.device()?.write(off, src).map_err(|e| e.to_string())
    }

    /// Performs a checked AMO; returns the old value (0 for Set).
    ///
    /// # Safety
    /// `req` passed [`Self::check`] as an [`Opcode::Amo`].
    pub(crate) unsafe fn amo(&self, req: &Request) -> Result<u64, String> {
        let kind = req.amo_kind().expect("checked");
        if !self.heap.host {
            return self
                .device()?
                .amo(req.remote, req.width, kind, req.value, req.compare)
                .map_err(|e| e.to_string());
        }
        /// The AMO on the `T` at `p`.
        ///
        /// # Safety
        /// `p` is in bounds and aligned for `T` (checked); heap words touched by peers are
        /// only accessed atomically.
        unsafe fn on<T: SymInt>(p: *mut u8, kind: AmoKind, v: u64, c: u64) -> u64 {
            // SAFETY: forwarded from the caller.
            let a = unsafe { T::atomic(p.cast()) };
            apply_amo::<T>(a, kind, T::from_bits(v), T::from_bits(c)).to_bits()
        }
        let p = self.at(req.remote);
        // SAFETY: `check` verified bounds and alignment for the request's width.
        Ok(unsafe {
            if req.width == 8 {
                on::<u64>(p, kind, req.value, req.compare)
            } else {
                on::<u32>(p, kind, req.value, req.compare)
            }
        })
    }

    /// Updates the signal word at heap offset `off` with a Release store or add, after
    /// every earlier write of this thread (a put_signal's data).
    ///
    /// # Safety
    /// `off` and `op` come from a request that passed [`Self::check`].
    pub(crate) unsafe fn signal(&self, off: u64, op: SignalOp, value: u64) -> Result<(), String> {
        if !self.heap.host {
            return self
                .device()?
                .signal(off, op, value)
                .map_err(|e| e.to_string());
        }
        // SAFETY: in bounds and 8-byte aligned (checked); signal words are only accessed
        // atomically.
        let a = unsafe { AtomicU64::from_ptr(self.at(off).cast()) };
        apply_signal(a, value, op);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(mem: &mut [u64]) -> Target {
        Target::new(HeapRegion {
            base: mem.as_mut_ptr() as u64,
            len: mem.len() * 8,
            host: true,
        })
    }

    #[test]
    fn requests_outside_the_heap_or_misaligned_are_refused() {
        let mut mem = [0u64; 8];
        let t = target(&mut mem);
        assert!(t.check(&Request::put(0, 0, 0, 64)).is_ok());
        let e = t.check(&Request::put(0, 8, 0, 64)).unwrap_err();
        assert!(e.contains("outside the 64-byte heap"), "{e}");
        let e = t.check(&Request::get(0, 0, u64::MAX, 2)).unwrap_err();
        assert!(e.contains("outside"), "{e}");
        let e = t
            .check(&Request::amo(0, AmoKind::FetchAdd, 8, 4, 1, 0, 0))
            .unwrap_err();
        assert!(e.contains("not 8-byte aligned"), "{e}");
        let e = t
            .check(&Request::amo(0, AmoKind::FetchAdd, 2, 0, 1, 0, 0))
            .unwrap_err();
        assert!(e.contains("width 2"), "{e}");
        let mut bad = Request::signal(0, 0, SignalOp::Set, 1);
        bad.signal_op = 9;
        assert!(t.check(&bad).unwrap_err().contains("signal operation 9"));
        let e = t
            .check(&Request::put_signal(0, 0, 0, 8, 64, SignalOp::Set, 1))
            .unwrap_err();
        assert!(e.contains("signal bytes 0x40"), "{e}");
        assert!(t.check(&Request::quiet()).is_err());
        let mut junk = Request::put(0, 0, 0, 0);
        junk.opcode = 0xee;
        assert!(t.check(&junk).unwrap_err().contains("unknown opcode 238"));
    }

    #[test]
    fn amos_and_signals_apply_with_their_width() {
        let mut mem = [0u64; 4];
        let t = target(&mut mem);
        let add = Request::amo(0, AmoKind::FetchAdd, 8, 8, 5, 0, 0);
        t.check(&add).unwrap();
        // SAFETY: checked above.
        unsafe {
            assert_eq!(t.amo(&add), Ok(0));
            assert_eq!(t.amo(&add), Ok(5));
            let cas = Request::amo(0, AmoKind::CompareSwap, 4, 16, 7, 0, 0);
            t.check(&cas).unwrap();
            assert_eq!(t.amo(&cas), Ok(0));
            assert_eq!(t.amo(&cas), Ok(7));
            t.signal(24, SignalOp::Add, 3).unwrap();
            t.signal(24, SignalOp::Add, 3).unwrap();
        }
        assert_eq!(mem[1], 10);
        assert_eq!(mem[2] as u32, 7);
        assert_eq!(mem[3], 6);
    }
}
