//! Opening this PE's endpoint and learning the peers': the shim's open, the exchange
//! of addresses and heaps, and the log line that says what the endpoint is.

use std::ffi::{c_char, c_int, c_void, CString};

use super::placement::{place, Near};
use super::probe::{probe, probe_hmem, providers};
use super::progress::ProgressMode;
use crate::error::{Error, Result};
use crate::interface::Setup;
use crate::ofi::protocol::exchange::{self, PeerHeap, MAX_ADDRESS};
use crate::ofi::protocol::messages::{MAX_DATA, RECV_SLOTS};
use crate::ofi::{ffi, post_receive, wants_messages, Bounce, Endpoint, SLOT_BYTES};

/// The round in which the PEs learn each other's endpoints: every PE's entry, as
/// [`addresses`] reads them. A PE whose endpoint did not open takes part too, sending
/// why, so that every other PE fails naming it.
pub(in crate::ofi) fn share_endpoints(
    setup: &Setup<'_>,
    opened: &Result<Opened>,
) -> Result<Vec<Vec<u8>>> {
    let blob = match opened {
        Ok(o) => exchange::encode(
            &o.name,
            &PeerHeap {
                base: o.heap_base,
                len: setup.heap.len as u64,
                key: o.attrs.heap_key,
                messages: o.takes_messages,
            },
        ),
        Err(e) => exchange::encode_failure(&e.to_string()),
    };
    Ok(setup.bootstrap.allgather(&blob)?)
}

/// Every PE's endpoint address from the exchanged entries `all` (in PE order, each of the
/// returned length) and the heaps of the PEs `setup.remote` names.
pub(in crate::ofi) fn addresses(
    setup: &Setup<'_>,
    all: &[Vec<u8>],
) -> Result<(Vec<u8>, usize, Vec<Option<PeerHeap>>)> {
    let me = setup.me;
    let init_err = |pe: usize, detail: String| Error::Transport {
        transport: "ofi",
        op: "init",
        me,
        pe,
        detail,
    };
    let mut names = Vec::new();
    let mut peers = vec![None; setup.remote.len()];
    let mut addrlen = None;
    for (pe, entry) in all.iter().enumerate() {
        let (name, heap) =
            exchange::decode(entry).map_err(|why| init_err(pe, format!("PE {pe}: {why}")))?;
        if *addrlen.get_or_insert(name.len()) != name.len() {
            return Err(init_err(
                pe,
                format!(
                    "PE {pe}'s endpoint address has {} bytes, others' {}: PEs opened different providers",
                    name.len(),
                    addrlen.unwrap_or(0)
                ),
            ));
        }
        names.extend_from_slice(name);
        if setup.remote.get(pe) == Some(&true) {
            peers[pe] = Some(heap);
        }
    }
    Ok((names, addrlen.unwrap_or(0), peers))
}

/// Logs what the endpoint is: the provider, its completion level, its progress and which
/// of the orders the transport uses (`order`, see [`kept_order`](crate::ofi::kept_order)) it does not keep.
pub(in crate::ofi) fn log_endpoint(
    me: usize,
    attrs: &ffi::Attrs,
    order: u64,
    messages: bool,
    flushes: bool,
    progress: &ProgressMode,
    describe: &str,
) {
    let kind_bits = |rar: u64| [rar, rar << ffi::RAW, rar << ffi::WAR, rar << ffi::WAW];
    let generic = [
        ffi::ORDER_RAR,
        ffi::ORDER_RAW,
        ffi::ORDER_WAR,
        ffi::ORDER_WAW,
    ];
    let unordered: Vec<String> = [
        (kind_bits(ffi::ORDER_RMA_RAR), "RMA_"),
        (kind_bits(ffi::ORDER_ATOMIC_RAR), "ATOMIC_"),
        (generic, ""),
    ]
    .into_iter()
    .flat_map(|(bits, kind)| {
        ["RAR", "RAW", "WAR", "WAW"]
            .into_iter()
            .zip(bits)
            .filter(|&(_, bit)| order & bit == 0)
            .map(move |(name, _)| format!("{kind}{name}"))
    })
    .collect();
    tracing::info!(
        target: "init::transport",
        "PE {me}: ofi transport over {describe}, {}, completion at {}, {}, {}; {}",
        super::auth::heap_key_origin(attrs),
        match (attrs.delivery_complete != 0, flushes) {
            (true, true) => "delivery (writes that stream to a peer at transmit, made visible by a read where needed)",
            (true, false) => "delivery",
            (false, _) => "the provider's default level",
        },
        match (attrs.manual_progress != 0, progress.polls, attrs.wait_fd >= 0) {
            _ if !progress.thread => format!("progress from the application's threads only ({})", progress.why),
            (true, true, _) => format!("manual progress (from waiting threads, else from the transport's thread, polling: {})", progress.why),
            (true, false, true) => format!("manual progress (from waiting threads, else from the transport's thread, blocked on the provider's wait object: {})", progress.why),
            (true, false, false) => "manual progress (from waiting threads, else from the transport's thread, every 20 µs: the provider has no wait object)".to_string(),
            (false, true, _) => format!("automatic progress (messages read by waiting threads, else by the transport's thread, polling: {})", progress.why),
            (false, false, _) => "automatic progress".to_string(),
        },
        if unordered.is_empty() {
            "RMA and atomics kept in order by the provider, each and across".to_string()
        } else {
            format!(
                "no {} order from the provider (such an operation {} the earlier one to the same peer)",
                unordered.join("/"),
                if attrs.fence != 0 { "goes with FI_FENCE behind" } else { "waits for" }
            )
        },
        if messages {
            format!("put_signals of up to {MAX_DATA} bytes and signals come as messages this PE applies")
        } else {
            "signals come as atomics".to_string()
        }
    );
}

/// What `open` made, before the exchange.
pub(in crate::ofi) struct Opened {
    pub(in crate::ofi) ep: Endpoint,
    pub(in crate::ofi) bounce: Bounce,
    pub(in crate::ofi) attrs: ffi::Attrs,
    pub(in crate::ofi) name: Vec<u8>,
    pub(in crate::ofi) heap_base: u64,
    /// Whether peers' signals come as messages ([`messages`](crate::ofi::protocol::messages)); its receives are posted.
    pub(in crate::ofi) takes_messages: bool,
}

/// The largest piece of a put or get: a bounce slot, or less where the provider's
/// messages are smaller.
pub(in crate::ofi) fn piece_bytes(attrs: &ffi::Attrs) -> usize {
    SLOT_BYTES.min(attrs.max_msg_size.max(64))
}

/// Opens this PE's endpoint on the configured provider, on the domain nearest it (`near`,
/// `near_rank`-th of its machine's PEs near the same nodes: [`super::placement`]), and
/// registers the heap; its completion queue has a wait object unless the progress thread
/// `polls`.
pub(in crate::ofi) fn open(
    setup: &Setup<'_>,
    polls: bool,
    near: &Near,
    near_rank: usize,
) -> Result<Opened> {
    let me = setup.me;
    let fail = |detail: String| Error::Transport {
        transport: "ofi",
        op: "init",
        me,
        pe: me,
        detail,
    };
    // The provider `probe` picks (the job agreed on ofi after every PE probed).
    let provider = Some(probe(setup.config.ofi_provider.as_deref()).map_err(fail)?);
    // A GPU heap is registered as CUDA memory (FI_HMEM_CUDA) of its device.
    let cuda_device = match (setup.heap.host, setup.gpu_ordinal) {
        (true, _) => -1,
        (false, Some(ordinal)) => {
            if let Err(why) = probe_hmem(provider.as_deref()) {
                return Err(fail(format!(
                    "the GPU heap cannot be served over ofi: {why}{}",
                    crate::agree::staging_hint(setup.config.allow_host_staging)
                )));
            }
            ordinal
        }
        (false, None) => return Err(fail("a GPU heap without its CUDA device".into())),
    };
    let prov = provider
        .as_deref()
        .map(|p| {
            CString::new(p).map_err(|_| {
                fail(format!(
                    "{}={p:?} contains a NUL byte",
                    crate::config::var::OFI_PROVIDER
                ))
            })
        })
        .transpose()?;
    let domain = place(
        me,
        provider.as_deref().unwrap_or_default(),
        cuda_device >= 0,
        near,
        near_rank,
        setup.config.ofi_domain.as_deref(),
    )
    .map_err(fail)?;
    let text = |what: &str, s: &str| {
        CString::new(s).map_err(|_| fail(format!("{what} {s:?} contains a NUL byte")))
    };
    let (domain_name, fabric_name) = (
        text("domain", &domain.name)?,
        text("fabric", &domain.fabric)?,
    );
    let mut bounce = Bounce::new();
    let mut attrs = ffi::Attrs::default();
    let mut ep = std::ptr::null_mut();
    let mut err = [0 as c_char; 512];
    let heap_key = super::auth::random_heap_key()?;
    // SAFETY: the heap and bounce buffer stay allocated while the endpoint is open (the
    // heap until shutdown, which closes it first); valid out-parameters.
    let rc = unsafe {
        ffi::symmem_ofi_open(
            prov.as_ref().map_or(std::ptr::null(), |p| p.as_ptr()),
            domain_name.as_ptr(),
            fabric_name.as_ptr(),
            setup.heap.base as *mut c_void,
            setup.heap.len,
            cuda_device,
            bounce.0.as_mut_ptr().cast(),
            bounce.0.len() * 16,
            SLOT_BYTES,
            c_int::from(!polls),
            heap_key,
            &mut ep,
            &mut attrs,
            err.as_mut_ptr(),
            err.len(),
        )
    };
    if rc != 0 {
        let offered = providers().unwrap_or_else(|e| e);
        let asked = provider
            .as_deref()
            .map_or("any provider".to_string(), |p| format!("provider {p:?}"));
        return Err(fail(if rc == ffi::ENODATA {
            format!("libfabric has no {asked} with RDM endpoints, RMA and atomics here; fi_getinfo offers: {}", if offered.is_empty() { "none" } else { &offered })
        } else {
            format!(
                "opening {asked}: {} (fi_getinfo offers: {offered})",
                ffi::text(&err)
            )
        }));
    }
    let ep = Endpoint(ep);
    crate::ofi::assume::assume_order(&mut attrs, setup.config.ofi_assume_order, me);
    let mut name = vec![0u8; MAX_ADDRESS];
    let mut len = name.len();
    // SAFETY: an open endpoint; a buffer of `len` bytes.
    let rc = unsafe { ffi::symmem_ofi_name(ep.0, name.as_mut_ptr().cast(), &mut len) };
    if rc != 0 {
        return Err(fail(format!("fi_getname failed ({rc})")));
    }
    name.truncate(len);
    let takes_messages = wants_messages(&attrs, setup.heap.host);
    if takes_messages {
        for i in 0..RECV_SLOTS {
            let rc = post_receive(&ep, &mut bounce, i);
            if rc != 0 {
                return Err(fail(format!(
                    "posting receive buffer {i} of {RECV_SLOTS} failed: error {}",
                    -rc
                )));
            }
        }
    }
    let heap_base = if attrs.mr_mode & ffi::FI_MR_VIRT_ADDR != 0 {
        setup.heap.base
    } else {
        0
    };
    Ok(Opened {
        ep,
        bounce,
        attrs,
        name,
        heap_base,
        takes_messages,
    })
}

#[cfg(test)]
mod tests {
    /// The shim closes each libfabric object before what it is bound to: memory regions
    /// (bound to the endpoint under `FI_MR_ENDPOINT`, whose providers refuse to close an
    /// endpoint that still has them), the endpoint, the address vector, CQ and counters
    /// it was bound to, the domain, the fabric; and it closes every object it holds.
    #[test]
    fn the_shim_closes_memory_regions_then_the_endpoint_then_what_it_was_bound_to() {
        let shim = include_str!("../shim.c");
        let rank = |kind: &str| match kind {
            "fid_mr" => 0,
            "fid_ep" => 1,
            "fid_av" | "fid_cq" | "fid_cntr" => 2,
            "fid_domain" => 3,
            "fid_fabric" => 4,
            other => panic!("the shim holds a {other}: say when it closes"),
        };
        let held = shim
            .split("struct symmem_ofi {")
            .nth(1)
            .and_then(|rest| rest.split("};").next())
            .expect("the shim's struct symmem_ofi");
        // Every `struct fid_* *name;` field: (name, rank of its kind).
        let fields: Vec<(&str, u32)> = held
            .lines()
            .filter_map(|line| {
                let line = line.trim().strip_prefix("struct fid_")?;
                let (kind, name) = line.split_once(" *")?;
                Some((name.trim_end_matches(';'), rank(&format!("fid_{kind}"))))
            })
            .collect();
        assert!(fields.len() >= 7, "{fields:?}");
        let close = shim
            .split("void symmem_ofi_close(struct symmem_ofi *o)")
            .nth(1)
            .and_then(|rest| rest.split("\n}\n").next())
            .expect("the shim's symmem_ofi_close");
        let closed: Vec<&str> = close
            .split("fi_close(&o->")
            .skip(1)
            .filter_map(|rest| rest.split("->fid)").next())
            .collect();
        let ranks: Vec<u32> = closed
            .iter()
            .map(|name| {
                fields
                    .iter()
                    .find(|(field, _)| field == name)
                    .unwrap_or_else(|| panic!("closes {name}, which the shim does not hold"))
                    .1
            })
            .collect();
        assert!(
            ranks.windows(2).all(|w| w[0] <= w[1]),
            "closed in the order {closed:?}; each object must close before what it is bound to (MRs, endpoint, AV/CQ/counters, domain, fabric)"
        );
        let mut names: Vec<&str> = closed.clone();
        names.sort_unstable();
        let mut expected: Vec<&str> = fields.iter().map(|(name, _)| *name).collect();
        expected.sort_unstable();
        assert_eq!(names, expected, "every object closed once");
    }
}
