//! Requests as ibverbs work requests: which WRs, in which order, on which bytes. Pure
//! functions; `mod.rs` resolves local buffers (heap, bounce slots) and posts them.
//!
//! | request | work requests (one QP, in this order) |
//! |---|---|
//! | put | RDMA WRITEs of at most `chunk` bytes each |
//! | get | RDMA READs of at most `chunk` bytes each |
//! | put_signal | the data WRITEs, then the signal: SET = an 8-byte RDMA WRITE of the value, ADD = FETCH_AND_ADD |
//! | signal | the signal alone, as above |
//! | 8-byte fetch_add / fetch | FETCH_AND_ADD (of 0 for fetch) |
//! | 8-byte compare_swap | CMP_AND_SWP |
//! | every other AMO, and every 4-byte AMO | a compare-and-swap loop on the aligned 8-byte word holding it ([`CasLoop`]) |
//!
//! RC executes the WRs of one QP in order, so a put_signal's signal never lands before its
//! data and needs no fence (`gpu-rdma-facts.md` §7); write-with-immediate is not used,
//! since a GPU polling memory would never see it. NIC atomics are 8-byte only: a 4-byte
//! word is updated by CAS on its enclosing aligned 8-byte word, changing only its half and
//! retrying when the other half moved, so it is atomic with respect to other NIC atomics
//! (and, like every NIC atomic, not with respect to the target's own CPU/GPU atomics
//! unless the device reports `IBV_ATOMIC_GLOB`).

use symmem_device::{AmoKind, Opcode, Request, SignalOp};

/// Most bytes one WR carries: the IB limit is 2^31; 1 GiB keeps lengths round.
pub(crate) const MAX_MSG: u64 = 1 << 30;

/// What a work request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WrOp {
    /// RDMA WRITE from the local buffer.
    Write,
    /// RDMA READ into the local buffer.
    Read,
    /// 8-byte FETCH_AND_ADD; the old value lands in the local buffer.
    FetchAdd {
        /// Addend.
        add: u64,
    },
    /// 8-byte CMP_AND_SWP; the old value lands in the local buffer.
    CompareSwap {
        /// Expected value.
        compare: u64,
        /// New value.
        swap: u64,
    },
}

impl WrOp {
    /// Name for errors.
    pub(crate) fn name(self) -> &'static str {
        match self {
            WrOp::Write => "RDMA_WRITE",
            WrOp::Read => "RDMA_READ",
            WrOp::FetchAdd { .. } => "ATOMIC_FETCH_AND_ADD",
            WrOp::CompareSwap { .. } => "ATOMIC_CMP_AND_SWP",
        }
    }
}

/// The local side of a work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Local {
    /// Bytes `offset..offset + len` of the request's payload (the put's source or the
    /// get's destination).
    Payload {
        /// Offset into the payload.
        offset: u64,
    },
    /// An 8-byte word holding this value (a signal SET's data).
    Value(u64),
    /// An 8-byte word the fetched value lands in.
    Result,
}

/// One work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Wr {
    /// What it does.
    pub op: WrOp,
    /// Heap offset on the target.
    pub remote: u64,
    /// Bytes.
    pub len: u32,
    /// Its local buffer.
    pub local: Local,
}

/// An AMO the NIC has no single atomic for: a compare-and-swap loop on the aligned 8-byte
/// word that holds the target word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CasLoop {
    /// Heap offset of the enclosing 8-byte word.
    pub word: u64,
    /// Bit position of the target word inside it (0 or 32 for 4-byte words; little-endian).
    pub shift: u32,
    /// Bytes of the target word (4 or 8).
    pub width: u8,
    /// The operation.
    pub kind: AmoKind,
    /// Operand (the new value for CompareSwap).
    pub value: u64,
    /// CompareSwap's expected value.
    pub compare: u64,
}

impl CasLoop {
    fn mask(&self) -> u64 {
        if self.width == 8 {
            u64::MAX
        } else {
            0xffff_ffff
        }
    }

    /// The target word inside the 8-byte word `whole`.
    fn part(&self, whole: u64) -> u64 {
        (whole >> self.shift) & self.mask()
    }

    /// The 8-byte word to swap in when the word currently reads `whole`, or `None` when
    /// the operation writes nothing (a failed compare_swap, a fetch).
    pub(crate) fn next(&self, whole: u64) -> Option<u64> {
        let m = self.mask();
        let (v, old) = (self.value & m, self.part(whole));
        let new = match self.kind {
            AmoKind::Fetch => return None,
            AmoKind::Set | AmoKind::Swap => v,
            AmoKind::CompareSwap if old == self.compare & m => v,
            AmoKind::CompareSwap => return None,
            AmoKind::FetchAdd => old.wrapping_add(v) & m,
            AmoKind::FetchAnd => old & v,
            AmoKind::FetchOr => old | v,
            AmoKind::FetchXor => old ^ v,
        };
        Some((whole & !(m << self.shift)) | (new << self.shift))
    }

    /// What the AMO returns when it took effect on the 8-byte word `whole` (0 for Set, as
    /// the host API's `apply_amo`).
    pub(crate) fn result(&self, whole: u64) -> u64 {
        match self.kind {
            AmoKind::Set => 0,
            _ => self.part(whole),
        }
    }
}

/// How a request is carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Plan {
    /// These work requests, posted in order on one QP.
    Wrs(Vec<Wr>),
    /// A compare-and-swap loop (starting with an atomic read: FETCH_AND_ADD of 0).
    CasLoop(CasLoop),
}

/// The work requests for `req`, payloads cut into pieces of at most `chunk` bytes. `req`
/// has passed the target checks (`Target::check` against the peer's heap length), so
/// kinds, widths and alignment are valid; the error names what cannot be carried.
pub(crate) fn plan(req: &Request, chunk: u64) -> Result<Plan, String> {
    let chunk = chunk.clamp(1, MAX_MSG);
    let op = req
        .opcode()
        .ok_or_else(|| format!("unknown opcode {}", req.opcode))?;
    let pieces = |op: WrOp, out: &mut Vec<Wr>| {
        let mut off = 0;
        while off < req.len {
            let len = (req.len - off).min(chunk);
            out.push(Wr {
                op,
                remote: req.remote + off,
                len: len as u32,
                local: Local::Payload { offset: off },
            });
            off += len;
        }
    };
    let signal = |at: u64, out: &mut Vec<Wr>| -> Result<(), String> {
        let wr = match req.signal_kind() {
            Some(SignalOp::Set) => Wr {
                op: WrOp::Write,
                remote: at,
                len: 8,
                local: Local::Value(req.value),
            },
            Some(SignalOp::Add) => Wr {
                op: WrOp::FetchAdd { add: req.value },
                remote: at,
                len: 8,
                local: Local::Result,
            },
            None => return Err(format!("unknown signal operation {}", req.signal_op)),
        };
        out.push(wr);
        Ok(())
    };
    let mut wrs = Vec::new();
    match op {
        Opcode::Put => pieces(WrOp::Write, &mut wrs),
        Opcode::Get => pieces(WrOp::Read, &mut wrs),
        Opcode::PutSignal => {
            pieces(WrOp::Write, &mut wrs);
            signal(req.signal, &mut wrs)?;
        }
        Opcode::Signal => signal(req.remote, &mut wrs)?,
        Opcode::Amo => {
            let kind = req
                .amo_kind()
                .ok_or_else(|| format!("unknown AMO kind {}", req.amo))?;
            let native = |op| Wr {
                op,
                remote: req.remote,
                len: 8,
                local: Local::Result,
            };
            match (req.width, kind) {
                (8, AmoKind::FetchAdd) => wrs.push(native(WrOp::FetchAdd { add: req.value })),
                (8, AmoKind::Fetch) => wrs.push(native(WrOp::FetchAdd { add: 0 })),
                (8, AmoKind::CompareSwap) => wrs.push(native(WrOp::CompareSwap {
                    compare: req.compare,
                    swap: req.value,
                })),
                (4 | 8, _) => {
                    return Ok(Plan::CasLoop(CasLoop {
                        word: req.remote & !7,
                        shift: ((req.remote & 7) * 8) as u32,
                        width: req.width,
                        kind,
                        value: req.value,
                        compare: req.compare,
                    }))
                }
                (w, _) => return Err(format!("an AMO of width {w} (only 4 and 8)")),
            }
        }
        Opcode::Fence | Opcode::Quiet => {
            return Err(format!("{} is not carried by work requests", op.name()))
        }
    }
    Ok(Plan::Wrs(wrs))
}

/// Fence bookkeeping of one QP: after [`Fences::mark`] (an `nvshmem_fence`), the next
/// work request posted on the QP carries `IBV_SEND_FENCE`, so it starts only after every
/// earlier RDMA READ and atomic on the QP completed (writes are ordered by RC anyway).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Fences {
    pending: bool,
}

impl Fences {
    /// A fence was requested.
    pub(crate) fn mark(&mut self) {
        self.pending = true;
    }

    /// Whether the WR about to be posted carries `IBV_SEND_FENCE` (once per fence).
    pub(crate) fn take(&mut self) -> bool {
        std::mem::take(&mut self.pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrs(p: Plan) -> Vec<Wr> {
        match p {
            Plan::Wrs(w) => w,
            Plan::CasLoop(c) => panic!("expected WRs, got {c:?}"),
        }
    }

    #[test]
    fn puts_and_gets_are_chunked() {
        let w = wrs(plan(&Request::put(1, 0x100, 0xdead, 10), 4).unwrap());
        assert_eq!(
            w.iter()
                .map(|w| (w.op, w.remote, w.len, w.local))
                .collect::<Vec<_>>(),
            vec![
                (WrOp::Write, 0x100, 4, Local::Payload { offset: 0 }),
                (WrOp::Write, 0x104, 4, Local::Payload { offset: 4 }),
                (WrOp::Write, 0x108, 2, Local::Payload { offset: 8 }),
            ]
        );
        let w = wrs(plan(&Request::get(1, 0xbeef, 0x40, 8), 4).unwrap());
        assert_eq!(w.len(), 2);
        assert!(w.iter().all(|w| w.op == WrOp::Read && w.len == 4));
        assert_eq!(w[1].remote, 0x44);
        // One WR up to MAX_MSG; a chunk larger than that is capped.
        let w = wrs(plan(&Request::put(0, 0, 0, 3 << 30), u64::MAX).unwrap());
        assert_eq!(w.len(), 3);
        assert!(w.iter().all(|w| w.len as u64 == MAX_MSG));
        assert!(wrs(plan(&Request::put(0, 0, 0, 0), 4).unwrap()).is_empty());
    }

    #[test]
    fn put_signal_writes_data_then_the_signal_on_one_plan() {
        let r = Request::put_signal(2, 0x1000, 0, 9, 0x80, SignalOp::Set, 42);
        let w = wrs(plan(&r, 4).unwrap());
        assert_eq!(w.len(), 4);
        assert!(w[..3]
            .iter()
            .all(|w| w.op == WrOp::Write && matches!(w.local, Local::Payload { .. })));
        assert_eq!(
            w[3],
            Wr {
                op: WrOp::Write,
                remote: 0x80,
                len: 8,
                local: Local::Value(42)
            }
        );
        let r = Request::put_signal(2, 0x1000, 0, 9, 0x80, SignalOp::Add, 3);
        let w = wrs(plan(&r, 1 << 20).unwrap());
        assert_eq!(w.len(), 2);
        assert_eq!(
            w[1],
            Wr {
                op: WrOp::FetchAdd { add: 3 },
                remote: 0x80,
                len: 8,
                local: Local::Result
            }
        );
        let w = wrs(plan(&Request::signal(1, 0x88, SignalOp::Add, 1), 4).unwrap());
        assert_eq!(w.len(), 1);
        assert_eq!((w[0].op, w[0].remote), (WrOp::FetchAdd { add: 1 }, 0x88));
        let mut bad = Request::signal(1, 0x88, SignalOp::Add, 1);
        bad.signal_op = 9;
        assert!(plan(&bad, 4).unwrap_err().contains("signal"));
    }

    #[test]
    fn eight_byte_fetch_add_fetch_and_cas_are_native() {
        let amo = |kind, v, c| Request::amo(1, kind, 8, 0x18, v, c, 0x1);
        let w = wrs(plan(&amo(AmoKind::FetchAdd, 5, 0), 8).unwrap());
        assert_eq!(
            w,
            vec![Wr {
                op: WrOp::FetchAdd { add: 5 },
                remote: 0x18,
                len: 8,
                local: Local::Result
            }]
        );
        let w = wrs(plan(&amo(AmoKind::Fetch, 5, 0), 8).unwrap());
        assert_eq!(w[0].op, WrOp::FetchAdd { add: 0 });
        let w = wrs(plan(&amo(AmoKind::CompareSwap, 9, 7), 8).unwrap());
        assert_eq!(
            w[0].op,
            WrOp::CompareSwap {
                compare: 7,
                swap: 9
            }
        );
        assert_eq!(w[0].op.name(), "ATOMIC_CMP_AND_SWP");
    }

    #[test]
    fn other_amos_become_cas_loops_on_the_enclosing_word() {
        let r = Request::amo(1, AmoKind::FetchOr, 8, 0x20, 0xf0, 0, 0);
        let Plan::CasLoop(c) = plan(&r, 8).unwrap() else {
            panic!("not a CAS loop")
        };
        assert_eq!((c.word, c.shift, c.width), (0x20, 0, 8));
        assert_eq!(c.next(0x0f), Some(0xff));
        assert_eq!(c.result(0x0f), 0x0f);

        // A 4-byte word in the upper half of its 8-byte word (little-endian).
        let r = Request::amo(1, AmoKind::FetchAdd, 4, 0x24, 1, 0, 0);
        let Plan::CasLoop(c) = plan(&r, 8).unwrap() else {
            panic!("not a CAS loop")
        };
        assert_eq!((c.word, c.shift), (0x20, 32));
        let whole = 0xffff_ffff_1234_5678u64;
        // 0xffffffff + 1 wraps to 0 within the 4-byte word; the lower half is untouched.
        assert_eq!(c.next(whole), Some(0x0000_0000_1234_5678));
        assert_eq!(c.result(whole), 0xffff_ffff);

        let four = |kind, at, v, cmp| {
            let Plan::CasLoop(c) = plan(&Request::amo(1, kind, 4, at, v, cmp, 0), 8).unwrap()
            else {
                panic!("not a CAS loop")
            };
            c
        };
        let whole = 0xaaaa_aaaa_0000_0005u64;
        let c = four(AmoKind::CompareSwap, 0x20, 9, 5);
        assert_eq!(c.next(whole), Some(0xaaaa_aaaa_0000_0009));
        assert_eq!(c.result(whole), 5);
        let c = four(AmoKind::CompareSwap, 0x20, 9, 6);
        assert_eq!(c.next(whole), None, "a failed compare writes nothing");
        assert_eq!(c.result(whole), 5);
        let c = four(AmoKind::Fetch, 0x24, 0, 0);
        assert_eq!((c.next(whole), c.result(whole)), (None, 0xaaaa_aaaa));
        let c = four(AmoKind::Set, 0x24, 0x1_0000_0007, 0);
        assert_eq!(
            c.next(whole),
            Some(0x0000_0007_0000_0005),
            "operand truncated to 4 bytes"
        );
        assert_eq!(c.result(whole), 0, "Set returns 0 like apply_amo");
        let c = four(AmoKind::Swap, 0x20, 1, 0);
        assert_eq!(
            (c.next(whole), c.result(whole)),
            (Some(0xaaaa_aaaa_0000_0001), 5)
        );
        let c = four(AmoKind::FetchAnd, 0x24, 0x0f0f_0f0f, 0);
        assert_eq!(c.next(whole), Some(0x0a0a_0a0a_0000_0005));
        let c = four(AmoKind::FetchXor, 0x20, 0xff, 0);
        assert_eq!(c.next(whole), Some(0xaaaa_aaaa_0000_00fa));
    }

    #[test]
    fn fence_and_quiet_are_not_work_requests_and_bad_widths_are_named() {
        assert!(plan(&Request::fence(), 8).unwrap_err().contains("fence"));
        assert!(plan(&Request::quiet(), 8).unwrap_err().contains("quiet"));
        let r = Request::amo(1, AmoKind::FetchAdd, 2, 0x20, 1, 0, 0);
        let e = plan(&r, 8).unwrap_err();
        assert!(e.contains("width 2"), "{e}");
    }

    #[test]
    fn a_fence_flags_exactly_the_next_work_request() {
        let mut f = Fences::default();
        assert!(!f.take());
        f.mark();
        f.mark();
        assert!(f.take());
        assert!(!f.take());
    }
}
