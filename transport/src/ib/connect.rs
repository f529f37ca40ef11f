//! Connecting the ib transport (see the parent module's "Connecting"): local setup
//! ([`Prepared`]), the endpoints' exchange through the bootstrap (with a failure flag, so
//! one PE's failure fails every PE with its reason), then each QP to RTR and RTS.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sideway::ibverbs::completion::GenericCompletionQueue;
use sideway::ibverbs::memory_region::MemoryRegion;
use sideway::ibverbs::queue_pair::{GenericQueuePair, QueuePair};

use super::device::{self, LocalPort};
use super::endpoint::{Endpoint, QpAddr, PSN_MASK};
use super::mr::{self, Bounce};
use super::nic::RcNic;
use super::qp;
use super::wr::Fences;
use super::{IbTransport, Peer, Qp, State, QP_DEPTH};
use crate::error::{Error, Result};
use crate::interface::Setup;

impl IbTransport {
    /// Connects to every PE `setup.remote` names. Collective: every PE calls it.
    pub(crate) fn connect(setup: &Setup<'_>) -> Result<Self> {
        let me = setup.me;
        let n = setup.remote.len();
        let q = setup.config.ib_qps_per_peer;
        let b = setup.bootstrap;
        // Local setup; a failure is sent round instead of the endpoint, so every PE
        // fails with its reason instead of waiting for it.
        let local = Prepared::open(setup);
        let blob = exchange_blob(local.as_ref().map(|l| &l.endpoint));
        let all = b.allgather(&blob)?;
        let mut local = local?;
        let init_err = |pe: usize, detail: String| Error::Transport {
            transport: "ib",
            op: "init",
            me,
            pe,
            detail,
        };
        let eps = read_exchange(&all, setup.remote, q).map_err(|(pe, why)| init_err(pe, why))?;
        let port = local.port.clone();
        let mut peers: Vec<Option<Peer>> = (0..n).map(|_| None).collect();
        let mut rc: Vec<Vec<GenericQueuePair>> = (0..n).map(|_| Vec::new()).collect();
        for pe in (0..n).filter(|&p| setup.remote[p]) {
            let ep = eps[pe].as_ref().expect("decoded above");
            let mut qps = Vec::with_capacity(q);
            for (i, mut qp) in local.qps[pe].drain(..).enumerate() {
                let mine = local.endpoint.qp_for(pe, i);
                let theirs = ep.qp_for(me, i);
                let rtr = qp::rtr_plan(&port, ep, theirs).map_err(|why| init_err(pe, why))?;
                qp.modify(&qp::rtr_attr(&rtr)).map_err(|e| {
                    init_err(
                        pe,
                        format!("{}: QP {} to RTR: {e} ({:?})", port.name(), mine.qpn, e.0),
                    )
                })?;
                let rts = qp::rts_plan(&port, ep, mine);
                qp.modify(&qp::rts_attr(&rts)).map_err(|e| {
                    init_err(
                        pe,
                        format!("{}: QP {} to RTS: {e} ({:?})", port.name(), mine.qpn, e.0),
                    )
                })?;
                rc[pe].push(qp);
                qps.push(Qp {
                    outstanding: 0,
                    fences: Fences::default(),
                });
            }
            peers[pe] = Some(Peer {
                qps,
                next: 0,
                rkey: ep.rkey,
                base: ep.base,
                len: ep.len,
                failure: None,
            });
        }
        // Nobody sends before every peer's QPs can receive.
        b.barrier()?;
        tracing::info!(
            target: "init::transport",
            "PE {me}: ib transport on {}, {q} RC queue pair(s) per peer, heap rkey {:#x}",
            port.describe(),
            local.endpoint.rkey
        );
        Ok(IbTransport {
            me,
            device: port.name(),
            qps_per_peer: q,
            timeout: setup.config.timeout,
            blocked: Default::default(),
            state: Mutex::new(Some(State {
                nic: Box::new(RcNic {
                    qps: rc,
                    cq: local.cq,
                    _mrs: vec![local.heap_mr.clone(), local.bounce_mr],
                }),
                peers,
                heap: setup.heap,
                heap_lkey: local.heap_mr.lkey(),
                bounce: local.bounce,
                pending: HashMap::new(),
                done: HashMap::new(),
                next_id: 1,
                depth: local.depth,
            })),
        })
    }
}

/// What this PE sends through the allgather: 0 and its endpoint, or 1 and why its setup
/// failed (so that every PE fails naming it instead of waiting for it).
pub(super) fn exchange_blob(local: std::result::Result<&Endpoint, &Error>) -> Vec<u8> {
    match local {
        Ok(ep) => {
            let mut v = vec![0u8];
            v.extend_from_slice(&ep.encode());
            v
        }
        Err(e) => {
            let mut v = vec![1u8];
            v.extend_from_slice(e.to_string().as_bytes());
            v
        }
    }
}

/// Every PE's endpoint (`None` for PEs this PE does not reach through ib) from the
/// allgather of [`exchange_blob`]s, or the first PE that failed and why.
pub(super) fn read_exchange(
    all: &[Vec<u8>],
    remote: &[bool],
    q: usize,
) -> std::result::Result<Vec<Option<Endpoint>>, (usize, String)> {
    let n = remote.len();
    if all.len() != n {
        return Err((
            0,
            format!("the exchange returned {} endpoints for {n} PEs", all.len()),
        ));
    }
    let mut eps: Vec<Option<Endpoint>> = (0..n).map(|_| None).collect();
    for (pe, blob) in all.iter().enumerate() {
        match blob.split_first() {
            Some((0, rest)) => {
                if remote[pe] {
                    eps[pe] = Some(Endpoint::decode(rest, n, q).map_err(|why| (pe, why))?);
                }
            }
            Some((1, why)) => {
                return Err((
                    pe,
                    format!(
                        "PE {pe} could not set up ib: {}",
                        String::from_utf8_lossy(why)
                    ),
                ))
            }
            _ => return Err((pe, "its endpoint blob is malformed".into())),
        }
    }
    Ok(eps)
}

/// What a PE sets up before the exchange.
struct Prepared {
    port: LocalPort,
    endpoint: Endpoint,
    cq: GenericCompletionQueue,
    heap_mr: Arc<MemoryRegion>,
    bounce: Bounce,
    bounce_mr: Arc<MemoryRegion>,
    /// `qps[pe]`: the QPs (in INIT) for `pe`.
    qps: Vec<Vec<GenericQueuePair>>,
    depth: u32,
}

impl Prepared {
    fn open(setup: &Setup<'_>) -> Result<Self> {
        let me = setup.me;
        let n = setup.remote.len();
        let q = setup.config.ib_qps_per_peer;
        let cfg_err = |reason: String| Error::TransportConfig {
            variable: crate::config::var::REMOTE_TRANSPORT,
            value: "ib".into(),
            reason: format!("PE {me}: {reason}"),
        };
        let (ctx, port) = device::open(setup.config)
            .map_err(|why| cfg_err(format!("no usable RDMA device: {why}")))?;
        let at = |what: &str, e: &dyn std::fmt::Debug| {
            cfg_err(format!("{}: {what} failed: {e:?}", port.name()))
        };
        let pd = ctx.alloc_pd().map_err(|e| at("ibv_alloc_pd", &e))?;
        let heap_mr = mr::register_heap(
            &pd,
            setup.heap,
            setup.export_gpu_heap,
            setup.config,
            me,
            &port,
        )?;
        let mut bounce = Bounce::new();
        let bounce_mr = mr::register_bounce(&pd, &mut bounce)
            .map_err(|why| cfg_err(format!("{}: {why}", port.name())))?;
        let remotes = setup.remote.iter().filter(|&&r| r).count().max(1) as u32;
        let qps_total = remotes * q as u32;
        let depth = QP_DEPTH
            .min(port.max_qp_wr)
            .min((port.max_cqe / qps_total).max(1));
        let cq = ctx
            .create_cq_builder()
            .setup_cqe((qps_total * depth).min(port.max_cqe))
            .build()
            .map_err(|e| at("ibv_create_cq", &e))?;
        let cq = GenericCompletionQueue::from(cq);
        let mut seed = symmem_bootstrap::random_nonce()? | 1;
        let mut psn = || {
            // xorshift64: distinct, unpredictable initial PSNs.
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed as u32) & PSN_MASK
        };
        let mut addrs = vec![QpAddr::default(); n * q];
        let mut qps: Vec<Vec<GenericQueuePair>> = (0..n).map(|_| Vec::new()).collect();
        for pe in (0..n).filter(|&p| setup.remote[p]) {
            for i in 0..q {
                let mut b = pd.create_qp_builder();
                b.setup_max_send_wr(depth)
                    .setup_max_recv_wr(1)
                    .setup_max_send_sge(1)
                    .setup_max_recv_sge(1)
                    .setup_max_inline_data(0)
                    .setup_send_cq(cq.clone())
                    .setup_recv_cq(cq.clone());
                let mut qp: GenericQueuePair =
                    b.build().map_err(|e| at("ibv_create_qp", &e))?.into();
                qp.modify(&qp::init_attr(&qp::init_plan(&port)))
                    .map_err(|e| at("QP to INIT", &e))?;
                addrs[pe * q + i] = QpAddr {
                    qpn: qp.qp_number(),
                    psn: psn(),
                };
                qps[pe].push(qp);
            }
        }
        let endpoint = Endpoint {
            link: port.link,
            mtu: port.mtu,
            lid: port.lid,
            rd_atomic: port.rd_atomic.clamp(1, qp::MAX_RD_ATOMIC),
            qps_per_peer: q as u16,
            n_pes: n as u32,
            rkey: heap_mr.rkey(),
            base: setup.heap.base,
            len: setup.heap.len as u64,
            gid: port.gid,
            qps: addrs,
        };
        Ok(Prepared {
            port,
            endpoint,
            cq,
            heap_mr,
            bounce,
            bounce_mr,
            qps,
            depth,
        })
    }
}
