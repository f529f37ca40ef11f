//! GPU PEs through the CUDA driver API (cudarc, loaded at run time).
//!
//! Nothing here needs CUDA at build time: `libcuda` is opened when a PE starts, after
//! `probe` has checked that it exists (cudarc panics on a missing library otherwise).
//! Every driver error becomes [`Error::Cuda`] naming the call, the PE and the driver's
//! name for the code.

mod copy_stream;
mod kernel_wait;
mod mapped;
mod module;
mod proxy_buffers;
mod remote_target;

use std::ffi::CStr;
use std::sync::Arc;

use cudarc::driver::sys;
use cudarc::driver::CudaContext;
use symmem_device::state::ErrorRecord;

use crate::config::DeviceChoice;
use crate::error::{Error, Result};

pub(crate) use copy_stream::CopyStream;
pub(crate) use kernel_wait::wait_for_kernel;
pub(crate) use mapped::MappedHost;
pub(crate) use module::CudaModule;
pub(crate) use proxy_buffers::proxy_memory;
pub(crate) use remote_target::GpuTarget;

/// Turns a driver result into this crate's error, naming `call` and `pe`.
pub(crate) fn check(rc: sys::CUresult, call: impl FnOnce() -> String, pe: usize) -> Result<()> {
    if rc == sys::CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    Err(cuda_error(rc, call(), pe, String::new()))
}

/// The error for a failed driver call; `detail` starts with a separator or is empty.
pub(crate) fn cuda_error(rc: sys::CUresult, call: String, pe: usize, detail: String) -> Error {
    let mut name: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: cuGetErrorName writes a pointer to a static string or leaves it null.
    let known = unsafe { sys::cuGetErrorName(rc, &mut name) } == sys::CUresult::CUDA_SUCCESS;
    let name = if known && !name.is_null() {
        // SAFETY: a non-null result is a NUL-terminated static string.
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned()
    } else {
        format!("{rc:?}")
    };
    Error::Cuda {
        call,
        pe,
        name,
        code: rc as u32,
        detail,
    }
}

/// Whether the CUDA driver library can be loaded in this process.
pub fn driver_present() -> bool {
    // SAFETY: only tries to open the library; no CUDA call is made.
    unsafe { sys::is_culib_present() }
}

/// Exports PE `pe`'s GPU heap, `len` bytes at device address `base`, as a dma-buf file
/// descriptor (`cuMemGetHandleForAddressRange`), for a NIC to register (GPUDirect RDMA).
/// The range must stay mapped while anything registered through the fd lives.
pub(crate) fn export_dmabuf(pe: usize, base: u64, len: usize) -> Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;

    if !driver_present() {
        return Err(Error::NoGpu {
            op: "dma-buf export",
            pe,
            reason: "the CUDA driver library (libcuda.so) cannot be loaded".into(),
        });
    }
    let mut fd: libc::c_int = -1;
    // SAFETY: the library is present (checked above); `fd` is a valid out-parameter for
    // a dma-buf file descriptor; the range is this PE's mapped GPU heap.
    let rc = unsafe {
        sys::cuMemGetHandleForAddressRange(
            (&mut fd as *mut libc::c_int).cast(),
            base,
            len,
            sys::CUmemRangeHandleType::CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
            0,
        )
    };
    if rc != sys::CUresult::CUDA_SUCCESS || fd < 0 {
        return Err(cuda_error(
            rc,
            "cuMemGetHandleForAddressRange(DMA_BUF_FD)".into(),
            pe,
            String::new(),
        ));
    }
    // SAFETY: the driver returned a new file descriptor that nothing else owns.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// Why no GPU can be used here, or the number of visible GPUs.
pub(crate) fn probe() -> std::result::Result<usize, String> {
    if !driver_present() {
        return Err("the CUDA driver library (libcuda.so) cannot be loaded: no NVIDIA driver on this machine, or it is not on the loader path".into());
    }
    // SAFETY: the library is present (checked above); cuInit may be called any number of
    // times.
    let rc = unsafe { sys::cuInit(0) };
    if rc != sys::CUresult::CUDA_SUCCESS {
        return Err(format!(
            "cuInit failed: {} (is the NVIDIA kernel module loaded? CUDA_VISIBLE_DEVICES={:?})",
            cuda_error(rc, "cuInit".into(), 0, String::new()),
            std::env::var("CUDA_VISIBLE_DEVICES").unwrap_or_default()
        ));
    }
    let mut count = 0;
    // SAFETY: cuInit succeeded; `count` is a valid out-parameter.
    let rc = unsafe { sys::cuDeviceGetCount(&mut count) };
    if rc != sys::CUresult::CUDA_SUCCESS || count <= 0 {
        return Err(format!(
            "the CUDA driver loaded but sees no GPU (cuDeviceGetCount: {count}, CUDA_VISIBLE_DEVICES={:?})",
            std::env::var("CUDA_VISIBLE_DEVICES").unwrap_or_default()
        ));
    }
    Ok(count as usize)
}

/// Decides whether this PE is a GPU PE: `Ok(None)` for a CPU PE, `Ok(Some(n))` for a GPU
/// PE on a machine with `n` visible GPUs.
pub(crate) fn select(choice: DeviceChoice, pe: usize) -> Result<Option<usize>> {
    match choice {
        DeviceChoice::Cpu => Ok(None),
        DeviceChoice::Auto => match probe() {
            Ok(n) => Ok(Some(n)),
            // No driver: a machine without GPUs, where CPU PEs are the plan. A driver
            // that loads but yields no usable GPU is a fallback.
            Err(why) if !driver_present() => {
                tracing::info!(pe, "CPU PE: {why} (SYMMEM_DEVICE=auto)");
                Ok(None)
            }
            Err(why) => {
                tracing::warn!(
                    pe,
                    "CPU PE although the CUDA driver loads: {why} (SYMMEM_DEVICE=auto)"
                );
                Ok(None)
            }
        },
        DeviceChoice::Cuda => probe().map(Some).map_err(|reason| Error::NoGpu {
            op: "init (SYMMEM_DEVICE=cuda)",
            pe,
            reason,
        }),
    }
}

/// An attribute of `device`; `what` and `pe` name it in errors.
fn device_attribute(
    device: sys::CUdevice,
    a: sys::CUdevice_attribute,
    what: &str,
    pe: usize,
) -> Result<i32> {
    let mut v = 0;
    // SAFETY: a valid device and out-parameter.
    check(
        unsafe { sys::cuDeviceGetAttribute(&mut v, a, device) },
        || format!("cuDeviceGetAttribute({what})"),
        pe,
    )?;
    Ok(v)
}

/// The GPU a GPU PE runs on, with its primary context.
pub(crate) struct Gpu {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) ordinal: usize,
    pub(crate) device: sys::CUdevice,
    pub(crate) pe: usize,
    /// `domain:bus:device.function`, how peers recognize the same GPU.
    pub(crate) pci_bus_id: String,
    pub(crate) name: String,
    pub(crate) compute_capability: (i32, i32),
    /// Stream memory operations (`cuStreamWriteValue64`/`cuStreamWaitValue64`) are
    /// available, and with them the stream-ordered signal writes and waits that need no
    /// kernel; `SYMMEM_STREAM_MEMOPS=0` turns them off (helper kernels instead).
    pub(crate) stream_memops: bool,
    /// A stream wait can flush remote writes that reached the GPU before it
    /// (`CU_STREAM_WAIT_VALUE_FLUSH`).
    pub(crate) flush_remote_writes: bool,
    /// What this PE's CPUs were narrowed to at open (its GPU's NUMA node), if anything
    /// ([`crate::binding::narrow_to_gpu`]).
    pub(crate) cpus_narrowed: Option<String>,
    /// Failures of driver calls made in `Drop` (which cannot return them), reported by
    /// the next call that binds the context.
    drop_failures: std::sync::Mutex<Vec<String>>,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("ordinal", &self.ordinal)
            .field("name", &self.name)
            .field("pci_bus_id", &self.pci_bus_id)
            .finish()
    }
}

impl Gpu {
    /// Opens GPU `ordinal` (of the visible ones) for PE `pe`, which shares it with
    /// `sharers` PEs of this node in all (itself included).
    pub(crate) fn open(ordinal: usize, pe: usize, sharers: usize) -> Result<Self> {
        let ctx = CudaContext::new(ordinal).map_err(|e| {
            cuda_error(
                e.0,
                format!("opening GPU {ordinal} (cuDevicePrimaryCtxRetain)"),
                pe,
                String::new(),
            )
        })?;
        let device = ctx.cu_device();
        let attr = |a, what: &str| device_attribute(device, a, what, pe);
        let mut name = [0 as std::ffi::c_char; 256];
        // SAFETY: the buffer holds 256 bytes, as passed.
        check(
            unsafe { sys::cuDeviceGetName(name.as_mut_ptr(), 256, device) },
            || "cuDeviceGetName".into(),
            pe,
        )?;
        // SAFETY: the driver NUL-terminates within the buffer.
        let name = unsafe { CStr::from_ptr(name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        let mut bus = [0 as std::ffi::c_char; 64];
        // SAFETY: the buffer holds 64 bytes, as passed.
        check(
            unsafe { sys::cuDeviceGetPCIBusId(bus.as_mut_ptr(), 64, device) },
            || "cuDeviceGetPCIBusId".into(),
            pe,
        )?;
        // SAFETY: the driver NUL-terminates within the buffer.
        let pci_bus_id = unsafe { CStr::from_ptr(bus.as_ptr()) }
            .to_string_lossy()
            .to_ascii_lowercase();
        use sys::CUdevice_attribute::*;
        let mode = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, "compute mode")?;
        let mode_name = match mode {
            0 => "Default",
            2 => "Prohibited",
            3 => "Exclusive_Process",
            _ => "unknown",
        };
        if mode == 2 || (mode == 3 && sharers > 1) {
            return Err(Error::NoGpu {
                op: "init",
                pe,
                reason: format!(
                    "GPU {ordinal} ({name}, {pci_bus_id}) is in compute mode {mode_name}, and {sharers} PEs of this node share it: several processes on one GPU need compute mode Default (nvidia-smi -c DEFAULT, as an administrator), or one GPU per PE (CUDA_VISIBLE_DEVICES)"
                ),
            });
        }
        let compute_capability = (
            attr(
                CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                "compute capability",
            )?,
            attr(
                CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                "compute capability",
            )?,
        );
        // Version 2 of the 64-bit memops (the driver's `cuStreamWriteValue64_v2`), which
        // CUDA 12 drivers offer without a module parameter.
        let stream_memops = std::env::var(crate::config::STREAM_MEMOPS.name)
            .map_or(true, |v| v != "0")
            && attr(
                CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
                "64-bit stream memory operations",
            )? != 0;
        let flush_remote_writes = attr(
            CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES,
            "flushing remote writes",
        )? != 0;
        tracing::info!(pe, ordinal, %name, %pci_bus_id, sharers, compute_mode = mode_name, stream_memops, "GPU PE");
        let cpus_narrowed = crate::binding::narrow_to_gpu(pe, &pci_bus_id);
        Ok(Gpu {
            ctx,
            ordinal,
            device,
            pe,
            pci_bus_id,
            name,
            compute_capability,
            stream_memops,
            flush_remote_writes,
            cpus_narrowed,
            drop_failures: Default::default(),
        })
    }

    /// Makes this PE's context current on the calling thread. Cheap; every entry point
    /// that calls the driver does it first, since any thread may call the runtime.
    pub(crate) fn bind(&self) -> Result<()> {
        self.make_current()?;
        let failed =
            std::mem::take(&mut *self.drop_failures.lock().unwrap_or_else(|p| p.into_inner()));
        if failed.is_empty() {
            return Ok(());
        }
        Err(Error::Cuda {
            call: "releasing an earlier module or buffer".into(),
            pe: self.pe,
            name: "failed".into(),
            code: 0,
            detail: format!(": {}", failed.join("; ")),
        })
    }

    /// Makes this PE's context current on the calling thread, and only that: for `Drop`
    /// and for threads that report their own errors (the proxy thread), which must not
    /// take the failures [`Self::bind`] reports.
    pub(crate) fn make_current(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| cuda_error(e.0, "cuCtxSetCurrent".into(), self.pe, String::new()))
    }

    /// Records the failure of a driver call made in `Drop`: logged now, and returned by
    /// the next call that binds the context.
    pub(crate) fn record_drop_failure(&self, rc: sys::CUresult, call: &str) {
        if rc == sys::CUresult::CUDA_SUCCESS {
            return;
        }
        let e = cuda_error(rc, call.to_string(), self.pe, String::new());
        tracing::warn!("{e}");
        self.drop_failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(e.to_string());
    }

    /// An attribute of this GPU.
    pub(crate) fn attribute(&self, a: sys::CUdevice_attribute, what: &str) -> Result<i32> {
        device_attribute(self.device, a, what, self.pe)
    }

    /// Whether this GPU can load and store to memory on the GPU with PCI id `peer_bus`:
    /// the same GPU, or a peer the driver allows (`cuDeviceCanAccessPeer`).
    pub(crate) fn can_access(&self, peer_bus: &str) -> Result<bool> {
        if peer_bus == self.pci_bus_id {
            return Ok(true);
        }
        let Ok(c) = std::ffi::CString::new(peer_bus) else {
            return Ok(false);
        };
        let mut dev = 0;
        // SAFETY: a NUL-terminated string and a valid out-parameter.
        if unsafe { sys::cuDeviceGetByPCIBusId(&mut dev, c.as_ptr()) }
            != sys::CUresult::CUDA_SUCCESS
        {
            // Not visible in this process (CUDA_VISIBLE_DEVICES): no direct path.
            return Ok(false);
        }
        let mut ok = 0;
        // SAFETY: two valid devices and an out-parameter.
        check(
            unsafe { sys::cuDeviceCanAccessPeer(&mut ok, self.device, dev) },
            || format!("cuDeviceCanAccessPeer(GPU {peer_bus})"),
            self.pe,
        )?;
        Ok(ok != 0)
    }

    /// Waits until the work the runtime queued on the legacy default stream (host copies,
    /// helper kernels, launches) has finished. Streams of the program's own
    /// (`create_stream`, non-blocking) are not waited for: a stream that waits for a
    /// peer's signal cannot hold up a host operation.
    pub(crate) fn synchronize(&self, op: &str) -> Result<()> {
        self.bind()?;
        // SAFETY: the context is current; the null stream is always valid.
        check(
            unsafe { sys::cuStreamSynchronize(std::ptr::null_mut()) },
            || format!("cuStreamSynchronize ({op})"),
            self.pe,
        )
    }

    /// Whether the work on the legacy default stream (the kernels `Runtime::launch`
    /// starts) has ended: `None` while it runs, else its result (`what` names it in an
    /// error).
    pub(crate) fn legacy_stream_ended(&self, what: impl FnOnce() -> String) -> Option<Result<()>> {
        if let Err(e) = self.bind() {
            return Some(Err(e));
        }
        // SAFETY: the context is current; the null stream is always valid.
        match unsafe { sys::cuStreamQuery(std::ptr::null_mut()) } {
            sys::CUresult::CUDA_SUCCESS => Some(Ok(())),
            sys::CUresult::CUDA_ERROR_NOT_READY => None,
            rc => Some(Err(cuda_error(rc, what(), self.pe, String::new()))),
        }
    }

    /// Copies `len` bytes from host `src` to device address `dst`; complete on return.
    ///
    /// # Safety
    /// `src` is valid for `len` bytes; `dst..dst+len` is device memory mapped in this
    /// context.
    pub(crate) unsafe fn copy_to_device(
        &self,
        op: &str,
        dst: u64,
        src: *const u8,
        len: usize,
    ) -> Result<()> {
        self.bind()?;
        // SAFETY: forwarded from the caller.
        check(
            unsafe { sys::cuMemcpyHtoD_v2(dst, src.cast(), len) },
            || format!("cuMemcpyHtoD of {len} bytes ({op})"),
            self.pe,
        )?;
        // From pageable memory the copy returns once the source is staged, before the
        // data lands: wait, so that a put is complete (visible to peers) on return.
        self.synchronize(op)
    }

    /// Copies `len` bytes from device address `src` to host `dst`; complete on return.
    ///
    /// # Safety
    /// `dst` is valid for `len` bytes of writes; `src..src+len` is device memory mapped
    /// in this context.
    pub(crate) unsafe fn copy_from_device(
        &self,
        op: &str,
        dst: *mut u8,
        src: u64,
        len: usize,
    ) -> Result<()> {
        self.bind()?;
        // SAFETY: forwarded from the caller.
        check(
            unsafe { sys::cuMemcpyDtoH_v2(dst.cast(), src, len) },
            || format!("cuMemcpyDtoH of {len} bytes ({op})"),
            self.pe,
        )
    }

    /// Sets `len` bytes at device address `dst` to zero and waits for it.
    ///
    /// # Safety
    /// `dst..dst+len` is device memory mapped in this context.
    pub(crate) unsafe fn zero(&self, op: &str, dst: u64, len: usize) -> Result<()> {
        self.bind()?;
        // SAFETY: forwarded from the caller.
        check(
            unsafe { sys::cuMemsetD8_v2(dst, 0, len) },
            || format!("cuMemsetD8 of {len} bytes ({op})"),
            self.pe,
        )?;
        self.synchronize(op)
    }
}

/// What a GPU PE's device code needs besides its heap: the peer base table and the error
/// word, in memory the GPU reads.
pub(crate) struct DeviceResources {
    /// Device copy of `DeviceState::peer_bases`.
    peer_table: u64,
    /// The error word, then the result word the helper kernels write, in mapped pinned
    /// host memory: readable by the host even after a trap has broken the context.
    words: MappedHost,
    /// The streams `Runtime::create_stream` handed out (weakly: a stream the program
    /// dropped is gone), which `free` and `finalize` wait for: their copies and helper
    /// kernels may still write an allocation or the heap.
    streams: std::sync::Mutex<Vec<std::sync::Weak<cudarc::driver::CudaStream>>>,
    /// Last: freed while the context is still retained.
    pub(crate) gpu: Arc<Gpu>,
}

impl DeviceResources {
    /// Records `stream`, handed out by `create_stream`, for [`Self::streams_ended`];
    /// forgets the streams the program dropped.
    pub(crate) fn track_stream(&self, stream: &Arc<cudarc::driver::CudaStream>) {
        let mut streams = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        streams.retain(|s| s.strong_count() > 0);
        streams.push(Arc::downgrade(stream));
    }

    /// Whether every stream `create_stream` handed out (and the program still holds) has
    /// run what was queued on it: `None` while one has not, else the first error.
    pub(crate) fn streams_ended(&self, op: &str) -> Option<Result<()>> {
        if let Err(e) = self.gpu.bind() {
            return Some(Err(e));
        }
        let streams = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        for stream in streams.iter().filter_map(std::sync::Weak::upgrade) {
            // SAFETY: the context is current; the stream is alive (held above).
            match unsafe { sys::cuStreamQuery(stream.cu_stream()) } {
                sys::CUresult::CUDA_SUCCESS => {}
                sys::CUresult::CUDA_ERROR_NOT_READY => return None,
                rc => {
                    let what = format!("cuStreamQuery ({op}: a stream of create_stream)");
                    return Some(Err(cuda_error(rc, what, self.gpu.pe, String::new())));
                }
            }
        }
        Some(Ok(()))
    }

    /// Uploads `peer_bases` and allocates the error word.
    pub(crate) fn new(gpu: &Arc<Gpu>, peer_bases: &[u64]) -> Result<Self> {
        gpu.bind()?;
        let pe = gpu.pe;
        let words = MappedHost::new(gpu, RESULT_AT + 8, "device error record and result word")?;
        let bytes = std::mem::size_of_val(peer_bases).max(8);
        let mut peer_table = 0;
        // SAFETY: valid out-parameter; the context is current.
        check(
            unsafe { sys::cuMemAlloc_v2(&mut peer_table, bytes) },
            || "cuMemAlloc(peer base table)".into(),
            pe,
        )?;
        let res = DeviceResources {
            peer_table,
            words,
            streams: std::sync::Mutex::default(),
            gpu: gpu.clone(),
        };
        // SAFETY: the table holds `bytes` >= the source's bytes.
        unsafe {
            gpu.copy_to_device(
                "init",
                peer_table,
                peer_bases.as_ptr().cast(),
                std::mem::size_of_val(peer_bases),
            )?
        };
        gpu.synchronize("init")?;
        Ok(res)
    }

    /// Device address of the peer base table.
    pub(crate) fn peer_table(&self) -> u64 {
        self.peer_table
    }

    /// Device address of the error record (`DeviceState::error`).
    pub(crate) fn error_word(&self) -> u64 {
        self.words.device()
    }

    /// Device address of the result word the helper kernels write.
    pub(crate) fn result_word(&self) -> u64 {
        self.words.device() + RESULT_AT as u64
    }

    /// Reads the result word after a helper kernel has finished.
    pub(crate) fn take_result(&self) -> u64 {
        // SAFETY: the word after the error record in the pinned allocation; the kernel
        // that wrote it has finished (the launch synchronized).
        unsafe {
            self.words
                .host()
                .add(RESULT_AT)
                .cast::<u64>()
                .read_volatile()
        }
    }

    /// Takes the error record: what a kernel reported before trapping, if anything. The
    /// failed-peer word is cleared too, for the next kernel.
    pub(crate) fn take_error(&self) -> Option<ErrorRecord> {
        let rec = self.words.host().cast::<ErrorRecord>();
        // SAFETY: the record stays allocated as long as `self`; the device writes it with
        // system-scope stores, so volatile loads see the last values once the kernel
        // ended.
        let r = unsafe { rec.read_volatile() };
        if r.word == 0 && r.peer_failed == 0 {
            return None;
        }
        // SAFETY: as above.
        unsafe { rec.write_volatile(ErrorRecord::default()) };
        (r.word != 0).then_some(r)
    }

    /// Tells this PE's running kernels that a peer failed (`pe`, or `None`: not pinned on
    /// one PE): their device waits fail at their next check, within a millisecond.
    pub(crate) fn flag_peer_failed(&self, pe: Option<usize>) {
        let rec = self.words.host().cast::<ErrorRecord>();
        let value = pe.map_or(u64::MAX, |pe| pe as u64 + 1);
        // SAFETY: the record's `peer_failed` field, in the pinned allocation `self` owns;
        // the device only reads it, so a volatile store is not a race with device stores.
        unsafe { std::ptr::addr_of_mut!((*rec).peer_failed).write_volatile(value) };
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for DeviceResources {
    fn drop(&mut self) {
        if self.peer_table == 0 || self.gpu.make_current().is_err() {
            return;
        }
        // SAFETY: allocated in `new` and freed once.
        let rc = unsafe { sys::cuMemFree_v2(self.peer_table) };
        self.gpu
            .record_drop_failure(rc, "cuMemFree(peer base table)");
    }
}

/// Bytes of the error record before the result word in [`DeviceResources`]' allocation.
const RESULT_AT: usize = std::mem::size_of::<ErrorRecord>();

/// Describes a kernel's error record (code in the low 32 bits of its word, PE in the high
/// 32) on the PE whose state is `state`.
pub(crate) fn describe_error(rec: &ErrorRecord, state: &symmem_device::DeviceState) -> String {
    use symmem_device::state::{
        error_code::{PEER_FAILED, WAIT_TIMEOUT},
        WaitSite,
    };
    let (code, pe) = (rec.word as u32, (rec.word >> 32) as u32);
    if code == symmem_device::state::error_code::PANIC {
        let p = &rec.panic;
        return format!(
            "a kernel thread in block {:?} thread {:?} {}",
            (p.block[0], p.block[1], p.block[2]),
            (p.thread[0], p.thread[1], p.thread[2]),
            p
        );
    }
    if code == WAIT_TIMEOUT || code == PEER_FAILED || rec.word == u64::MAX {
        let site = WaitSite {
            op: rec.wait as u32,
            cmp: (rec.wait >> 32) as u32,
            pe,
            addr: rec.addr,
            wanted: rec.wanted,
        };
        if code == PEER_FAILED {
            return format!(
                "{} stopped: a peer failed",
                crate::wait_report::describe_wait(state, &site, rec.seen)
            );
        }
        let limit = std::time::Duration::from_millis(state.wait_timeout_ms as u64);
        return crate::wait_report::timed_out(state, &site, rec.seen, limit);
    }
    describe_error_word(rec.word)
}

/// The error of a GPU kernel whose record says it panicked: [`Error::KernelFailed`], as a
/// panic on the CPU executor gives, naming the PE, block and thread, and the panic's file,
/// line and message (`panicked at src/lib.rs:12:9: …`). `None` for any other record.
pub(crate) fn panic_error(rec: &ErrorRecord) -> Option<Error> {
    let (code, pe) = (rec.word as u32, (rec.word >> 32) as usize);
    (code == symmem_device::state::error_code::PANIC).then(|| {
        let p = &rec.panic;
        Error::KernelFailed {
            pe,
            block: (p.block[0], p.block[1], p.block[2]),
            thread: (p.thread[0], p.thread[1], p.thread[2]),
            message: p.to_string(),
        }
    })
}

/// Describes a device error word (code in the low 32 bits, PE in the high 32).
pub(crate) fn describe_error_word(w: u64) -> String {
    use symmem_device::state::error_code::*;
    let (code, pe) = (w as u32, (w >> 32) as u32);
    match code {
        UNREACHABLE_PE => format!("a device operation targeted PE {pe}, which has no P2P path from this GPU and no proxy channel (a job without a remote transport)"),
        PROXY_FAILED => format!("the proxy channel failed issuing a device operation to PE {pe} on the remote transport"),
        INVALID_PE => format!("a device operation named PE {pe}, which does not exist"),
        INVALID_TEAM_PE => format!("a device collective named team PE {pe}, which is not in the team"),
        INVALID_TEAM => format!("a device collective on PE {pe} got a team handle that does not describe a team of this PE (get it from Team::device on this PE)"),
        NOT_INITIALIZED => "a device operation ran before SYMMEM_DEVICE_STATE was filled (launch through Runtime::launch)".into(),
        c => format!("device error code {c} (PE {pe})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use symmem_device::panic_record::{write, PanicSite, Stores};
    use symmem_device::state::error_code::PANIC;
    use symmem_device::Dim3;

    /// The record a GPU kernel leaves when thread (7, 0, 0) of block (1, 0, 0) of PE 3
    /// panics at `tests/kernels/src/failure.rs:18:13`.
    fn panicked(message: Option<&str>) -> ErrorRecord {
        let mut rec = ErrorRecord {
            word: (3u64 << 32) | PANIC as u64,
            ..ErrorRecord::default()
        };
        let site = PanicSite {
            file: "tests/kernels/src/failure.rs",
            line: 18,
            column: 13,
            block: Dim3::new(1, 0, 0),
            thread: Dim3::new(7, 0, 0),
            message,
        };
        // Plain stores: the host's stand-in for the device's system-scope ones.
        unsafe fn word(p: *mut u32, v: u32) {
            // SAFETY: `write` passes addresses inside the record it was lent.
            unsafe { p.write(v) }
        }
        unsafe fn byte(p: *mut u8, v: u8) {
            // SAFETY: as for `word`.
            unsafe { p.write(v) }
        }
        // SAFETY: the record is live and writable.
        unsafe {
            write(
                std::ptr::addr_of_mut!(rec.panic),
                &site,
                Stores { word, byte },
            )
        };
        rec
    }

    #[test]
    fn a_gpu_panic_fails_the_launch_as_a_cpu_panic_does() {
        let err = panic_error(&panicked(Some("deliberate kernel panic"))).expect("a panic");
        assert!(
            matches!(
                err,
                Error::KernelFailed {
                    pe: 3,
                    block: (1, 0, 0),
                    thread: (7, 0, 0),
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "kernel failed on PE 3 in block (1, 0, 0) thread (7, 0, 0): panicked at \
             tests/kernels/src/failure.rs:18:13: deliberate kernel panic"
        );
    }

    #[test]
    fn a_panic_beside_a_peer_failure_is_described_whole() {
        let rec = panicked(None);
        let state = <symmem_device::DeviceState as bytemuck::Zeroable>::zeroed();
        assert_eq!(
            describe_error(&rec, &state),
            "a kernel thread in block (1, 0, 0) thread (7, 0, 0) panicked at \
             tests/kernels/src/failure.rs:18:13: (a formatted message, which a GPU does not record)"
        );
    }

    #[test]
    fn other_records_are_not_panics() {
        let rec = ErrorRecord {
            word: symmem_device::state::error_code::INVALID_PE as u64 | 5 << 32,
            ..panicked(Some("x"))
        };
        assert!(panic_error(&rec).is_none());
        assert_eq!(
            describe_error(
                &rec,
                &<symmem_device::DeviceState as bytemuck::Zeroable>::zeroed()
            ),
            "a device operation named PE 5, which does not exist"
        );
    }
}
