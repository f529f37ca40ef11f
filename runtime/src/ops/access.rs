//! Every host operation's access to a PE's heap: the transport-independent checks (PE,
//! allocation, bounds), then the route (`route.rs`) that reaches the target.

use crate::counters::Op;
use crate::error::{Error, Result};
use crate::route::{Located, PeRoute, Route, RoutePath, Word};
use crate::runtime::Runtime;
use crate::sym::SymRef;
use symmem_device::{AmoKind, Request};
use symmem_transport::int::SymInt;
use symmem_transport::Io;

impl Runtime {
    /// How this PE reaches `pe`'s heap, and why, as chosen at init.
    pub fn route_to(&self, pe: usize) -> Result<PeRoute> {
        self.check_pe("route_to", pe)?;
        let me = self.my_pe();
        let same_node = self.topo.node(pe) == self.topo.node(me);
        let weak = self.config.ordering == crate::config::MemoryOrdering::Weak
            && pe != me
            && self.transport.is_some();
        let nodes = if same_node {
            "same node"
        } else {
            "different nodes"
        };
        let mapped = self.heap.base(pe).is_some();
        let (path, why) = match self.routes[pe] {
            _ if pe == me => (RoutePath::Own, "this PE".to_string()),
            Route::Remote if weak && mapped => (
                RoutePath::Direct,
                format!("{nodes}, heap mapped; SYMMEM_ORDERING=weak routes it through the weak-ordering transport"),
            ),
            Route::Direct(_) => (RoutePath::Direct, format!("{nodes}, heap mapped (P2P)")),
            #[cfg(feature = "cuda")]
            Route::Copy(_) => (
                RoutePath::CudaCopy,
                format!("{nodes}, GPU heap mapped into this PE's CUDA context"),
            ),
            Route::Remote => {
                let unmapped = if !same_node {
                    nodes.to_string()
                } else if self.config.disable_p2p {
                    "same node, but SYMMEM_DISABLE_P2P=1".to_string()
                } else {
                    "same node, but its heap cannot be mapped here (GPU not peer-accessible)"
                        .to_string()
                };
                match &self.remote_choice {
                    Some(c) => (RoutePath::Transport(c.name), format!("{unmapped}; {}", c.why)),
                    None => (RoutePath::Unreachable, format!("{unmapped}; no remote transport")),
                }
            }
            Route::Unreachable => (
                RoutePath::Unreachable,
                format!("{nodes}, heap not mapped and no remote transport"),
            ),
        };
        Ok(PeRoute { path, weak, why })
    }

    /// What decided this PE's node identity ([`Self::node_of`]): `SYMMEM_NODE_ID`, or the
    /// machine identity with the launcher's node where it tells one, and
    /// `SYMMEM_SIMULATE_NODES` when it splits the job.
    pub fn node_identity_source(&self) -> String {
        let source = self
            .config
            .node_identity_source(self.topo.launcher(self.my_pe()));
        match self.config.simulate_nodes {
            1 => source,
            k => format!("{source}; split into {k} simulated nodes (SYMMEM_SIMULATE_NODES={k})"),
        }
    }
}

impl Runtime {
    /// The address of `count` elements from `r` on `pe` by whatever route reaches it,
    /// after every check.
    #[inline(always)]
    pub(crate) fn locate<T>(
        &self,
        op: &'static str,
        r: SymRef<'_, T>,
        count: usize,
        pe: usize,
    ) -> Result<Located<T>> {
        let buf = r.buf;
        self.check_buf(op, buf)?;
        if pe >= self.n_pes() {
            return Err(self.invalid_pe_access(op, pe, buf, r.index, count));
        }
        if r.index.checked_add(count).is_none_or(|end| end > buf.len) {
            return Err(self.out_of_bounds(op, buf, pe, r.index, count));
        }
        let at = buf.offset + r.index * std::mem::size_of::<T>();
        match self.routes[pe] {
            // SAFETY: offset + (index + count) * size_of::<T>() lies within the
            // allocation, which lies within the mapped heap.
            Route::Direct(base) => Ok(Located::Host(unsafe { base.add(at) }.cast())),
            #[cfg(feature = "cuda")]
            Route::Copy(base) => Ok(Located::Device(base + at as u64)),
            Route::Remote => Ok(Located::Remote { pe, off: at as u64 }),
            Route::Unreachable => Err(self.unreachable(op, pe)),
        }
    }

    /// Like [`Self::locate`], for operations that need host loads, stores or atomics on
    /// the target (atomics, signals, waits, local views).
    #[inline(always)]
    pub(crate) fn target<T>(
        &self,
        op: &'static str,
        r: SymRef<'_, T>,
        count: usize,
        pe: usize,
    ) -> Result<*mut T> {
        match self.locate(op, r, count, pe)? {
            Located::Host(p) => Ok(p),
            #[cfg(feature = "cuda")]
            Located::Device(_) => Err(self.not_host_accessible(op, pe)),
            Located::Remote { .. } => Err(self.unreachable(op, pe)),
        }
    }

    /// The remote transport; only called for PEs whose route is [`Route::Remote`], which
    /// exists only with a transport.
    pub(crate) fn remote(&self) -> &dyn symmem_transport::Transport {
        self.transport
            .as_deref()
            .expect("a remote route implies a transport")
    }

    /// The error for a host-side atomic, wait or view on a GPU heap.
    #[cfg(feature = "cuda")]
    #[cold]
    #[inline(never)]
    pub(crate) fn not_host_accessible(&self, op: &'static str, pe: usize) -> Error {
        Error::Unsupported {
            op,
            pe,
            reason: format!(
                "PE {pe}'s heap is GPU memory, which host code reaches only by copies: put, get, p, g, putmem, getmem, iput, iget, read_local and calloc work from the host; atomics, signals, waits and local views of GPU heaps are done by device operations in a kernel (host-side forms on GPU PEs are not implemented yet)"
            ),
        }
    }

    /// The error for a PE with no route. Cold and out of line, so that `locate` stays
    /// small enough to inline into every operation.
    #[cold]
    #[inline(never)]
    pub(crate) fn unreachable(&self, op: &'static str, pe: usize) -> Error {
        Error::Unreachable {
            op,
            pe,
            node: self.topo.node(pe).to_string(),
            me: self.my_pe(),
            my_node: self.topo.node(self.my_pe()).to_string(),
        }
    }

    /// Writes `len` bytes from `src` to a located destination.
    ///
    /// # Safety
    /// `src` is valid for `len` bytes and does not overlap the destination; `dst` was
    /// located for at least `len` bytes.
    #[inline(always)]
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))] // op names copy-route errors
    pub(crate) unsafe fn write_located(
        &self,
        op: &'static str,
        dst: Located<u8>,
        src: *const u8,
        len: usize,
    ) -> Result<()> {
        match dst {
            Located::Host(p) => {
                // SAFETY: forwarded from the caller.
                unsafe { self.host_copy.copy(p, src, len) };
                self.counters.direct(Op::Put, len);
            }
            #[cfg(feature = "cuda")]
            Located::Device(a) => {
                // SAFETY: forwarded from the caller; the copy route's addresses are mapped
                // in this PE's context.
                unsafe { self.gpu(op)?.copy_to_device(op, a, src, len)? };
                self.counters.direct(Op::Put, len);
            }
            Located::Remote { pe, off } => {
                // SAFETY: forwarded from the caller.
                let data = unsafe { std::slice::from_raw_parts(src, len) };
                let req = Request::put(pe as u32, off, 0, len as u64);
                self.remote().submit(&req, Io::Src(data))?;
            }
        }
        Ok(())
    }

    /// Reads `len` bytes from a located source into `dst`.
    ///
    /// # Safety
    /// `dst` is valid for `len` bytes of writes and does not overlap the source; `src`
    /// was located for at least `len` bytes.
    #[inline(always)]
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))] // op names copy-route errors
    pub(crate) unsafe fn read_located(
        &self,
        op: &'static str,
        src: Located<u8>,
        dst: *mut u8,
        len: usize,
    ) -> Result<()> {
        match src {
            Located::Host(p) => {
                // SAFETY: forwarded from the caller.
                unsafe { self.host_copy.copy(dst, p.cast_const(), len) };
                self.counters.direct(Op::Get, len);
            }
            #[cfg(feature = "cuda")]
            Located::Device(a) => {
                // SAFETY: as in `write_located`.
                unsafe { self.gpu(op)?.copy_from_device(op, dst, a, len)? };
                self.counters.direct(Op::Get, len);
            }
            Located::Remote { pe, off } => {
                // SAFETY: forwarded from the caller.
                let out = unsafe { std::slice::from_raw_parts_mut(dst, len) };
                let req = Request::get(pe as u32, 0, off, len as u64);
                self.remote().submit(&req, Io::Dst(out))?;
            }
        }
        Ok(())
    }
}

impl Runtime {
    /// The word at `r` on `pe`, after every check.
    #[inline(always)]
    pub(crate) fn word<T: SymInt>(
        &self,
        op: &'static str,
        r: SymRef<'_, T>,
        pe: usize,
    ) -> Result<Word<'_, T>> {
        match self.locate(op, r, 1, pe)? {
            // SAFETY: in bounds, aligned (typed handle, aligned allocation), mapped while
            // `self` lives; words are only accessed atomically.
            Located::Host(p) => Ok(Word::Host(unsafe { T::atomic(p) })),
            #[cfg(feature = "cuda")]
            Located::Device(addr) => Ok(Word::Device {
                addr,
                sym: self.sym_addr(r),
            }),
            Located::Remote { pe, off } => Ok(Word::Remote { pe, off }),
        }
    }

    /// Reads a word with Acquire semantics (on a GPU heap: a device-to-host copy, ordered
    /// after every earlier GPU write that the copy engine can see).
    #[inline(always)]
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))] // op names copy errors
    pub(crate) fn load_word<T: SymInt>(&self, op: &'static str, w: &Word<'_, T>) -> Result<T> {
        match w {
            Word::Host(a) => Ok(T::load(a, std::sync::atomic::Ordering::Acquire)),
            #[cfg(feature = "cuda")]
            Word::Device { addr, .. } => self.gpu_read::<T>(op, *addr),
            Word::Remote { pe, off } => {
                let width = std::mem::size_of::<T>() as u8;
                // `result` nonzero: the fetched value is wanted back.
                let req = Request::amo(*pe as u32, AmoKind::Fetch, width, *off, 0, 0, 1);
                Ok(T::from_bits(self.remote().submit(&req, Io::None)?))
            }
        }
    }
}
