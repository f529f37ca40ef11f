//! What one PE tells every other PE so that they can connect RC queue pairs to it and
//! address its heap: a fixed binary encoding, exchanged with the bootstrap's allgather.
//!
//! ```text
//! offset  field         type       meaning
//!  0      magic         [u8; 4]    b"SMIB"
//!  4      version       u16        VERSION
//!  6      link          u8         1 = InfiniBand (address by LID), 2 = Ethernet (RoCE, by GID)
//!  7      mtu           u8         the port's active MTU as ibv_mtu (1 = 256 … 5 = 4096)
//!  8      lid           u16        the port's LID (0 on RoCE)
//! 10      rd_atomic     u8         RDMA reads/atomics this PE accepts in flight per QP
//! 11      (reserved)    u8         0
//! 12      qps_per_peer  u16        SYMMEM_IB_QPS_PER_PEER
//! 14      (reserved)    u16        0
//! 16      n_pes         u32        PEs in the job
//! 20      rkey          u32        the heap's remote key
//! 24      base          u64        the heap's address as registered (the iova)
//! 32      len           u64        the heap's bytes
//! 40      gid           [u8; 16]   the chosen GID (all zero on InfiniBand without GRH)
//! 56      table         n_pes × qps_per_peer × (qpn u32, psn u32): the queue pairs this
//!                                  PE created for each peer (zero for peers it does not
//!                                  reach through ib)
//! ```
//! All integers are little-endian. A blob whose length, magic, version or shape differ from
//! what this PE expects is an error, never a guess.

/// Encoding version; bump on any change to the layout.
pub(crate) const VERSION: u16 = 1;
const MAGIC: [u8; 4] = *b"SMIB";
/// Bytes before the table.
pub(crate) const HEADER_LEN: usize = 56;
/// Bytes per table entry.
const ENTRY_LEN: usize = 8;
/// PSNs are 24 bits.
pub(crate) const PSN_MASK: u32 = 0x00ff_ffff;

/// The link layer of a port, as it decides addressing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Link {
    /// InfiniBand: address by LID.
    Ib = 1,
    /// Ethernet (RoCE): address by GID, through a GRH.
    Ethernet = 2,
}

/// One queue pair's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct QpAddr {
    /// Queue pair number.
    pub qpn: u32,
    /// Initial packet sequence number (24 bits).
    pub psn: u32,
}

/// One PE's connection information.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    /// Link layer of its port.
    pub link: Link,
    /// Active MTU of its port, as `ibv_mtu` (1 = 256 bytes … 5 = 4096 bytes).
    pub mtu: u8,
    /// Its port's LID.
    pub lid: u16,
    /// RDMA reads and atomics it accepts in flight per queue pair.
    pub rd_atomic: u8,
    /// Queue pairs per peer.
    pub qps_per_peer: u16,
    /// PEs in the job.
    pub n_pes: u32,
    /// Its heap's remote key.
    pub rkey: u32,
    /// Its heap's registered address.
    pub base: u64,
    /// Its heap's bytes.
    pub len: u64,
    /// Its GID.
    pub gid: [u8; 16],
    /// `qps[peer * qps_per_peer + i]`: its `i`-th queue pair for `peer`.
    pub qps: Vec<QpAddr>,
}

impl Endpoint {
    /// The `i`-th queue pair this PE created for `peer`.
    pub(crate) fn qp_for(&self, peer: usize, i: usize) -> QpAddr {
        self.qps[peer * self.qps_per_peer as usize + i]
    }

    /// The encoded form.
    pub(crate) fn encode(&self) -> Vec<u8> {
        debug_assert_eq!(
            self.qps.len(),
            self.n_pes as usize * self.qps_per_peer as usize
        );
        let mut b = Vec::with_capacity(HEADER_LEN + self.qps.len() * ENTRY_LEN);
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.push(self.link as u8);
        b.push(self.mtu);
        b.extend_from_slice(&self.lid.to_le_bytes());
        b.push(self.rd_atomic);
        b.push(0);
        b.extend_from_slice(&self.qps_per_peer.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&self.n_pes.to_le_bytes());
        b.extend_from_slice(&self.rkey.to_le_bytes());
        b.extend_from_slice(&self.base.to_le_bytes());
        b.extend_from_slice(&self.len.to_le_bytes());
        b.extend_from_slice(&self.gid);
        debug_assert_eq!(b.len(), HEADER_LEN);
        for q in &self.qps {
            b.extend_from_slice(&q.qpn.to_le_bytes());
            b.extend_from_slice(&q.psn.to_le_bytes());
        }
        b
    }

    /// Decodes a peer's blob, which must describe a job of `n_pes` PEs with
    /// `qps_per_peer` queue pairs per peer; the error says what does not match.
    pub(crate) fn decode(b: &[u8], n_pes: usize, qps_per_peer: usize) -> Result<Self, String> {
        if b.len() < HEADER_LEN {
            return Err(format!(
                "its endpoint is {} bytes, shorter than the {HEADER_LEN}-byte header",
                b.len()
            ));
        }
        let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        if b[0..4] != MAGIC {
            return Err(format!(
                "its endpoint does not start with \"SMIB\" (got {:?})",
                String::from_utf8_lossy(&b[0..4])
            ));
        }
        let version = u16_at(4);
        if version != VERSION {
            return Err(format!(
                "its endpoint encoding is version {version}, this PE speaks {VERSION} (mixed symmem builds?)"
            ));
        }
        let link = match b[6] {
            1 => Link::Ib,
            2 => Link::Ethernet,
            other => return Err(format!("its link layer code {other} is unknown")),
        };
        let mtu = b[7];
        if !(1..=5).contains(&mtu) {
            return Err(format!("its MTU code {mtu} is not 1 to 5"));
        }
        let theirs_q = u16_at(12) as usize;
        let theirs_n = u32_at(16) as usize;
        if theirs_n != n_pes || theirs_q != qps_per_peer {
            return Err(format!(
                "it describes {theirs_n} PEs with {theirs_q} queue pairs per peer, this PE {n_pes} with {qps_per_peer} (set SYMMEM_IB_QPS_PER_PEER alike on every PE)"
            ));
        }
        let entries = n_pes
            .checked_mul(qps_per_peer)
            .ok_or_else(|| "its queue-pair table size overflows".to_string())?;
        let want = entries
            .checked_mul(ENTRY_LEN)
            .and_then(|t| t.checked_add(HEADER_LEN))
            .ok_or_else(|| "its queue-pair table size overflows".to_string())?;
        if b.len() != want {
            return Err(format!(
                "its endpoint is {} bytes, expected {want} ({HEADER_LEN}-byte header and {entries} queue-pair entries)",
                b.len()
            ));
        }
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[40..56]);
        let mut qps = Vec::with_capacity(entries);
        for i in 0..entries {
            let o = HEADER_LEN + i * ENTRY_LEN;
            let psn = u32_at(o + 4);
            if psn & !PSN_MASK != 0 {
                return Err(format!("its PSN {psn:#x} (entry {i}) exceeds 24 bits"));
            }
            qps.push(QpAddr {
                qpn: u32_at(o),
                psn,
            });
        }
        Ok(Endpoint {
            link,
            mtu,
            lid: u16_at(8),
            rd_atomic: b[10],
            qps_per_peer: theirs_q as u16,
            n_pes: theirs_n as u32,
            rkey: u32_at(20),
            base: u64_at(24),
            len: u64_at(32),
            gid,
            qps,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Endpoint {
        Endpoint {
            link: Link::Ethernet,
            mtu: 3,
            lid: 0,
            rd_atomic: 16,
            qps_per_peer: 2,
            n_pes: 3,
            rkey: 0xdead_beef,
            base: 0x7f00_0000_1000,
            len: 1 << 30,
            gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 7],
            qps: (0..6)
                .map(|i| QpAddr {
                    qpn: 0x100 + i,
                    psn: (0x12345 * (i + 1)) & PSN_MASK,
                })
                .collect(),
        }
    }

    #[test]
    fn round_trip() {
        let e = sample();
        let b = e.encode();
        assert_eq!(b.len(), HEADER_LEN + 6 * 8);
        let d = Endpoint::decode(&b, 3, 2).unwrap();
        assert_eq!(d, e);
        assert_eq!(d.qp_for(2, 1), e.qps[5]);
        assert_eq!(d.qp_for(1, 0).qpn, 0x102);
        // Fixed offsets: the rkey and base where the layout table says.
        assert_eq!(&b[20..24], &0xdead_beefu32.to_le_bytes());
        assert_eq!(&b[24..32], &0x7f00_0000_1000u64.to_le_bytes());
        let mut ib = sample();
        ib.link = Link::Ib;
        ib.lid = 0x1234;
        assert_eq!(Endpoint::decode(&ib.encode(), 3, 2).unwrap(), ib);
    }

    #[test]
    fn bad_lengths_and_headers_are_refused() {
        let b = sample().encode();
        for cut in [0, 10, HEADER_LEN - 1, HEADER_LEN, b.len() - 1] {
            let err = Endpoint::decode(&b[..cut], 3, 2).unwrap_err();
            assert!(err.contains("bytes"), "cut {cut}: {err}");
        }
        let mut long = b.clone();
        long.push(0);
        assert!(Endpoint::decode(&long, 3, 2)
            .unwrap_err()
            .contains("expected"));

        let mut bad = b.clone();
        bad[0] = b'X';
        assert!(Endpoint::decode(&bad, 3, 2).unwrap_err().contains("SMIB"));
        let mut bad = b.clone();
        bad[4] = 9;
        assert!(Endpoint::decode(&bad, 3, 2)
            .unwrap_err()
            .contains("version"));
        let mut bad = b.clone();
        bad[6] = 7;
        assert!(Endpoint::decode(&bad, 3, 2).unwrap_err().contains("link"));
        let mut bad = b.clone();
        bad[7] = 6;
        assert!(Endpoint::decode(&bad, 3, 2).unwrap_err().contains("MTU"));
        let mut bad = b.clone();
        bad[HEADER_LEN + 7] = 0x01; // the first PSN's top byte
        assert!(Endpoint::decode(&bad, 3, 2)
            .unwrap_err()
            .contains("24 bits"));

        let err = Endpoint::decode(&b, 3, 1).unwrap_err();
        assert!(err.contains("SYMMEM_IB_QPS_PER_PEER"), "{err}");
        let err = Endpoint::decode(&b, 4, 2).unwrap_err();
        assert!(err.contains("4 with 2"), "{err}");
    }
}
