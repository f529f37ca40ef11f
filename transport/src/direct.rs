//! The direct transport: applies requests straight to the mapped heaps of same-node peers.
//!
//! Only weak ordering (`SYMMEM_ORDERING=weak`, [`super::weak`]) uses it: there every peer's
//! route is remote, so that puts and signals to same-node peers pass through the reordering
//! transport, which delivers them here. The heaps stay mapped; each request is checked
//! against the peer's heap and applied with the same loads, stores and atomics as the
//! host API's direct route ([`Target`]): RMWs `SeqCst`, signals Release, and 4- and 8-byte
//! puts (`p` of a flag) as one relaxed atomic store after a Release fence, so "put data;
//! fence; p(flag)" publishes the data to a peer's Acquire wait. Every request is complete
//! when `submit` returns; `fence` and `quiet` only order memory.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use symmem_device::{Opcode, Request};

use super::target::Target;
use crate::error::{Error, Result};
use crate::interface::{HeapRegion, Io, Transport};

/// Same-node peers' heaps as targets of this PE's requests.
pub(crate) struct DirectTransport {
    me: usize,
    /// `targets[pe]`: `pe`'s heap, when it is mapped here (never this PE's own).
    targets: Box<[Option<Target>]>,
}

impl DirectTransport {
    /// A transport from PE `me` to every PE whose heap of `heap_len` bytes is mapped at
    /// `bases[pe]` (0 = not mapped); this PE's own heap is never a target.
    pub(crate) fn new(me: usize, heap_len: usize, bases: &[u64]) -> Self {
        let targets = bases
            .iter()
            .enumerate()
            .map(|(pe, &base)| {
                (pe != me && base != 0).then(|| {
                    Target::new(HeapRegion {
                        base,
                        len: heap_len,
                        host: true,
                    })
                })
            })
            .collect();
        DirectTransport { me, targets }
    }

    /// Whether `pe`'s heap is reached by this transport.
    pub(crate) fn reaches(&self, pe: usize) -> bool {
        self.targets.get(pe).is_some_and(Option::is_some)
    }

    /// The error for `req`, with `detail`.
    fn error(&self, req: &Request, detail: String) -> Error {
        Error::Transport {
            transport: "direct",
            op: req.opcode().map_or("request", Opcode::name),
            me: self.me,
            pe: req.pe as usize,
            detail,
        }
    }
}

/// Writes `src` to `dst`: one relaxed atomic store for an aligned 4- or 8-byte value (a
/// flag), else a plain copy. The caller has issued a Release fence.
///
/// # Safety
/// `dst` is valid for `src.len()` bytes of writes inside a mapped heap.
unsafe fn store(dst: *mut u8, src: &[u8]) {
    let aligned = |n: usize| src.len() == n && (dst as usize).is_multiple_of(n);
    // SAFETY: forwarded from the caller; the alignment and length checks make the atomic
    // accesses exact.
    unsafe {
        if aligned(8) {
            let v = u64::from_le_bytes(src.try_into().expect("8 bytes"));
            AtomicU64::from_ptr(dst.cast()).store(v, Ordering::Relaxed);
        } else if aligned(4) {
            let v = u32::from_le_bytes(src.try_into().expect("4 bytes"));
            AtomicU32::from_ptr(dst.cast()).store(v, Ordering::Relaxed);
        } else {
            std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len());
        }
    }
}

impl Transport for DirectTransport {
    fn name(&self) -> &'static str {
        "direct"
    }

    fn submit(&self, req: &Request, io: Io<'_>) -> Result<u64> {
        let pe = req.pe as usize;
        let target = self
            .targets
            .get(pe)
            .and_then(Option::as_ref)
            .ok_or_else(|| {
                self.error(
                    req,
                    format!("PE {pe}'s heap is not mapped by PE {}", self.me),
                )
            })?;
        let op = target.check(req).map_err(|e| self.error(req, e))?;
        let payload_len = match &io {
            Io::Src(s) => Some(s.len()),
            Io::Dst(d) => Some(d.len()),
            Io::None => None,
        };
        let wants_payload = matches!(op, Opcode::Put | Opcode::PutSignal | Opcode::Get);
        if wants_payload && payload_len != Some(req.len as usize) {
            return Err(self.error(
                req,
                format!(
                    "the payload has {payload_len:?} bytes for a request of {} bytes",
                    req.len
                ),
            ));
        }
        // Everything this PE wrote before the request is visible to whoever observes it.
        fence(Ordering::Release);
        match (op, io) {
            (Opcode::Put, Io::Src(src)) => {
                // SAFETY: `check` verified that the range lies inside the heap.
                unsafe { store(target.at(req.remote), src) };
                Ok(0)
            }
            (Opcode::PutSignal, Io::Src(src)) => {
                let kind = req.signal_kind().expect("checked");
                // SAFETY: data and signal ranges checked; the signal is a Release update
                // after the data stores.
                unsafe {
                    store(target.at(req.remote), src);
                    target.signal(req.signal, kind, req.value)
                }
                .map_err(|e| self.error(req, e))?;
                Ok(0)
            }
            (Opcode::Get, Io::Dst(dst)) => {
                target
                    .read(req.remote, dst)
                    .map_err(|e| self.error(req, e))?;
                Ok(0)
            }
            (Opcode::Amo, Io::None) => {
                // SAFETY: `req` passed `check` as an AMO.
                let old = unsafe { target.amo(req) }.map_err(|e| self.error(req, e))?;
                Ok(if req.returns_data() { old } else { 0 })
            }
            (Opcode::Signal, Io::None) => {
                let kind = req.signal_kind().expect("checked");
                // SAFETY: `req` passed `check` as a signal.
                unsafe { target.signal(req.remote, kind, req.value) }
                    .map_err(|e| self.error(req, e))?;
                Ok(0)
            }
            (op, _) => Err(self.error(
                req,
                format!("a {} request with the wrong kind of payload", op.name()),
            )),
        }
    }

    fn fence(&self) -> Result<()> {
        fence(Ordering::Release);
        Ok(())
    }

    fn quiet(&self) -> Result<()> {
        fence(Ordering::SeqCst);
        Ok(())
    }

    fn progress(&self) -> Result<()> {
        Ok(())
    }

    fn shutdown(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use symmem_device::{AmoKind, SignalOp};

    #[test]
    fn applies_puts_gets_amos_and_signals_to_the_mapped_heap() {
        let mut heap = [0u64; 8];
        let bases = [0, heap.as_mut_ptr() as u64];
        let t = DirectTransport::new(0, 64, &bases);
        assert!(t.reaches(1) && !t.reaches(0));
        let data = 7u64.to_le_bytes();
        t.submit(&Request::put(1, 8, 0, 8), Io::Src(&data)).unwrap();
        let add = Request::amo(1, AmoKind::FetchAdd, 8, 16, 5, 0, 1);
        assert_eq!(t.submit(&add, Io::None).unwrap(), 0);
        assert_eq!(t.submit(&add, Io::None).unwrap(), 5);
        let ps = Request::put_signal(1, 24, 0, 8, 32, SignalOp::Add, 2);
        t.submit(&ps, Io::Src(&data)).unwrap();
        let mut back = [0u8; 8];
        t.submit(&Request::get(1, 0, 8, 8), Io::Dst(&mut back))
            .unwrap();
        assert_eq!(u64::from_le_bytes(back), 7);
        assert_eq!(&heap[1..5], &[7, 10, 7, 2]);
        let e = t
            .submit(&Request::put(0, 0, 0, 8), Io::Src(&data))
            .unwrap_err()
            .to_string();
        assert!(e.contains("PE 0's heap is not mapped"), "{e}");
        let e = t
            .submit(&Request::put(1, 60, 0, 8), Io::Src(&data))
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside"), "{e}");
    }
}
