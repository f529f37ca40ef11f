//! RC queue-pair state transitions (RESET → INIT → RTR → RTS): the attributes of each,
//! computed by pure functions from the two endpoints, then turned into sideway's
//! [`QueuePairAttribute`].
//!
//! Values follow NVSHMEM's IBRC transport (`gpu-rdma-facts.md` §7): pkey index 0; access
//! REMOTE_WRITE/READ/ATOMIC with LOCAL_WRITE; path MTU the smaller of the two ports'
//! active MTUs; `min_rnr_timer` 12; `timeout` 20 (4.096 µs × 2^20 ≈ 4.3 s per try);
//! `retry_cnt` 7 and `rnr_retry` 7; reads/atomics in flight: what this device accepts as
//! responder, and as initiator the smaller of this device's limit and what the peer
//! accepts. InfiniBand ports are addressed by LID, Ethernet (RoCE) ports by GID through a
//! GRH with hop limit 255. Every verbs struct starts zeroed (sideway zeroes
//! `ibv_qp_attr` and `ibv_ah_attr`), which avoids NVSHMEM's uninitialised `static_rate`
//! bug.

use sideway::ibverbs::address::{AddressHandleAttribute, Gid};
use sideway::ibverbs::device_context::Mtu;
use sideway::ibverbs::queue_pair::{QueuePairAttribute, QueuePairState};
use sideway::ibverbs::AccessFlags;

use super::device::LocalPort;
use super::endpoint::{Endpoint, Link, QpAddr};

/// `min_rnr_timer` (12 = 0.64 ms).
pub(crate) const MIN_RNR_TIMER: u8 = 12;
/// Local ACK timeout exponent: 4.096 µs × 2^20 ≈ 4.3 s.
pub(crate) const TIMEOUT: u8 = 20;
/// Transport retries before IBV_WC_RETRY_EXC_ERR.
pub(crate) const RETRY_CNT: u8 = 7;
/// RNR retries (7 = infinite).
pub(crate) const RNR_RETRY: u8 = 7;
/// GRH hop limit on RoCE.
pub(crate) const HOP_LIMIT: u8 = 255;
/// Cap on reads/atomics in flight (the largest value devices report, 16 on mlx5).
pub(crate) const MAX_RD_ATOMIC: u8 = 16;

/// Access flags of the queue pairs and the heap's memory region.
pub(crate) fn remote_access() -> AccessFlags {
    AccessFlags::LocalWrite
        | AccessFlags::RemoteWrite
        | AccessFlags::RemoteRead
        | AccessFlags::RemoteAtomic
}

/// RESET → INIT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InitPlan {
    /// Port number.
    pub port: u8,
    /// Partition key index.
    pub pkey_index: u16,
}

/// The global route header of a RoCE address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grh {
    /// The peer's GID.
    pub dgid: [u8; 16],
    /// This port's GID index.
    pub sgid_index: u8,
    /// Hop limit.
    pub hop_limit: u8,
}

/// INIT → RTR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RtrPlan {
    /// Path MTU as `ibv_mtu` (1 = 256 … 5 = 4096).
    pub path_mtu: u8,
    /// The peer's queue pair number.
    pub dest_qpn: u32,
    /// The peer's initial send PSN.
    pub rq_psn: u32,
    /// Reads/atomics this side accepts in flight.
    pub max_dest_rd_atomic: u8,
    /// RNR NAK timer.
    pub min_rnr_timer: u8,
    /// This port.
    pub port: u8,
    /// The peer's LID (InfiniBand).
    pub dlid: u16,
    /// The route to the peer's GID (RoCE).
    pub grh: Option<Grh>,
}

/// RTR → RTS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RtsPlan {
    /// This queue pair's initial send PSN.
    pub sq_psn: u32,
    /// Local ACK timeout exponent.
    pub timeout: u8,
    /// Transport retries.
    pub retry_cnt: u8,
    /// RNR retries.
    pub rnr_retry: u8,
    /// Reads/atomics this side issues in flight.
    pub max_rd_atomic: u8,
}

/// The INIT attributes on `local`'s port.
pub(crate) fn init_plan(local: &LocalPort) -> InitPlan {
    InitPlan {
        port: local.port,
        pkey_index: 0,
    }
}

/// The RTR attributes for connecting to `peer`'s queue pair `theirs`; the error says why
/// the two ports cannot talk.
pub(crate) fn rtr_plan(
    local: &LocalPort,
    peer: &Endpoint,
    theirs: QpAddr,
) -> Result<RtrPlan, String> {
    if local.link != peer.link {
        return Err(format!(
            "this PE's port is {:?} and the peer's is {:?}: RC needs both on the same link layer",
            local.link, peer.link
        ));
    }
    if theirs.qpn == 0 {
        return Err("the peer created no queue pair for this PE".into());
    }
    let (dlid, grh) = match local.link {
        Link::Ib => {
            if peer.lid == 0 {
                return Err("the peer's InfiniBand port has LID 0 (no subnet manager?)".into());
            }
            (peer.lid, None)
        }
        Link::Ethernet => {
            if peer.gid == [0; 16] {
                return Err("the peer's RoCE GID is all zero".into());
            }
            (
                0,
                Some(Grh {
                    dgid: peer.gid,
                    sgid_index: local.gid_index,
                    hop_limit: HOP_LIMIT,
                }),
            )
        }
    };
    Ok(RtrPlan {
        path_mtu: local.mtu.min(peer.mtu),
        dest_qpn: theirs.qpn,
        rq_psn: theirs.psn,
        max_dest_rd_atomic: local.rd_atomic.clamp(1, MAX_RD_ATOMIC),
        min_rnr_timer: MIN_RNR_TIMER,
        port: local.port,
        dlid,
        grh,
    })
}

/// The RTS attributes of a queue pair whose initial PSN is `mine`, talking to `peer`.
pub(crate) fn rts_plan(local: &LocalPort, peer: &Endpoint, mine: QpAddr) -> RtsPlan {
    RtsPlan {
        sq_psn: mine.psn,
        timeout: TIMEOUT,
        retry_cnt: RETRY_CNT,
        rnr_retry: RNR_RETRY,
        max_rd_atomic: local
            .init_rd_atomic
            .min(peer.rd_atomic)
            .clamp(1, MAX_RD_ATOMIC),
    }
}

/// sideway's form of an [`InitPlan`].
pub(crate) fn init_attr(p: &InitPlan) -> QueuePairAttribute {
    let mut a = QueuePairAttribute::new();
    a.setup_state(QueuePairState::Init)
        .setup_pkey_index(p.pkey_index)
        .setup_port(p.port)
        .setup_access_flags(remote_access());
    a
}

/// sideway's form of an [`RtrPlan`].
pub(crate) fn rtr_attr(p: &RtrPlan) -> QueuePairAttribute {
    let mut a = QueuePairAttribute::new();
    a.setup_state(QueuePairState::ReadyToReceive)
        .setup_path_mtu(Mtu::from(p.path_mtu as u32))
        .setup_dest_qp_num(p.dest_qpn)
        .setup_rq_psn(p.rq_psn)
        .setup_max_dest_read_atomic(p.max_dest_rd_atomic)
        .setup_min_rnr_timer(p.min_rnr_timer);
    let mut ah = AddressHandleAttribute::new();
    ah.setup_port(p.port)
        .setup_service_level(0)
        .setup_dest_lid(p.dlid);
    if let Some(g) = &p.grh {
        ah.setup_grh(&Gid { raw: g.dgid }, 0, g.sgid_index, g.hop_limit, 0);
    }
    a.setup_address_vector(&ah);
    a
}

/// sideway's form of an [`RtsPlan`].
pub(crate) fn rts_attr(p: &RtsPlan) -> QueuePairAttribute {
    let mut a = QueuePairAttribute::new();
    a.setup_state(QueuePairState::ReadyToSend)
        .setup_sq_psn(p.sq_psn)
        .setup_timeout(p.timeout)
        .setup_retry_cnt(p.retry_cnt)
        .setup_rnr_retry(p.rnr_retry)
        .setup_max_read_atomic(p.max_rd_atomic);
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(link: Link) -> LocalPort {
        LocalPort {
            device: "mlx5_0".into(),
            port: 1,
            link,
            lid: if link == Link::Ib { 7 } else { 0 },
            gid: [0xfe; 16],
            gid_index: 3,
            mtu: 5,
            rd_atomic: 16,
            init_rd_atomic: 16,
            max_qp_wr: 32768,
            max_cqe: 4194303,
        }
    }

    fn peer(link: Link) -> Endpoint {
        Endpoint {
            link,
            mtu: 3,
            lid: if link == Link::Ib { 9 } else { 0 },
            rd_atomic: 4,
            qps_per_peer: 1,
            n_pes: 2,
            rkey: 1,
            base: 0,
            len: 4096,
            gid: [0xab; 16],
            qps: vec![QpAddr { qpn: 0, psn: 0 }, QpAddr { qpn: 77, psn: 5 }],
        }
    }

    #[test]
    fn roce_routes_by_gid_and_takes_the_smaller_mtu() {
        let (l, p) = (port(Link::Ethernet), peer(Link::Ethernet));
        let r = rtr_plan(&l, &p, p.qp_for(1, 0)).unwrap();
        assert_eq!(r.path_mtu, 3, "min(4096, 1024) = 1024");
        assert_eq!((r.dest_qpn, r.rq_psn), (77, 5));
        assert_eq!(r.min_rnr_timer, 12);
        assert_eq!(r.max_dest_rd_atomic, 16);
        assert_eq!(r.dlid, 0);
        assert_eq!(
            r.grh,
            Some(Grh {
                dgid: [0xab; 16],
                sgid_index: 3,
                hop_limit: 255
            })
        );
        let a = rtr_attr(&r);
        assert_eq!(a.state(), QueuePairState::ReadyToReceive);
        assert_eq!(a.path_mtu(), Mtu::Mtu1024);
        assert_eq!(a.dest_qp_num(), 77);
        assert_eq!(a.rq_psn(), 5);
        assert_eq!(a.max_dest_read_atomic(), 16);
        assert_eq!(a.min_rnr_timer(), 12);
    }

    #[test]
    fn infiniband_routes_by_lid_without_grh() {
        let (l, p) = (port(Link::Ib), peer(Link::Ib));
        let r = rtr_plan(&l, &p, p.qp_for(1, 0)).unwrap();
        assert_eq!((r.dlid, r.grh.clone()), (9, None));
        let mut p0 = p.clone();
        p0.lid = 0;
        assert!(rtr_plan(&l, &p0, p0.qp_for(1, 0))
            .unwrap_err()
            .contains("LID 0"));
    }

    #[test]
    fn mismatched_or_missing_peers_are_refused() {
        let l = port(Link::Ib);
        let p = peer(Link::Ethernet);
        assert!(rtr_plan(&l, &p, p.qp_for(1, 0))
            .unwrap_err()
            .contains("link layer"));
        let l = port(Link::Ethernet);
        assert!(rtr_plan(&l, &p, p.qp_for(0, 0))
            .unwrap_err()
            .contains("no queue pair"));
        let mut z = p.clone();
        z.gid = [0; 16];
        assert!(rtr_plan(&l, &z, z.qp_for(1, 0))
            .unwrap_err()
            .contains("all zero"));
    }

    #[test]
    fn rts_uses_nvshmem_retries_and_the_peers_atomic_depth() {
        let (l, p) = (port(Link::Ethernet), peer(Link::Ethernet));
        let r = rts_plan(
            &l,
            &p,
            QpAddr {
                qpn: 12,
                psn: 0xabc,
            },
        );
        assert_eq!(
            r,
            RtsPlan {
                sq_psn: 0xabc,
                timeout: 20,
                retry_cnt: 7,
                rnr_retry: 7,
                max_rd_atomic: 4
            }
        );
        let a = rts_attr(&r);
        assert_eq!(a.state(), QueuePairState::ReadyToSend);
        assert_eq!(
            (
                a.sq_psn(),
                a.timeout(),
                a.retry_cnt(),
                a.rnr_retry(),
                a.max_read_atomic()
            ),
            (0xabc, 20, 7, 7, 4)
        );
        // A device or peer reporting 0 still gets one read/atomic in flight.
        let mut l0 = l.clone();
        l0.init_rd_atomic = 0;
        assert_eq!(rts_plan(&l0, &p, QpAddr::default()).max_rd_atomic, 1);
        let mut l0 = l.clone();
        l0.rd_atomic = 200;
        assert_eq!(
            rtr_plan(&l0, &p, p.qp_for(1, 0))
                .unwrap()
                .max_dest_rd_atomic,
            MAX_RD_ATOMIC
        );
    }

    #[test]
    fn init_grants_remote_access() {
        let a = init_attr(&init_plan(&port(Link::Ib)));
        assert_eq!(a.state(), QueuePairState::Init);
        assert_eq!((a.port(), a.pkey_index()), (1, 0));
        let f = a.access_flags();
        for flag in [
            AccessFlags::LocalWrite,
            AccessFlags::RemoteWrite,
            AccessFlags::RemoteRead,
            AccessFlags::RemoteAtomic,
        ] {
            assert!(f.contains(flag), "{flag:?}");
        }
        assert!(
            !f.contains(AccessFlags::RelaxedOrdering),
            "relaxed ordering breaks put_signal"
        );
    }
}
