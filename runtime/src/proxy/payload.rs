//! Where the payload of a device request lives, and how the proxy thread moves it.
//!
//! A put's source and a get's destination are the request's `local` address on the
//! issuing PE. On a CPU PE that is host memory of this process, which the transport reads
//! and writes in place ([`Payloads::Host`]). On a GPU PE it is GPU memory, which the host
//! cannot dereference: the payload goes through a bounded, pinned staging buffer in
//! chunks of at most the buffer's length ([`Payloads::Device`], [`Staging`]):
//!
//! - put: for each chunk, copy GPU → staging (complete on return), then submit a put of
//!   the chunk from the staging buffer. A transport's `submit` returns once the source may
//!   be reused, so the next chunk can overwrite the buffer.
//! - put_signal: the same; every chunk but the last is a plain put and the last one
//!   carries the signal. The transport applies one PE's requests to one target in order,
//!   so the signal still follows all of the data.
//! - get: for each chunk, submit a get into the staging buffer, then copy staging → GPU
//!   (complete on return), so the data is in GPU memory before the request completes.
//!
//! Inline `p`/`g` (`local == 0`) carry their value in the request and need no staging.

use symmem_device::{Opcode, Request};

use crate::error::Error;
use symmem_transport::{Io, Pending, Transport};

/// Bytes of a GPU PE's staging buffer: the largest chunk of a device put or get that the
/// proxy thread moves at once. Larger transfers go in several chunks, in order. 1 MiB
/// amortizes the copy's fixed cost (some µs per copy) over enough bytes that the copy
/// runs near PCIe bandwidth, and costs one pinned MiB per GPU PE.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))] // GPU PEs need the cuda feature
pub(crate) const STAGING_BYTES: usize = 1 << 20;

/// A bounded host buffer and copies between it and GPU memory. Each copy is complete when
/// it returns.
pub(crate) trait Staging: Send {
    /// The staging buffer; its length (not 0) is the chunk size.
    fn buffer(&mut self) -> &mut [u8];
    /// Copies `len` bytes from GPU address `src` to the start of the buffer.
    fn fetch(&mut self, src: u64, len: usize) -> Result<(), Error>;
    /// Copies the first `len` bytes of the buffer to GPU address `dst`, visible to the
    /// GPU's threads on return.
    fn store(&mut self, dst: u64, len: usize) -> Result<(), Error>;
}

/// Where the `local` payloads of this PE's device requests live.
pub(crate) enum Payloads {
    /// Host memory of this process (CPU PEs): read and written in place.
    Host,
    /// GPU memory (GPU PEs): staged in chunks through a pinned host buffer.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))] // GPU PEs need the cuda feature
    Device(Box<dyn Staging>),
}

/// Why issuing a request failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The transport failed.
    Transport(Error),
    /// Moving the payload between GPU memory and the staging buffer failed.
    Staging {
        /// Which copy: direction, chunk and addresses.
        what: String,
        /// The driver's error.
        error: Error,
    },
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Transport(e)
    }
}

impl From<symmem_transport::Error> for Failure {
    fn from(e: symmem_transport::Error) -> Self {
        Failure::Transport(e.into())
    }
}

impl Payloads {
    /// Issues a put or put_signal whose source is at `req.local` (not 0).
    pub(crate) fn put(&mut self, transport: &dyn Transport, req: &Request) -> Result<(), Failure> {
        let len = req.len as usize;
        let staging = match self {
            Payloads::Host => {
                // SAFETY: the device operation guarantees `local` holds `len` readable
                // bytes until the request completes (blocking) or the next quiet (nbi).
                let src = unsafe { std::slice::from_raw_parts(req.local as *const u8, len) };
                transport.submit(req, Io::Src(src))?;
                return Ok(());
            }
            Payloads::Device(s) => s,
        };
        let chunk = staging.buffer().len();
        let mut off = 0;
        loop {
            let n = (len - off).min(chunk);
            let last = off + n == len;
            let src = req.local + off as u64;
            if n > 0 {
                staging.fetch(src, n).map_err(|error| Failure::Staging {
                    what: format!(
                        "copying bytes {off}..{} from GPU address {src:#x} to the staging buffer",
                        off + n
                    ),
                    error,
                })?;
            }
            let part = if last && req.opcode == Opcode::PutSignal as u8 {
                Request {
                    len: n as u64,
                    remote: req.remote + off as u64,
                    local: src,
                    ..*req
                }
            } else {
                Request {
                    tag: req.tag,
                    ..Request::put(req.pe, req.remote + off as u64, src, n as u64)
                }
            };
            transport.submit(&part, Io::Src(&staging.buffer()[..n]))?;
            off += n;
            if last {
                return Ok(());
            }
        }
    }

    /// Issues a get whose destination is at `req.local` (not 0). Into host memory it may
    /// be left pending ([`Transport::submit_nowait`]; the reply's bytes then go to
    /// `req.local` when it is collected); staged through GPU memory it completes here,
    /// chunk by chunk, since the staging buffer is reused.
    pub(crate) fn get(
        &mut self,
        transport: &dyn Transport,
        req: &Request,
    ) -> Result<Pending, Failure> {
        let len = req.len as usize;
        let staging = match self {
            Payloads::Host => {
                // SAFETY: the device operation guarantees `local` holds `len` writable
                // bytes that nothing else accesses until the request completes.
                let dst = unsafe { std::slice::from_raw_parts_mut(req.local as *mut u8, len) };
                return Ok(transport.submit_nowait(req, Io::Dst(dst))?);
            }
            Payloads::Device(s) => s,
        };
        let chunk = staging.buffer().len();
        let mut off = 0;
        while off < len {
            let n = (len - off).min(chunk);
            let dst = req.local + off as u64;
            let part = Request {
                tag: req.tag,
                ..Request::get(req.pe, dst, req.remote + off as u64, n as u64)
            };
            transport.submit(&part, Io::Dst(&mut staging.buffer()[..n]))?;
            staging.store(dst, n).map_err(|error| Failure::Staging {
                what: format!(
                    "copying bytes {off}..{} from the staging buffer to GPU address {dst:#x}",
                    off + n
                ),
                error,
            })?;
            off += n;
        }
        Ok(Pending::Done(0))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    //! The staging logic with a fake GPU (a byte array at a fake address) and a fake
    //! transport that records what it is given.

    use std::collections::HashSet;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use symmem_device::SignalOp;

    use super::*;
    use crate::error::Result;
    use symmem_transport::InFlight;

    /// The fake GPU memory's address.
    pub(crate) const GPU_BASE: u64 = 0x7f00_0000_0000;

    /// A fake GPU: `memory` at [`GPU_BASE`], staged through a buffer of `chunk` bytes;
    /// `log` records each copy; `fail_at`: the copy (counted from 0) that fails.
    pub(crate) struct FakeGpu {
        pub(crate) memory: Arc<Mutex<Vec<u8>>>,
        pub(crate) buffer: Vec<u8>,
        pub(crate) log: Arc<Mutex<Vec<String>>>,
        pub(crate) fail_at: Option<usize>,
        copies: usize,
    }

    impl FakeGpu {
        pub(crate) fn new(bytes: usize, chunk: usize) -> Self {
            FakeGpu {
                memory: Arc::new(Mutex::new((0..bytes).map(|i| i as u8).collect())),
                buffer: vec![0; chunk],
                log: Default::default(),
                fail_at: None,
                copies: 0,
            }
        }

        fn range(&self, at: u64, len: usize) -> std::ops::Range<usize> {
            let start = (at - GPU_BASE) as usize;
            start..start + len
        }

        fn count(&mut self) -> Result<()> {
            self.copies += 1;
            if self.fail_at == Some(self.copies - 1) {
                return Err(Error::Cuda {
                    call: "cuMemcpyAsync (fake)".into(),
                    pe: 0,
                    name: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
                    code: 700,
                    detail: String::new(),
                });
            }
            Ok(())
        }
    }

    impl Staging for FakeGpu {
        fn buffer(&mut self) -> &mut [u8] {
            &mut self.buffer
        }

        fn fetch(&mut self, src: u64, len: usize) -> Result<()> {
            self.count()?;
            let r = self.range(src, len);
            self.buffer[..len].copy_from_slice(&self.memory.lock().unwrap()[r]);
            self.log.lock().unwrap().push(format!("fetch {len}"));
            Ok(())
        }

        fn store(&mut self, dst: u64, len: usize) -> Result<()> {
            self.count()?;
            let r = self.range(dst, len);
            self.memory.lock().unwrap()[r].copy_from_slice(&self.buffer[..len]);
            self.log.lock().unwrap().push(format!("store {len}"));
            Ok(())
        }
    }

    /// A fake transport: records each request with its payload; a get's destination is
    /// filled with `remote offset + i` (mod 256), a fetching AMO returns `value + 1`;
    /// `fail_at`: the submit that fails. With `held`, it models round trips in flight:
    /// `submit_nowait` of a fetching AMO or a get leaves the reply pending until the test
    /// releases it ([`Held`]).
    #[derive(Default)]
    pub(crate) struct FakeTransport {
        pub(crate) sent: Mutex<Vec<(Request, Vec<u8>)>>,
        pub(crate) fail_at: Option<usize>,
        pub(crate) held: Option<Arc<Held>>,
        /// `quiet` calls so far.
        pub(crate) quiets: AtomicUsize,
    }

    /// Pending replies of a [`FakeTransport`], numbered from 0 in the order they were
    /// sent: each completes once released, or fails (as a dead peer's would) once failed.
    #[derive(Default)]
    pub(crate) struct Held {
        /// Replies handed out so far.
        pub(crate) sent: AtomicUsize,
        released: Mutex<HashSet<usize>>,
        failed: Mutex<HashSet<usize>>,
    }

    impl Held {
        /// Lets reply `i` complete.
        pub(crate) fn release(&self, i: usize) {
            self.released.lock().unwrap().insert(i);
        }

        /// Makes reply `i` fail, as if its peer's connection had closed.
        pub(crate) fn fail(&self, i: usize) {
            self.failed.lock().unwrap().insert(i);
        }
    }

    /// A held reply: number `index`, to `req`.
    struct HeldReply {
        held: Arc<Held>,
        index: usize,
        req: Request,
    }

    impl InFlight for HeldReply {
        fn poll(&mut self, dst: &mut [u8]) -> symmem_transport::Result<Option<u64>> {
            if self.held.failed.lock().unwrap().contains(&self.index) {
                return Err(symmem_transport::Error::Transport {
                    transport: "fake",
                    op: "reply",
                    me: 0,
                    pe: self.req.pe as usize,
                    detail: format!(
                        "connection to PE {} closed (the peer exited or crashed)",
                        self.req.pe
                    ),
                });
            }
            if !self.held.released.lock().unwrap().contains(&self.index) {
                return Ok(None);
            }
            let get = self.req.opcode == Opcode::Get as u8;
            let want = if get { self.req.len } else { 0 };
            assert_eq!(dst.len() as u64, want, "the reply's destination");
            fill(&self.req, dst);
            Ok(Some(if self.req.opcode == Opcode::Amo as u8 {
                self.req.value.wrapping_add(1)
            } else {
                0
            }))
        }
    }

    /// A get's bytes: `remote offset + i` (mod 256).
    fn fill(req: &Request, dst: &mut [u8]) {
        for (i, b) in dst.iter_mut().enumerate() {
            *b = (req.remote as usize + i) as u8;
        }
    }

    impl Transport for FakeTransport {
        fn name(&self) -> &'static str {
            "fake"
        }

        fn submit(&self, req: &Request, io: Io<'_>) -> symmem_transport::Result<u64> {
            let mut sent = self.sent.lock().unwrap();
            if self.fail_at == Some(sent.len()) {
                return Err(symmem_transport::Error::Transport {
                    transport: "fake",
                    op: "submit",
                    me: 0,
                    pe: req.pe as usize,
                    detail: "connection reset".into(),
                });
            }
            let payload = match io {
                Io::None => Vec::new(),
                Io::Src(s) => s.to_vec(),
                Io::Dst(d) => {
                    fill(req, d);
                    d.to_vec()
                }
            };
            sent.push((*req, payload));
            Ok(req.value.wrapping_add(1))
        }

        fn submit_nowait(&self, req: &Request, io: Io<'_>) -> symmem_transport::Result<Pending> {
            match &self.held {
                Some(held) if req.returns_data() => {
                    self.sent.lock().unwrap().push((*req, Vec::new()));
                    let index = held.sent.fetch_add(1, Ordering::AcqRel);
                    Ok(Pending::Reply(Box::new(HeldReply {
                        held: held.clone(),
                        index,
                        req: *req,
                    })))
                }
                _ => self.submit(req, io).map(Pending::Done),
            }
        }

        fn fence(&self) -> symmem_transport::Result<()> {
            Ok(())
        }

        fn quiet(&self) -> symmem_transport::Result<()> {
            self.quiets.fetch_add(1, Ordering::AcqRel);
            Ok(())
        }

        fn progress(&self) -> symmem_transport::Result<()> {
            Ok(())
        }

        fn shutdown(&self) {}
    }

    fn gpu_payloads(gpu: FakeGpu) -> Payloads {
        Payloads::Device(Box::new(gpu))
    }

    /// A put of 13 bytes through a 5-byte buffer: three chunks, in order, each fetched
    /// before it is sent, with the right offsets and bytes.
    #[test]
    fn put_goes_in_chunks_in_order() {
        let gpu = FakeGpu::new(64, 5);
        let log = gpu.log.clone();
        let t = FakeTransport::default();
        let mut req = Request::put(3, 1000, GPU_BASE + 10, 13);
        req.tag = 42;
        gpu_payloads(gpu).put(&t, &req).unwrap();
        let sent = t.sent.lock().unwrap();
        let got: Vec<(u8, u64, u64, u64, u64)> = sent
            .iter()
            .map(|(r, _)| (r.opcode, r.remote, r.local, r.len, r.tag))
            .collect();
        let put = Opcode::Put as u8;
        assert_eq!(
            got,
            [
                (put, 1000, GPU_BASE + 10, 5, 42),
                (put, 1005, GPU_BASE + 15, 5, 42),
                (put, 1010, GPU_BASE + 20, 3, 42),
            ]
        );
        let bytes: Vec<u8> = sent.iter().flat_map(|(_, p)| p.clone()).collect();
        assert_eq!(bytes, (10..23).collect::<Vec<u8>>());
        assert_eq!(*log.lock().unwrap(), ["fetch 5", "fetch 5", "fetch 3"]);
    }

    /// A chunked put_signal: plain puts first, the signal rides on the last chunk only,
    /// so it follows all of the data on the transport's ordered path.
    #[test]
    fn put_signal_sends_the_signal_with_the_last_chunk() {
        let t = FakeTransport::default();
        let req = Request::put_signal(1, 64, GPU_BASE, 12, 8, SignalOp::Add, 7);
        gpu_payloads(FakeGpu::new(16, 4)).put(&t, &req).unwrap();
        let sent = t.sent.lock().unwrap();
        assert_eq!(sent.len(), 3);
        for (r, _) in &sent[..2] {
            assert_eq!((r.opcode, r.signal, r.value), (Opcode::Put as u8, 0, 0));
        }
        let (last, bytes) = &sent[2];
        assert_eq!(last.opcode, Opcode::PutSignal as u8);
        assert_eq!((last.remote, last.len, last.signal), (72, 4, 8));
        assert_eq!((last.signal_op, last.value), (SignalOp::Add as u8, 7));
        assert_eq!(bytes, &[8, 9, 10, 11]);
    }

    /// A put_signal of no bytes still sends its signal, and copies nothing.
    #[test]
    fn empty_put_signal_still_signals() {
        let gpu = FakeGpu::new(16, 4);
        let log = gpu.log.clone();
        let t = FakeTransport::default();
        let req = Request::put_signal(1, 64, GPU_BASE, 0, 8, SignalOp::Set, 1);
        gpu_payloads(gpu).put(&t, &req).unwrap();
        let sent = t.sent.lock().unwrap();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].0.opcode, Opcode::PutSignal as u8);
        assert!(log.lock().unwrap().is_empty());
    }

    /// A get of 10 bytes through a 4-byte buffer: each chunk is received, then stored to
    /// GPU memory at its place.
    #[test]
    fn get_goes_in_chunks_and_lands_in_gpu_memory() {
        let gpu = FakeGpu::new(32, 4);
        let (memory, log) = (gpu.memory.clone(), gpu.log.clone());
        let t = FakeTransport::default();
        gpu_payloads(gpu)
            .get(&t, &Request::get(2, GPU_BASE + 3, 100, 10))
            .unwrap();
        let mem = memory.lock().unwrap();
        assert_eq!(&mem[3..13], (100..110).collect::<Vec<u8>>().as_slice());
        assert_eq!((mem[2], mem[13]), (2, 13), "bytes around the get untouched");
        assert_eq!(*log.lock().unwrap(), ["store 4", "store 4", "store 2"]);
        let remotes: Vec<u64> = t
            .sent
            .lock()
            .unwrap()
            .iter()
            .map(|(r, _)| r.remote)
            .collect();
        assert_eq!(remotes, [100, 104, 108]);
    }

    /// A failed copy stops the request: nothing more is sent, and the failure says which
    /// bytes and which address.
    #[test]
    fn a_failed_copy_stops_the_transfer_and_names_the_bytes() {
        let mut gpu = FakeGpu::new(64, 8);
        gpu.fail_at = Some(1);
        let t = FakeTransport::default();
        let err = gpu_payloads(gpu)
            .put(&t, &Request::put(1, 0, GPU_BASE, 20))
            .unwrap_err();
        assert_eq!(t.sent.lock().unwrap().len(), 1);
        match err {
            Failure::Staging { what, error } => {
                assert!(what.contains("bytes 8..16"), "{what}");
                assert!(what.contains(&format!("{:#x}", GPU_BASE + 8)), "{what}");
                assert!(error.to_string().contains("ILLEGAL_ADDRESS"), "{error}");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    /// A failed submit stops a chunked put: later chunks are not fetched or sent.
    #[test]
    fn a_failed_submit_stops_the_transfer() {
        let gpu = FakeGpu::new(64, 8);
        let log = gpu.log.clone();
        let t = FakeTransport {
            fail_at: Some(1),
            ..Default::default()
        };
        let err = gpu_payloads(gpu)
            .put(&t, &Request::put(1, 0, GPU_BASE, 30))
            .unwrap_err();
        assert!(matches!(err, Failure::Transport(_)), "{err:?}");
        assert_eq!(*log.lock().unwrap(), ["fetch 8", "fetch 8"]);
    }

    /// Host payloads go to the transport in place, whole.
    #[test]
    fn host_payloads_are_not_chunked() {
        let src: Vec<u8> = (0..100).collect();
        let t = FakeTransport::default();
        Payloads::Host
            .put(&t, &Request::put(1, 0, src.as_ptr() as u64, 100))
            .unwrap();
        let mut dst = vec![0u8; 50];
        Payloads::Host
            .get(&t, &Request::get(1, dst.as_mut_ptr() as u64, 7, 50))
            .unwrap();
        let sent = t.sent.lock().unwrap();
        assert_eq!(sent.len(), 2);
        assert_eq!(sent[0].1, src);
        assert_eq!(dst, (7..57).collect::<Vec<u8>>());
    }
}
