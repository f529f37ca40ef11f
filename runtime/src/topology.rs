//! Who is where: node identity and process id of every PE.

use crate::error::{Error, Result};

/// What each PE tells the others at init.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeInfo {
    /// `SYMMEM_NODE_ID` or the hostname.
    pub node: String,
    /// Process id.
    pub pid: u32,
    /// `SYMMEM_SYMMETRIC_SIZE` in bytes.
    pub heap_len: usize,
}

impl PeInfo {
    /// Serializes for the allgather.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(12 + self.node.len());
        v.extend_from_slice(&self.pid.to_le_bytes());
        v.extend_from_slice(&(self.heap_len as u64).to_le_bytes());
        v.extend_from_slice(self.node.as_bytes());
        v
    }

    /// Parses what [`Self::encode`] produced; `pe` names the sender in errors.
    pub fn decode(bytes: &[u8], pe: usize) -> Result<Self> {
        let malformed = || Error::Inconsistent {
            what: "init data",
            detail: format!(
                "PE {pe} sent {} malformed bytes (different symmem versions?)",
                bytes.len()
            ),
        };
        if bytes.len() < 12 {
            return Err(malformed());
        }
        Ok(PeInfo {
            pid: u32::from_le_bytes(bytes[..4].try_into().unwrap()),
            heap_len: u64::from_le_bytes(bytes[4..12].try_into().unwrap()) as usize,
            node: String::from_utf8(bytes[12..].to_vec()).map_err(|_| malformed())?,
        })
    }
}

/// The job's layout as seen from one PE.
#[derive(Debug, Clone)]
pub struct Topology {
    me: usize,
    infos: Vec<PeInfo>,
    local: Vec<usize>,
}

impl Topology {
    /// Builds the topology from everyone's [`PeInfo`].
    pub fn new(me: usize, infos: Vec<PeInfo>) -> Self {
        let local = (0..infos.len())
            .filter(|&p| infos[p].node == infos[me].node)
            .collect();
        Topology { me, infos, local }
    }

    /// This PE.
    pub fn my_pe(&self) -> usize {
        self.me
    }

    /// Number of PEs.
    pub fn n_pes(&self) -> usize {
        self.infos.len()
    }

    /// PEs on this PE's node, including itself, ascending.
    pub fn local_pes(&self) -> &[usize] {
        &self.local
    }

    /// `pe`'s node identity.
    pub fn node(&self, pe: usize) -> &str {
        &self.infos[pe].node
    }

    /// `pe`'s process id.
    pub fn pid(&self, pe: usize) -> u32 {
        self.infos[pe].pid
    }

    /// Every PE's heap length.
    pub fn heap_lens(&self) -> Vec<usize> {
        self.infos.iter().map(|i| i.heap_len).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_roundtrip_and_locality() {
        let a = PeInfo {
            node: "n0".into(),
            pid: 10,
            heap_len: 1 << 20,
        };
        let b = PeInfo {
            node: "n1".into(),
            pid: 11,
            heap_len: 1 << 20,
        };
        assert_eq!(PeInfo::decode(&a.encode(), 0).unwrap(), a);
        assert!(PeInfo::decode(&[1, 2], 3)
            .unwrap_err()
            .to_string()
            .contains("PE 3"));
        let t = Topology::new(2, vec![a.clone(), b.clone(), a, b]);
        assert_eq!(t.local_pes(), &[0, 2]);
    }
}
