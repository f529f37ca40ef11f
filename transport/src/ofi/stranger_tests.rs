//! A stranger, an endpoint of its own outside the job opened through the shim on
//! `tcp;ofi_rxm`, sends forged messages to a PE's endpoint: each is dropped, counted and
//! logged, and the PE's heap is unchanged.

use std::ffi::CString;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use symmem_bootstrap::auth::JobKey;
use symmem_bootstrap::single::SingleBootstrap;
use symmem_device::SignalOp;

use super::protocol::auth::{Sealer, KEY_LABEL};
use super::protocol::exchange::MAX_ADDRESS;
use super::protocol::messages::{encode_ack, encode_signal, Signal, HEADER};
use super::*;
use crate::config::TransportConfig;
use crate::interface::{HeapRegion, OpCounter};

const PROVIDER: &str = "tcp;ofi_rxm";

/// What the PE under test logs.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl Write for Log {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// An endpoint outside the job: opened on `PROVIDER` through the shim, with `target`
/// (a PE's endpoint address) as its only peer.
struct Stranger {
    ep: Endpoint,
    _heap: Box<[u128]>,
    _bounce: Bounce,
}

impl Stranger {
    fn new(target: &[u8]) -> Self {
        let prov = CString::new(PROVIDER).unwrap();
        let mut heap = vec![0u128; 256].into_boxed_slice();
        let mut bounce = Bounce::new();
        let mut attrs = ffi::Attrs::default();
        let mut ep = std::ptr::null_mut();
        let mut err = [0 as c_char; 512];
        // SAFETY: the buffers outlive the endpoint (fields dropped after `ep`); valid
        // out-parameters.
        let rc = unsafe {
            ffi::symmem_ofi_open(
                prov.as_ptr(),
                std::ptr::null(),
                std::ptr::null(),
                heap.as_mut_ptr().cast(),
                heap.len() * 16,
                -1,
                bounce.0.as_mut_ptr().cast(),
                bounce.0.len() * 16,
                SLOT_BYTES,
                0,
                7,
                &mut ep,
                &mut attrs,
                err.as_mut_ptr(),
                err.len(),
            )
        };
        assert_eq!(rc, 0, "the stranger's endpoint: {}", ffi::text(&err));
        let ep = Endpoint(ep);
        // SAFETY: an open endpoint; one address of `target.len()` bytes.
        let rc = unsafe {
            ffi::symmem_ofi_insert(
                ep.0,
                target.as_ptr().cast(),
                target.len(),
                1,
                err.as_mut_ptr(),
                err.len(),
            )
        };
        assert_eq!(rc, 0, "{}", ffi::text(&err));
        Stranger {
            ep,
            _heap: heap,
            _bounce: bounce,
        }
    }

    /// Sends `msg` to the PE `pe`, driving both endpoints' progress (the connection
    /// needs both) until the provider takes it.
    fn send(&self, pe: &OfiTransport, msg: &[u8]) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            // SAFETY: an open endpoint; `msg` fits the inject size of tcp;ofi_rxm.
            let rc =
                unsafe { ffi::symmem_ofi_inject(self.ep.0, msg.as_ptr().cast(), msg.len(), 0) };
            if rc == 0 {
                return;
            }
            assert_eq!(rc, ffi::EAGAIN, "the stranger's inject");
            assert!(
                Instant::now() < deadline,
                "the stranger's inject stays busy"
            );
            self.progress();
            pe.progress().expect("the PE's progress");
        }
    }

    fn progress(&self) {
        let (mut ops, mut lens, mut sources, mut failed) =
            ([0u64; 64], [0usize; 64], [0u64; 64], 0);
        let mut err = [0 as c_char; 256];
        // SAFETY: an open endpoint; valid out-parameters of 64 entries.
        unsafe {
            ffi::symmem_ofi_completed_from(
                self.ep.0,
                ops.as_mut_ptr(),
                lens.as_mut_ptr(),
                sources.as_mut_ptr(),
                64,
                &mut failed,
                err.as_mut_ptr(),
                err.len(),
            )
        };
    }
}

/// A signal message as PE `from` would send it to PE 0, writing `data` at heap offset 0
/// and adding 1 to the word at 64, sealed with `key` as that pair's message `seq`.
fn forged_signal(key: &JobKey, from: usize, seq: u64, data: &[u8]) -> Vec<u8> {
    let mut msg = vec![0u8; HEADER + data.len()];
    msg[HEADER..].copy_from_slice(data);
    let s = Signal {
        from,
        op: 1,
        data_off: 0,
        data_len: data.len(),
        sig_off: 64,
        value: 1,
        sig_op: SignalOp::Add,
        acked: 0,
    };
    encode_signal(&mut msg, &s);
    Sealer::new(key.hmac_sha256()).seal(&mut msg, 0, seq);
    msg
}

/// A one-PE job over tcp;ofi_rxm (its PE reaches itself through the transport, so its
/// signals come as messages) and a stranger on the same provider. Forged messages from
/// the stranger: a signal under another job's key (claiming PE 0, the only PE of the
/// job), an acknowledgement likewise, and, where the provider names sources, a signal
/// under the job's own key (as a stranger who recorded or learned one would send it),
/// which is refused for coming from outside the job. None is applied, none fails the
/// transport, each is counted, and the first is logged naming the claimed sender and
/// the source. Then, as where the provider names no sources (the PE's check told so), a
/// signal under another job's key is refused by its tag alone.
#[test]
fn a_strangers_messages_are_dropped_and_logged_and_the_heap_is_unchanged() {
    let log = Log::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let mut heap = vec![0u128; 4096].into_boxed_slice();
    let heap_len = heap.len() * 16;
    let bootstrap = SingleBootstrap::new(Duration::from_secs(10));
    let mut config = TransportConfig::unset();
    config.ofi_provider = Some(PROVIDER.into());
    // Only this thread reads the completion queue: the log goes to this thread's
    // subscriber.
    config.ofi_progress = crate::config::OfiProgress::Manual;
    let counter = |_: &'static str| -> Arc<dyn OpCounter> { unreachable!("nothing is counted") };
    let setup = Setup {
        bootstrap: &bootstrap,
        config: &config,
        me: 0,
        remote: &[true],
        heap: HeapRegion {
            base: heap.as_mut_ptr() as u64,
            len: heap_len,
            host: true,
        },
        gpu_ordinal: None,
        gpu_pci_bus_id: None,
        peer_bases: &[0],
        deadline: Instant::now() + Duration::from_secs(10),
        counter: &counter,
        export_gpu_heap: None,
    };
    let pe = OfiTransport::connect(&setup).expect("a one-PE job over tcp;ofi_rxm");
    let (name, sources) = {
        let g = pe.lock();
        let st = g.as_ref().unwrap();
        assert!(st.heap.addr != 0, "tcp;ofi_rxm takes signals as messages");
        let mut name = vec![0u8; MAX_ADDRESS];
        let mut len = name.len();
        // SAFETY: an open endpoint; a buffer of `len` bytes.
        let rc = unsafe { ffi::symmem_ofi_name(st.ep.0, name.as_mut_ptr().cast(), &mut len) };
        assert_eq!(rc, 0);
        name.truncate(len);
        (name, st.auth.describe().contains("FI_SOURCE)"))
    };
    let stranger = Stranger::new(&name);
    let other_job = JobKey::derive(b"another job", "a stranger").subkey(KEY_LABEL);
    stranger.send(&pe, &forged_signal(&other_job, 0, 1, &[0xab; 8]));
    let mut ack = encode_ack(0, 1);
    Sealer::new(other_job.hmac_sha256()).seal(&mut ack, 0, 2);
    stranger.send(&pe, &ack);
    let mut forged = 2;
    if sources {
        let job = driver::auth::transport_key(&bootstrap).unwrap();
        stranger.send(&pe, &forged_signal(&job, 0, 3, &[0xcd; 8]));
        forged += 1;
    }
    let refused = |pe: &OfiTransport| pe.lock().as_ref().unwrap().auth.refusals.total;
    let drive = |pe: &OfiTransport, until: u64| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while refused(pe) < until && Instant::now() < deadline {
            pe.progress()
                .expect("forged messages do not fail the transport");
            stranger.progress();
            std::thread::yield_now();
        }
        assert_eq!(refused(pe), until, "every forged message is refused");
    };
    drive(&pe, forged);
    assert!(heap.iter().all(|&w| w == 0), "the heap is unchanged");
    let line = logged(&log, "dropped a message");
    assert!(
        line.contains("WARN") && line.contains("PE 0: dropped a message claiming PE 0"),
        "{line}"
    );
    assert!(
        line.contains(if sources {
            "outside the job's address vector"
        } else {
            "no FI_SOURCE"
        }),
        "{line}"
    );
    // As on a provider that names no sources: the MAC alone refuses them.
    {
        let mut g = pe.lock();
        let st = g.as_mut().unwrap();
        let key = driver::auth::transport_key(&bootstrap).unwrap();
        st.auth = driver::auth::Auth::new(&key, 0, 1, false);
    }
    std::thread::sleep(protocol::auth::Refusals::EVERY);
    stranger.send(&pe, &forged_signal(&other_job, 0, 4, &[0xef; 8]));
    drive(&pe, 1);
    assert!(heap.iter().all(|&w| w == 0), "the heap is unchanged");
    let line = logged(&log, "whose tag is not the job key's");
    assert!(
        line.contains("claiming PE 0") && line.contains("no FI_SOURCE"),
        "{line}"
    );
    pe.fence().expect("the transport still works");
    assert!(pe.failed_peer().is_none());
    drop(pe);
}

/// The first line of `log` with `what`.
fn logged(log: &Log, what: &str) -> String {
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    text.lines()
        .find(|l| l.contains(what))
        .unwrap_or_else(|| panic!("a line with {what:?} is logged:\n{text}"))
        .to_string()
}
