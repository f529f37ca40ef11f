//! PTX modules on a GPU PE: loading with the JIT's error log, filling the module's
//! `SYMMEM_DEVICE_STATE`, and launching its kernels.

use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::{Arc, Mutex};

use cudarc::driver::sys;
use symmem_device::{DeviceState, Dim3, EmbeddedPtx, KernelInfo};

use super::{check, cuda_error, Gpu};
use crate::error::{Error, Result};

/// The symbol every module built with symmem-device defines once.
pub(crate) use symmem_device::state::STATE_SYMBOL;

/// A PTX module loaded into a GPU PE's context.
pub(crate) struct CudaModule {
    module: sys::CUmodule,
    name: String,
    functions: Mutex<HashMap<&'static str, sys::CUfunction>>,
    /// Last: the module is unloaded while the context is still retained.
    gpu: Arc<Gpu>,
}

// SAFETY: module and function handles may be used from any thread of the process once
// the context is current (every entry point binds it).
unsafe impl Send for CudaModule {}
// SAFETY: see above; the function cache is behind a mutex.
unsafe impl Sync for CudaModule {}

impl std::fmt::Debug for CudaModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaModule")
            .field("name", &self.name)
            .finish()
    }
}

/// Bytes of the JIT's error and info logs.
const LOG_LEN: usize = 16 * 1024;

/// The first driver version (as `cuDriverGetVersion` reports it) with `cuFuncLoad`.
const FUNC_LOAD_DRIVER: i32 = 12040;

/// The CUDA version of the driver, asked once (0 if it does not say).
fn driver_version() -> i32 {
    static VERSION: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    *VERSION.get_or_init(|| {
        let mut v = 0;
        // SAFETY: a valid out-parameter; callable before and after cuInit.
        let rc = unsafe { sys::cuDriverGetVersion(&mut v) };
        if rc == sys::CUresult::CUDA_SUCCESS {
            v
        } else {
            0
        }
    })
}

/// The kernels a PTX text defines: the names of its `.entry` directives.
fn ptx_entries(ptx: &str) -> impl Iterator<Item = &str> {
    ptx.lines().filter_map(|line| {
        let words = line.trim_start();
        let words = words
            .strip_prefix(".visible")
            .or_else(|| words.strip_prefix(".weak"))
            .unwrap_or(words)
            .trim_start();
        let name = words.strip_prefix(".entry")?.trim_start();
        let name = name
            .split(|c: char| c == '(' || c.is_whitespace())
            .next()
            .unwrap_or("");
        (!name.is_empty()).then_some(name)
    })
}

impl CudaModule {
    /// Loads `ptx` (named `name` in errors; the driver JIT-compiles it for this GPU) and
    /// writes `state` into its `SYMMEM_DEVICE_STATE`.
    pub(crate) fn load(gpu: &Arc<Gpu>, name: &str, ptx: &str, state: &DeviceState) -> Result<Self> {
        let image = CString::new(ptx).map_err(|_| Error::Module {
            op: "load_module",
            pe: gpu.pe,
            reason: format!("the PTX of {name} contains a NUL byte"),
        })?;
        Self::load_image(gpu, name, image.as_bytes_with_nul(), ptx, state)
    }

    /// Loads a kernel crate's embedded kernels (named `name` in errors) and writes `state`
    /// into the module: its cubin when one was built for this GPU's architecture (no JIT,
    /// which takes minutes for a large crate until the driver's cache holds it), else its
    /// PTX. A cubin that does not load is logged and the PTX loaded instead.
    pub(crate) fn load_embedded(
        gpu: &Arc<Gpu>,
        name: &str,
        embedded: &EmbeddedPtx,
        state: &DeviceState,
    ) -> Result<Self> {
        if let Some(cubin) = embedded.sass_for(gpu.compute_capability) {
            match Self::load_image(gpu, name, cubin, embedded.ptx, state) {
                Ok(m) => {
                    tracing::debug!(
                        pe = gpu.pe,
                        module = name,
                        arch = embedded.sass_arch,
                        "cubin loaded (no JIT)"
                    );
                    return Ok(m);
                }
                Err(e) => tracing::warn!(
                    pe = gpu.pe,
                    module = name,
                    "the embedded {} cubin did not load ({e}); JIT-compiling the PTX instead",
                    embedded.sass_arch
                ),
            }
        }
        Self::load(gpu, name, embedded.ptx, state)
    }

    /// Loads a module image the driver recognizes (NUL-terminated PTX, or an ELF cubin
    /// compiled from `ptx`), and every kernel in it.
    fn load_image(
        gpu: &Arc<Gpu>,
        name: &str,
        image: &[u8],
        ptx: &str,
        state: &DeviceState,
    ) -> Result<Self> {
        gpu.bind()?;
        let pe = gpu.pe;
        let mut log = vec![0u8; LOG_LEN];
        // No register cap: the PTX build gave every entry its `.maxntid` (launch bound),
        // from which the JIT, like ptxas for the embedded cubins, sizes its registers.
        let mut options = [
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        let mut values: [*mut c_void; 2] = [log.as_mut_ptr().cast(), LOG_LEN as *mut c_void];
        let mut module = std::ptr::null_mut();
        // SAFETY: an image the driver reads in place (NUL-terminated PTX or a whole ELF
        // cubin, which carries its own size); options with values of the kinds the driver
        // expects (a buffer pointer and its size passed by value).
        let rc = unsafe {
            sys::cuModuleLoadDataEx(
                &mut module,
                image.as_ptr().cast(),
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        if rc != sys::CUresult::CUDA_SUCCESS {
            let text =
                String::from_utf8_lossy(&log[..log.iter().position(|&b| b == 0).unwrap_or(0)])
                    .trim()
                    .to_string();
            let detail = if text.is_empty() {
                String::new()
            } else {
                format!("; the JIT said:\n{text}")
            };
            return Err(cuda_error(
                rc,
                format!("cuModuleLoadDataEx({name})"),
                pe,
                detail,
            ));
        }
        let loaded = CudaModule {
            module,
            name: name.to_string(),
            functions: Mutex::new(HashMap::new()),
            gpu: gpu.clone(),
        };
        loaded.write_state(state)?;
        loaded.load_kernels(ptx)?;
        Ok(loaded)
    }

    /// Loads every kernel of the module now. Under CUDA's lazy loading (the default since
    /// CUDA 12.2) a kernel is loaded at its first use, and that load may wait for every
    /// kernel running in the context. A kernel that waits for another one's first launch
    /// would then never finish: a peer's AMO or signal, served by a runtime helper kernel
    /// beside this PE's kernel that waits for its result (found on an H100, 2026-11-26),
    /// or a program's consumer kernel launched beside a running producer. Drivers before
    /// 12.4 load a kernel in `cuModuleGetFunction`; later ones in `cuFuncLoad`.
    fn load_kernels(&self, ptx: &str) -> Result<()> {
        let pe = self.gpu.pe;
        let explicit = driver_version() >= FUNC_LOAD_DRIVER;
        for entry in ptx_entries(ptx) {
            let cname = CString::new(entry).expect("PTX names have no NUL");
            let mut f = std::ptr::null_mut();
            // SAFETY: valid out-parameter, a loaded module, a NUL-terminated name.
            let rc = unsafe { sys::cuModuleGetFunction(&mut f, self.module, cname.as_ptr()) };
            check(
                rc,
                || format!("cuModuleGetFunction({entry} of {})", self.name),
                pe,
            )?;
            if explicit {
                // SAFETY: a function of a loaded module; the driver has the entry point
                // (version checked above).
                let rc = unsafe { sys::cuFuncLoad(f) };
                check(rc, || format!("cuFuncLoad({entry} of {})", self.name), pe)?;
            }
        }
        Ok(())
    }

    /// Fills the module's `SYMMEM_DEVICE_STATE` with `state`.
    fn write_state(&self, state: &DeviceState) -> Result<()> {
        let pe = self.gpu.pe;
        let symbol = CString::new(STATE_SYMBOL).expect("no NUL");
        let (mut ptr, mut bytes) = (0, 0);
        // SAFETY: valid out-parameters, a loaded module and a NUL-terminated name.
        let rc = unsafe {
            sys::cuModuleGetGlobal_v2(&mut ptr, &mut bytes, self.module, symbol.as_ptr())
        };
        if rc == sys::CUresult::CUDA_ERROR_NOT_FOUND {
            return Err(Error::Module {
                op: "load_module",
                pe,
                reason: format!(
                    "module {} has no {STATE_SYMBOL}: it was not built from a kernel crate that uses symmem-device (the state global comes from the device crate)",
                    self.name
                ),
            });
        }
        check(
            rc,
            || format!("cuModuleGetGlobal({STATE_SYMBOL} of {})", self.name),
            pe,
        )?;
        if bytes != std::mem::size_of::<DeviceState>() {
            return Err(Error::Module {
                op: "load_module",
                pe,
                reason: format!(
                    "{STATE_SYMBOL} of module {} has {bytes} bytes; this runtime's DeviceState has {} (built against another symmem-device version?)",
                    self.name,
                    std::mem::size_of::<DeviceState>()
                ),
            });
        }
        let raw = bytemuck::bytes_of(state);
        // SAFETY: `ptr` is the module global of exactly `raw.len()` bytes.
        unsafe {
            self.gpu
                .copy_to_device("load_module", ptr, raw.as_ptr(), raw.len())?
        };
        self.gpu.synchronize("load_module")
    }

    /// The function `info.name`, checked against `info`'s parameter layout.
    fn function(&self, op: &'static str, info: &KernelInfo) -> Result<sys::CUfunction> {
        let mut cache = self.functions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&f) = cache.get(info.name) {
            return Ok(f);
        }
        let pe = self.gpu.pe;
        let cname = CString::new(info.name).expect("kernel names have no NUL");
        let mut f = std::ptr::null_mut();
        // SAFETY: valid out-parameter, a loaded module, a NUL-terminated name.
        let rc = unsafe { sys::cuModuleGetFunction(&mut f, self.module, cname.as_ptr()) };
        if rc == sys::CUresult::CUDA_ERROR_NOT_FOUND {
            return Err(Error::Module {
                op,
                pe,
                reason: format!(
                    "module {} has no kernel {:?} (is it declared with kernel! in that crate?)",
                    self.name, info.name
                ),
            });
        }
        check(rc, || format!("cuModuleGetFunction({})", info.name), pe)?;
        check_params(op, pe, info, |i| {
            let (mut offset, mut size) = (0, 0);
            // SAFETY: a valid function and out-parameters; an index past the last
            // parameter returns an error, which ends the walk.
            let rc = unsafe { sys::cuFuncGetParamInfo(f, i, &mut offset, &mut size) };
            (rc == sys::CUresult::CUDA_SUCCESS).then_some(size)
        })?;
        cache.insert(info.name, f);
        Ok(f)
    }

    /// Launches `info` with the argument addresses `args` and `shared_bytes` of dynamic
    /// shared memory per block on `stream` (null: the legacy default stream) without
    /// waiting for it: the caller waits (`Gpu::legacy_stream_ended`
    /// or the stream's synchronization).
    ///
    /// # Safety
    /// `args` point at values matching the kernel's parameters; the kernel's memory
    /// accesses are valid.
    #[allow(clippy::too_many_arguments)] // cuLaunchKernel's own argument list, grouped
    pub(crate) unsafe fn launch(
        &self,
        op: &'static str,
        info: &KernelInfo,
        args: &mut [*mut c_void],
        grid: Dim3,
        block: Dim3,
        shared_bytes: u32,
        cooperative: bool,
        stream: sys::CUstream,
    ) -> Result<()> {
        self.gpu.bind()?;
        let pe = self.gpu.pe;
        let f = self.function(op, info)?;
        if cooperative {
            let mut per_sm = 0;
            // SAFETY: a valid function and out-parameter.
            check(
                unsafe {
                    sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(
                        &mut per_sm,
                        f,
                        block.volume() as i32,
                        shared_bytes as usize,
                    )
                },
                || format!("cuOccupancyMaxActiveBlocksPerMultiprocessor({})", info.name),
                pe,
            )?;
            let sms = self.gpu.attribute(
                sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                "SM count",
            )?;
            let max = per_sm as u64 * sms as u64;
            if grid.volume() as u64 > max {
                return Err(Error::InvalidArgument {
                    op,
                    reason: format!(
                        "a cooperative launch of {} with grid {grid:?} has {} blocks, but only {max} blocks of {} threads fit on {} at once ({per_sm} per SM × {sms} SMs)",
                        info.name,
                        grid.volume(),
                        block.volume(),
                        self.gpu.name
                    ),
                });
            }
        }
        // SAFETY: forwarded from the caller; the null stream orders this launch after
        // every earlier copy of this context.
        let rc = unsafe {
            if cooperative {
                sys::cuLaunchCooperativeKernel(
                    f,
                    grid.x,
                    grid.y,
                    grid.z,
                    block.x,
                    block.y,
                    block.z,
                    shared_bytes,
                    stream,
                    args.as_mut_ptr(),
                )
            } else {
                sys::cuLaunchKernel(
                    f,
                    grid.x,
                    grid.y,
                    grid.z,
                    block.x,
                    block.y,
                    block.z,
                    shared_bytes,
                    stream,
                    args.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            }
        };
        check(
            rc,
            || {
                format!(
                    "{} of kernel {} (grid {grid:?}, block {block:?}, {shared_bytes} bytes of dynamic shared memory)",
                    if cooperative {
                        "cuLaunchCooperativeKernel"
                    } else {
                        "cuLaunchKernel"
                    },
                    info.name
                )
            },
            pe,
        )?;
        Ok(())
    }

    /// The module's name, for errors.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for CudaModule {
    fn drop(&mut self) {
        if let Err(e) = self.gpu.bind() {
            tracing::warn!("unloading module {}: {e}", self.name);
        }
        // SAFETY: loaded by `load`, unloaded once; nothing uses its functions after.
        let rc = unsafe { sys::cuModuleUnload(self.module) };
        self.gpu
            .record_drop_failure(rc, &format!("cuModuleUnload({})", self.name));
    }
}

/// Checks a kernel's declared parameters against what the loaded function reports:
/// `size_of(i)` is the size of parameter `i`, or `None` past the last one.
pub(crate) fn check_params(
    op: &'static str,
    pe: usize,
    info: &KernelInfo,
    size_of: impl Fn(usize) -> Option<usize>,
) -> Result<()> {
    let mut actual = Vec::new();
    while let Some(size) = size_of(actual.len()) {
        actual.push(size);
        if actual.len() > 4096 {
            break;
        }
    }
    let declared: Vec<usize> = info.params.iter().map(|p| p.size).collect();
    if declared != actual {
        return Err(Error::Module {
            op,
            pe,
            reason: format!(
                "kernel {} takes parameters of {actual:?} bytes on the GPU, but the Rust declaration has {declared:?} (was the PTX built from other sources than this binary?)",
                info.name
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::ptx_entries;

    #[test]
    fn the_kernels_of_a_ptx_text_are_its_entry_directives() {
        let ptx = "\
.version 8.5
.target sm_90
.global .align 8 .b8 SYMMEM_DEVICE_STATE[72];
.func helper(
.visible .entry host_amo(
\t.param .u64 host_amo_param_0
)
.entry plain(.param .u64 p)
  .weak .entry weak_one
(
// .entry in_a_comment(
";
        let names: Vec<&str> = ptx_entries(ptx).collect();
        assert_eq!(names, ["host_amo", "plain", "weak_one"]);
    }
}
