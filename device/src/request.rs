//! The one op vocabulary: a fixed-size request that host operations, the proxy ring, socket
//! frames and ibverbs work requests all encode.
//!
//! A request names an operation on one target PE's symmetric heap by heap *offset* (the
//! same on every PE), so it means the same thing in every process. Local addresses
//! (`local`) are only meaningful to the PE that built the request and never cross the wire.
//!
//! ```text
//! offset  field      type  meaning
//!  0      opcode     u8    Opcode
//!  1      width      u8    bytes of the AMO or signal word (4 or 8); 0 otherwise
//!  2      amo        u8    AmoKind (Amo only)
//!  3      signal_op  u8    SignalOp (PutSignal and Signal only)
//!  4      pe         u32   target PE
//!  8      len        u64   payload bytes (Put, Get, PutSignal)
//! 16      remote     u64   heap offset on the target: destination (Put, PutSignal, Amo,
//!                          Signal) or source (Get)
//! 24      local      u64   address on the issuing PE: source (Put, PutSignal), destination
//!                          (Get), where a fetched value goes (Amo; 0 = not wanted, and
//!                          on the wire only this zero/nonzero flag is sent)
//! 32      signal     u64   heap offset of the signal word on the target (PutSignal)
//! 40      value      u64   AMO operand (the new value for CompareSwap), signal value
//! 48      compare    u64   CompareSwap's expected value
//! 56      tag        u64   the carrier's: ring ticket, wire request id
//! 64                       (size)
//! ```

use crate::op_kinds::{AmoKind, SignalOp};

/// What a [`Request`] asks the target to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    /// Copy `len` bytes from `local` to `remote` on `pe`.
    Put = 1,
    /// Copy `len` bytes from `remote` on `pe` to `local`.
    Get = 2,
    /// Atomic `amo` of `width` bytes at `remote` on `pe`.
    Amo = 3,
    /// [`Opcode::Put`], then update the signal word at `signal` with `signal_op`/`value`,
    /// visible only after the data.
    PutSignal = 4,
    /// Update the signal word at `remote` with `signal_op`/`value`.
    Signal = 5,
    /// Order earlier requests to each PE before later ones (`nvshmem_fence`).
    Fence = 6,
    /// Complete every earlier request (`nvshmem_quiet`).
    Quiet = 7,
}

impl Opcode {
    /// Every opcode, in encoding order.
    pub const ALL: [Opcode; 7] = [
        Opcode::Put,
        Opcode::Get,
        Opcode::Amo,
        Opcode::PutSignal,
        Opcode::Signal,
        Opcode::Fence,
        Opcode::Quiet,
    ];

    /// The opcode encoded as `code`, if any.
    pub const fn from_u8(code: u8) -> Option<Self> {
        if code >= 1 && code as usize <= Self::ALL.len() {
            Some(Self::ALL[code as usize - 1])
        } else {
            None
        }
    }

    /// Lower-case name, for errors.
    pub const fn name(self) -> &'static str {
        match self {
            Opcode::Put => "put",
            Opcode::Get => "get",
            Opcode::Amo => "amo",
            Opcode::PutSignal => "put_signal",
            Opcode::Signal => "signal",
            Opcode::Fence => "fence",
            Opcode::Quiet => "quiet",
        }
    }
}

/// One operation on a target PE's heap; see the module docs for the layout.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Request {
    /// [`Opcode`] as u8.
    pub opcode: u8,
    /// Bytes of the AMO or signal word: 4 or 8 (0 when there is none).
    pub width: u8,
    /// [`AmoKind`] as u8.
    pub amo: u8,
    /// [`SignalOp`] as u8.
    pub signal_op: u8,
    /// Target PE.
    pub pe: u32,
    /// Payload bytes.
    pub len: u64,
    /// Heap offset on the target.
    pub remote: u64,
    /// Address on the issuing PE (never sent to another process).
    pub local: u64,
    /// Heap offset of the signal word on the target (PutSignal).
    pub signal: u64,
    /// AMO operand or signal value.
    pub value: u64,
    /// CompareSwap's expected value.
    pub compare: u64,
    /// The carrier's: ring ticket, wire request id.
    pub tag: u64,
}

// The table in the module docs is the contract with every PTX module and every peer.
const _: () = {
    use core::mem::{align_of, offset_of, size_of};
    assert!(size_of::<Request>() == 64);
    assert!(align_of::<Request>() == 8);
    assert!(offset_of!(Request, opcode) == 0);
    assert!(offset_of!(Request, width) == 1);
    assert!(offset_of!(Request, amo) == 2);
    assert!(offset_of!(Request, signal_op) == 3);
    assert!(offset_of!(Request, pe) == 4);
    assert!(offset_of!(Request, len) == 8);
    assert!(offset_of!(Request, remote) == 16);
    assert!(offset_of!(Request, local) == 24);
    assert!(offset_of!(Request, signal) == 32);
    assert!(offset_of!(Request, value) == 40);
    assert!(offset_of!(Request, compare) == 48);
    assert!(offset_of!(Request, tag) == 56);
};

impl Request {
    const EMPTY: Request = Request {
        opcode: 0,
        width: 0,
        amo: 0,
        signal_op: 0,
        pe: 0,
        len: 0,
        remote: 0,
        local: 0,
        signal: 0,
        value: 0,
        compare: 0,
        tag: 0,
    };

    /// A put of `len` bytes from local address `src` to heap offset `dst` on `pe`.
    pub const fn put(pe: u32, dst: u64, src: u64, len: u64) -> Self {
        Request {
            opcode: Opcode::Put as u8,
            pe,
            len,
            remote: dst,
            local: src,
            ..Self::EMPTY
        }
    }

    /// A get of `len` bytes from heap offset `src` on `pe` to local address `dst`.
    pub const fn get(pe: u32, dst: u64, src: u64, len: u64) -> Self {
        Request {
            opcode: Opcode::Get as u8,
            pe,
            len,
            remote: src,
            local: dst,
            ..Self::EMPTY
        }
    }

    /// An atomic of `width` bytes at heap offset `at` on `pe`; a fetched value goes to
    /// local address `result` (0: not wanted).
    pub const fn amo(
        pe: u32,
        kind: AmoKind,
        width: u8,
        at: u64,
        value: u64,
        compare: u64,
        result: u64,
    ) -> Self {
        Request {
            opcode: Opcode::Amo as u8,
            width,
            amo: kind as u8,
            pe,
            remote: at,
            local: result,
            value,
            compare,
            ..Self::EMPTY
        }
    }

    /// A put of `len` bytes from `src` to `dst` on `pe`, then a signal update of the u64
    /// at heap offset `sig`.
    pub const fn put_signal(
        pe: u32,
        dst: u64,
        src: u64,
        len: u64,
        sig: u64,
        op: SignalOp,
        value: u64,
    ) -> Self {
        Request {
            opcode: Opcode::PutSignal as u8,
            width: 8,
            signal_op: op as u8,
            pe,
            len,
            remote: dst,
            local: src,
            signal: sig,
            value,
            ..Self::EMPTY
        }
    }

    /// A signal update of the u64 at heap offset `sig` on `pe`.
    pub const fn signal(pe: u32, sig: u64, op: SignalOp, value: u64) -> Self {
        Request {
            opcode: Opcode::Signal as u8,
            width: 8,
            signal_op: op as u8,
            pe,
            remote: sig,
            value,
            ..Self::EMPTY
        }
    }

    /// A fence (`pe` is ignored).
    pub const fn fence() -> Self {
        Request {
            opcode: Opcode::Fence as u8,
            ..Self::EMPTY
        }
    }

    /// A quiet (`pe` is ignored).
    pub const fn quiet() -> Self {
        Request {
            opcode: Opcode::Quiet as u8,
            ..Self::EMPTY
        }
    }

    /// The decoded opcode, if valid.
    pub const fn opcode(&self) -> Option<Opcode> {
        Opcode::from_u8(self.opcode)
    }

    /// The decoded AMO kind, if valid.
    pub const fn amo_kind(&self) -> Option<AmoKind> {
        AmoKind::from_u32(self.amo as u32)
    }

    /// The decoded signal operation, if valid.
    pub const fn signal_kind(&self) -> Option<SignalOp> {
        SignalOp::from_u32(self.signal_op as u32)
    }

    /// Whether the issuer waits for a value back (a get, or an AMO whose `local` names
    /// where the old value goes) rather than only for completion. On the wire `local` is
    /// not an address but this flag: nonzero when the value is wanted.
    pub const fn returns_data(&self) -> bool {
        match Opcode::from_u8(self.opcode) {
            Some(Opcode::Get) => true,
            Some(Opcode::Amo) => self.local != 0,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcodes_round_trip() {
        for op in Opcode::ALL {
            assert_eq!(Opcode::from_u8(op as u8), Some(op));
        }
        assert_eq!(Opcode::from_u8(0), None);
        assert_eq!(Opcode::from_u8(Opcode::ALL.len() as u8 + 1), None);
    }

    #[test]
    fn constructors_fill_the_documented_fields() {
        let r = Request::put_signal(3, 0x100, 0xdead, 64, 0x40, SignalOp::Add, 7);
        assert_eq!(r.opcode(), Some(Opcode::PutSignal));
        assert_eq!((r.pe, r.remote, r.local, r.len), (3, 0x100, 0xdead, 64));
        assert_eq!(
            (r.signal, r.signal_kind(), r.value),
            (0x40, Some(SignalOp::Add), 7)
        );
        let a = Request::amo(1, AmoKind::CompareSwap, 4, 0x80, 9, 5, 0x1000);
        assert_eq!(a.amo_kind(), Some(AmoKind::CompareSwap));
        assert_eq!((a.width, a.value, a.compare, a.local), (4, 9, 5, 0x1000));
        assert!(a.returns_data());
        assert!(!Request::amo(1, AmoKind::FetchAdd, 8, 0, 1, 0, 0).returns_data());
        assert!(Request::get(0, 1, 2, 3).returns_data());
        assert!(!Request::put(0, 1, 2, 3).returns_data());
        let bytes = bytemuck::bytes_of(&r);
        assert_eq!(bytes[0], Opcode::PutSignal as u8);
        assert_eq!(&bytes[4..8], &3u32.to_le_bytes());
    }
}
