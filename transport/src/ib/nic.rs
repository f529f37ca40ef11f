//! The seam between the transport's bookkeeping and the verbs calls: posting one work
//! request on a QP and polling completions. [`RcNic`] is the real one (sideway QPs and a
//! CQ); the transport's tests drive the same bookkeeping with a fake NIC in memory.

use std::sync::Arc;

use sideway::ibverbs::completion::GenericCompletionQueue;
use sideway::ibverbs::memory_region::MemoryRegion;
use sideway::ibverbs::queue_pair::{
    GenericQueuePair, PostSendGuard, QueuePair, SetScatterGatherEntry, WorkRequestFlags,
};

use super::wr::WrOp;

/// One work request with its addresses resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Posted {
    /// WR id (reported back by its completion).
    pub id: u64,
    /// What it does.
    pub op: WrOp,
    /// The peer heap's remote key.
    pub rkey: u32,
    /// Remote address.
    pub raddr: u64,
    /// Local key of the local buffer.
    pub lkey: u32,
    /// Local address.
    pub laddr: u64,
    /// Bytes.
    pub len: u32,
    /// Carries `IBV_SEND_FENCE`.
    pub fence: bool,
}

/// One completion: WR id, status (0 = success), vendor syndrome.
pub(crate) type Completion = (u64, u32, u32);

/// Posting and polling.
pub(crate) trait Nic: Send {
    /// Posts `wr`, signaled, on QP `qi` of `pe`; the error names the failed call.
    fn post(&mut self, pe: usize, qi: usize, wr: &Posted) -> Result<(), String>;
    /// Appends the completions available now to `out`.
    fn poll(&mut self, out: &mut Vec<Completion>);
}

/// The real NIC: RC QPs by peer, one CQ, and the memory regions that must live as long.
pub(crate) struct RcNic {
    /// `qps[pe]`: the QPs to `pe` (empty for PEs not reached through ib).
    pub qps: Vec<Vec<GenericQueuePair>>,
    /// The CQ every QP reports to.
    pub cq: GenericCompletionQueue,
    /// The heap's and the bounce buffer's registrations, dropped with the QPs and before
    /// the bounce memory (the transport state declares the NIC first).
    pub _mrs: Vec<Arc<MemoryRegion>>,
}

impl Nic for RcNic {
    fn post(&mut self, pe: usize, qi: usize, wr: &Posted) -> Result<(), String> {
        let qp = &mut self.qps[pe][qi];
        let mut flags = WorkRequestFlags::Signaled;
        if wr.fence {
            flags |= WorkRequestFlags::Fence;
        }
        let mut guard = qp.start_post_send();
        let h = guard.construct_wr(wr.id, flags);
        let lb = match wr.op {
            WrOp::Write => h.setup_write(wr.rkey, wr.raddr),
            WrOp::Read => h.setup_read(wr.rkey, wr.raddr),
            WrOp::FetchAdd { add } => h.setup_atomic_fetch_add(wr.rkey, wr.raddr, add),
            WrOp::CompareSwap { compare, swap } => {
                h.setup_atomic_compare_swap(wr.rkey, wr.raddr, compare, swap)
            }
        };
        // SAFETY: the caller guarantees `laddr..laddr + len` is registered under `lkey`
        // (the heap or the bounce buffer) and stays valid until this WR's completion is
        // polled (bounce pieces are held until then; in-place payloads are waited for).
        unsafe { lb.setup_sge(wr.lkey, wr.laddr, wr.len) };
        guard
            .post()
            .map_err(|e| format!("ibv_post_send of {} failed: {e} ({e:?})", wr.op.name()))
    }

    fn poll(&mut self, out: &mut Vec<Completion>) {
        if let Ok(poller) = self.cq.start_poll() {
            for wc in poller {
                out.push((wc.wr_id(), wc.status(), wc.vendor_err()));
            }
        }
    }
}
