//! The bootstrap of a program started without any launcher: one PE.

use std::time::Duration;

use crate::error::BootstrapError;
use crate::interface::{Bootstrap, BootstrapKind};

/// A job of exactly one rank; every collective is local.
#[derive(Debug, Clone)]
pub struct SingleBootstrap {
    timeout: Duration,
}

impl SingleBootstrap {
    /// A one-rank bootstrap.
    pub fn new(timeout: Duration) -> Self {
        SingleBootstrap { timeout }
    }
}

impl Bootstrap for SingleBootstrap {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn kind(&self) -> BootstrapKind {
        BootstrapKind::Single
    }
    fn timeout(&self) -> Duration {
        self.timeout
    }
    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        Ok(vec![mine.to_vec()])
    }
    fn alltoall(&self, outgoing: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        if outgoing.len() != 1 {
            return Err(BootstrapError::Config(format!(
                "alltoall needs 1 payload (one per rank), got {}",
                outgoing.len()
            )));
        }
        Ok(outgoing.to_vec())
    }
    fn barrier(&self) -> Result<(), BootstrapError> {
        Ok(())
    }
    fn broadcast(&self, root: usize, data: &[u8]) -> Result<Vec<u8>, BootstrapError> {
        if root != 0 {
            return Err(BootstrapError::Config(format!(
                "broadcast root {root} is out of range for 1 rank"
            )));
        }
        Ok(data.to_vec())
    }
    fn abort(&self, reason: &str) {
        tracing::error!("abort: {reason}");
    }
    fn failure(&self) -> Option<BootstrapError> {
        None
    }
}
