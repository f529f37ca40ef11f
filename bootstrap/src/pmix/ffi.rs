//! The part of the PMIx C API that the `pmix` bootstrap calls, loaded at run time with
//! `libloading` (`dlopen`), so that one binary runs with or without libpmix installed and
//! needs no PMIx headers to build.
//!
//! # Layouts
//! Declared after `pmix_common.h` of OpenPMIx 4.2.2 (Debian 12's `libpmix-dev`, PMIx
//! Standard 4.2), LP64 (x86_64, aarch64):
//!
//! | C type | size | fields (offset) |
//! |---|---|---|
//! | `pmix_proc_t` | 260 | `char nspace[256]` (0), `uint32_t rank` (256) |
//! | `pmix_value_t` | 32 | `uint16_t type` (0), a union of 24 bytes aligned to 8 (8); its largest member is `pmix_envar_t` (two pointers and a char) |
//! | `pmix_info_t` | 552 | `char key[512]` (0), `uint32_t flags` (512), `pmix_value_t value` (520) |
//!
//! A test compiles a C program against the header, when one is installed, and compares.
//! Older PMIx releases had a smaller `pmix_value_t` union, which would shift the arrays of
//! `pmix_info_t` passed to `PMIx_Fence`; [`Lib::open`] therefore refuses libraries older
//! than PMIx v4 ([`MIN_MAJOR`]), naming the version it found.

use std::ffi::{c_char, c_int, CStr, CString};

use libloading::os::unix::{Library, Symbol, RTLD_GLOBAL, RTLD_NOW};

use crate::error::BootstrapError;

/// `PMIX_MAX_NSLEN + 1`.
pub const NSPACE_LEN: usize = 256;
/// `PMIX_MAX_KEYLEN + 1`.
pub const KEY_LEN: usize = 512;
/// `PMIX_RANK_WILDCARD`: every process of a namespace.
pub const RANK_WILDCARD: u32 = u32::MAX - 1;
/// `PMIX_SUCCESS`.
pub const SUCCESS: c_int = 0;
/// `PMIX_ERR_UNREACH`: no PMIx server answers.
pub const ERR_UNREACH: c_int = -25;
/// `PMIX_ERR_PARTIAL_SUCCESS`: what a fence returns when a participant has ended.
pub const ERR_PARTIAL_SUCCESS: c_int = -52;
/// `PMIX_BOOL`.
const TYPE_BOOL: u16 = 1;
/// `PMIX_STRING`.
const TYPE_STRING: u16 = 3;
/// `PMIX_INT`.
const TYPE_INT: u16 = 6;
/// `PMIX_UINT32`.
const TYPE_UINT32: u16 = 14;
/// `PMIX_GLOBAL`: share with local and remote processes.
const SCOPE_GLOBAL: u8 = 3;
/// `PMIX_JOB_SIZE`: the number of processes in the job (`uint32_t`).
pub const KEY_JOB_SIZE: &str = "pmix.job.size";
/// `PMIX_HOSTNAME`: the name of the host a process is on (`char *`).
pub const KEY_HOSTNAME: &str = "pmix.hname";
/// `PMIX_NODEID`: the id of the node a process is on (`uint32_t`).
pub const KEY_NODEID: &str = "pmix.nodeid";
/// `PMIX_COLLECT_DATA`: a fence that distributes what was put.
const KEY_COLLECT_DATA: &str = "pmix.collect";
/// `PMIX_TIMEOUT`: seconds before the server gives up on the operation.
const KEY_TIMEOUT: &str = "pmix.timeout";
/// The oldest PMIx major version whose layouts match these declarations.
pub const MIN_MAJOR: u32 = 4;
/// The library names tried, in order, when `SYMMEM_PMIX_LIB` is unset.
pub const DEFAULT_NAMES: [&str; 2] = ["libpmix.so.2", "libpmix.so"];

/// `pmix_proc_t`: a namespace and a rank in it.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Proc {
    /// NUL-terminated namespace.
    pub nspace: [c_char; NSPACE_LEN],
    /// The rank, or [`RANK_WILDCARD`].
    pub rank: u32,
}

impl Proc {
    /// An all-zero proc, for `PMIx_Init` to fill.
    fn zeroed() -> Self {
        Proc {
            nspace: [0; NSPACE_LEN],
            rank: 0,
        }
    }

    /// The same namespace, rank `rank`.
    pub fn with_rank(&self, rank: u32) -> Self {
        Proc { rank, ..*self }
    }

    /// The namespace as text.
    pub fn namespace(&self) -> String {
        let bytes: Vec<u8> = self
            .nspace
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// The union of `pmix_value_t` (`data`), with the members used here.
#[repr(C)]
#[derive(Clone, Copy)]
union ValueData {
    flag: bool,
    string: *mut c_char,
    integer: c_int,
    uint32: u32,
    /// Gives the union its C size: `pmix_envar_t` is 24 bytes.
    _size: [u64; 3],
}

/// `pmix_value_t`: a type tag and a union.
#[repr(C)]
pub struct Value {
    ty: u16,
    data: ValueData,
}

/// `pmix_info_t`: a key, directive flags and a value.
#[repr(C)]
struct Info {
    key: [c_char; KEY_LEN],
    flags: u32,
    value: Value,
}

impl Info {
    fn new(key: &str, value: Value) -> Self {
        let mut k = [0 as c_char; KEY_LEN];
        for (dst, src) in k.iter_mut().zip(key.bytes().take(KEY_LEN - 1)) {
            *dst = src as c_char;
        }
        Info {
            key: k,
            flags: 0,
            value,
        }
    }

    fn flag(key: &str, on: bool) -> Self {
        Info::new(
            key,
            Value {
                ty: TYPE_BOOL,
                data: ValueData { flag: on },
            },
        )
    }

    fn int(key: &str, v: c_int) -> Self {
        Info::new(
            key,
            Value {
                ty: TYPE_INT,
                data: ValueData { integer: v },
            },
        )
    }
}

type InitFn = unsafe extern "C" fn(*mut Proc, *const Info, usize) -> c_int;
type FinalizeFn = unsafe extern "C" fn(*const Info, usize) -> c_int;
type PutFn = unsafe extern "C" fn(u8, *const c_char, *mut Value) -> c_int;
type CommitFn = unsafe extern "C" fn() -> c_int;
type FenceFn = unsafe extern "C" fn(*const Proc, usize, *const Info, usize) -> c_int;
type GetFn =
    unsafe extern "C" fn(*const Proc, *const c_char, *const Info, usize, *mut *mut Value) -> c_int;
type ValueDestructFn = unsafe extern "C" fn(*mut Value);
type ErrorStringFn = unsafe extern "C" fn(c_int) -> *const c_char;
type VersionFn = unsafe extern "C" fn() -> *const c_char;

/// A loaded libpmix: its entry points. The library stays loaded as long as this value; the
/// bootstrap keeps its `Lib` in a static, so it is never unloaded (PMIx keeps a progress
/// thread).
pub struct Lib {
    /// The name or path it was loaded by.
    pub name: String,
    /// `PMIx_Get_version()`, e.g. `OpenPMIx 4.2.2 (PMIx Standard: 4.2, …)`.
    pub version: String,
    init: InitFn,
    finalize: FinalizeFn,
    put: PutFn,
    commit: CommitFn,
    fence: FenceFn,
    get: GetFn,
    value_destruct: ValueDestructFn,
    error_string: ErrorStringFn,
    /// Keeps the entry points above valid.
    _library: Library,
}

/// The system's reason for a failed load or lookup (`dlerror()`'s text, which libloading
/// keeps as the error's source), else libloading's own description.
fn reason(e: &libloading::Error) -> String {
    std::error::Error::source(e).map_or_else(|| e.to_string(), ToString::to_string)
}

/// The major version in `PMIx_Get_version()`'s text: the first number in it.
pub fn major_version(text: &str) -> Option<u32> {
    let start = text.find(|c: char| c.is_ascii_digit())?;
    let digits: String = text[start..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().ok()
}

impl Lib {
    /// Loads the first of `names` that `dlopen` accepts and resolves the entry points. The
    /// error names every library tried, or the missing symbol, or the version found when it
    /// is older than [`MIN_MAJOR`].
    pub fn open(names: &[String]) -> Result<Lib, BootstrapError> {
        let mut tried = Vec::new();
        for name in names {
            // SAFETY: loading runs the library's constructors, which is what loading libpmix
            // is for. RTLD_GLOBAL lets the MCA plugins that libpmix loads itself resolve its
            // symbols.
            match unsafe { Library::open(Some(name), RTLD_NOW | RTLD_GLOBAL) } {
                Ok(library) => return Lib::resolve(name, library),
                Err(e) => tried.push(format!("{name} ({})", reason(&e))),
            }
        }
        Err(BootstrapError::Config(format!(
            "the pmix bootstrap cannot load libpmix: tried {}; install PMIx v{MIN_MAJOR} or later (Debian/Ubuntu: libpmix2; RHEL: pmix) or set SYMMEM_PMIX_LIB to the library's path",
            tried.join(", ")
        )))
    }

    fn resolve(name: &str, library: Library) -> Result<Lib, BootstrapError> {
        /// The entry point `symbol` of `library`, as a `T`.
        ///
        /// # Safety
        /// `T` must be the function pointer type of `symbol`'s C signature.
        unsafe fn sym<T: Copy>(
            library: &Library,
            name: &str,
            symbol: &str,
        ) -> Result<T, BootstrapError> {
            // SAFETY: the caller names the symbol's type.
            let found: Result<Symbol<T>, _> = unsafe { library.get(symbol.as_bytes()) };
            found.map(|s| *s).map_err(|e| {
                BootstrapError::Config(format!(
                    "{name} has no symbol {symbol} ({}): it is not libpmix, or older than PMIx v{MIN_MAJOR}; set SYMMEM_PMIX_LIB to a PMIx v{MIN_MAJOR} library",
                    reason(&e)
                ))
            })
        }
        // SAFETY: PMIx_Get_version has the C signature `const char *(void)` in every PMIx.
        let version_fn: VersionFn = unsafe { sym(&library, name, "PMIx_Get_version")? };
        // SAFETY: it returns a static NUL-terminated string.
        let version = unsafe { CStr::from_ptr(version_fn()) }
            .to_string_lossy()
            .into_owned();
        match major_version(&version) {
            Some(major) if major >= MIN_MAJOR => {}
            _ => {
                return Err(BootstrapError::Config(format!(
                    "{name} is {version:?}, but the pmix bootstrap needs PMIx v{MIN_MAJOR} or later (its pmix_value_t layout); set SYMMEM_PMIX_LIB to a newer libpmix"
                )))
            }
        }
        // SAFETY (every lookup below): each symbol is the PMIx v4 function of that name,
        // whose C signature (pmix.h) is the function type it is read as; the pointers stay
        // valid while `_library` keeps the library loaded.
        unsafe {
            Ok(Lib {
                name: name.to_string(),
                version,
                init: sym(&library, name, "PMIx_Init")?,
                finalize: sym(&library, name, "PMIx_Finalize")?,
                put: sym(&library, name, "PMIx_Put")?,
                commit: sym(&library, name, "PMIx_Commit")?,
                fence: sym(&library, name, "PMIx_Fence")?,
                get: sym(&library, name, "PMIx_Get")?,
                value_destruct: sym(&library, name, "PMIx_Value_destruct")?,
                error_string: sym(&library, name, "PMIx_Error_string")?,
                _library: library,
            })
        }
    }

    /// `PMIx_Error_string(status)`, e.g. `UNREACHABLE`.
    pub fn status_name(&self, status: c_int) -> String {
        // SAFETY: PMIx_Error_string returns a static NUL-terminated string for any status.
        let p = unsafe { (self.error_string)(status) };
        if p.is_null() {
            return "unknown status".into();
        }
        // SAFETY: non-null and NUL-terminated, see above.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// `Ok` for `PMIX_SUCCESS`, else an error naming `call` and the status.
    fn check(&self, call: &str, status: c_int) -> Result<(), BootstrapError> {
        if status == SUCCESS {
            return Ok(());
        }
        Err(BootstrapError::Pmix {
            call: call.to_string(),
            status,
            name: self.status_name(status),
            context: String::new(),
        })
    }

    /// `PMIx_Init`: connects to the PMIx server named by the `PMIX_*` variables and returns
    /// this process's namespace and rank.
    pub fn init(&self) -> Result<Proc, BootstrapError> {
        let mut me = Proc::zeroed();
        // SAFETY: `me` is a valid pmix_proc_t for PMIx_Init to fill; no info array is passed.
        let rc = unsafe { (self.init)(&mut me, std::ptr::null(), 0) };
        self.check("PMIx_Init", rc)?;
        Ok(me)
    }

    /// `PMIx_Finalize`, with no directives.
    pub fn finalize(&self) -> Result<(), BootstrapError> {
        // SAFETY: no info array is passed.
        let rc = unsafe { (self.finalize)(std::ptr::null(), 0) };
        self.check("PMIx_Finalize", rc)
    }

    /// `PMIx_Put(PMIX_GLOBAL, key, string value)`.
    pub fn put_string(&self, key: &str, value: &str) -> Result<(), BootstrapError> {
        let call = format!("PMIx_Put({key})");
        let (c_key, c_value) = match (CString::new(key), CString::new(value)) {
            (Ok(k), Ok(v)) => (k, v),
            _ => {
                return Err(BootstrapError::Config(format!(
                    "{call}: the key or value has a NUL byte"
                )))
            }
        };
        let mut v = Value {
            ty: TYPE_STRING,
            data: ValueData {
                string: c_value.as_ptr().cast_mut(),
            },
        };
        // SAFETY: c_key and the string in `v` are NUL-terminated and outlive the call;
        // PMIx_Put copies the value and does not write through the string pointer.
        let rc = unsafe { (self.put)(SCOPE_GLOBAL, c_key.as_ptr(), &mut v) };
        self.check(&call, rc)
    }

    /// `PMIx_Commit`: pushes what was put to the local server.
    pub fn commit(&self) -> Result<(), BootstrapError> {
        // SAFETY: no arguments.
        let rc = unsafe { (self.commit)() };
        self.check("PMIx_Commit", rc)
    }

    /// `PMIx_Fence` over every process of `me`'s namespace, collecting the data put, with
    /// `PMIX_TIMEOUT=timeout_s` (0 = none).
    pub fn fence_all(&self, me: &Proc, timeout_s: c_int) -> Result<(), BootstrapError> {
        let all = me.with_rank(RANK_WILDCARD);
        let info = [
            Info::flag(KEY_COLLECT_DATA, true),
            Info::int(KEY_TIMEOUT, timeout_s),
        ];
        // SAFETY: `all` is one valid proc and `info` an array of two valid infos, both
        // alive for the call; PMIx_Fence only reads them.
        let rc = unsafe { (self.fence)(&all, 1, info.as_ptr(), info.len()) };
        self.check("PMIx_Fence", rc)
    }

    /// `PMIx_Get(proc, key)` with `PMIX_TIMEOUT=timeout_s`; the value is released before
    /// returning what `read` made of it.
    fn get<T>(
        &self,
        proc: &Proc,
        key: &str,
        timeout_s: c_int,
        read: impl FnOnce(&Value) -> Result<T, String>,
    ) -> Result<T, BootstrapError> {
        let call = format!("PMIx_Get({key}, rank {})", proc_rank_text(proc.rank));
        let c_key = CString::new(key).expect("symmem's PMIx keys have no NUL");
        let info = [Info::int(KEY_TIMEOUT, timeout_s)];
        let mut out: *mut Value = std::ptr::null_mut();
        // SAFETY: proc, c_key and info are valid for the call; `out` receives a value that
        // PMIx allocated with malloc.
        let rc = unsafe { (self.get)(proc, c_key.as_ptr(), info.as_ptr(), info.len(), &mut out) };
        self.check(&call, rc)?;
        if out.is_null() {
            return Err(BootstrapError::Protocol {
                peer: "the PMIx server".into(),
                detail: format!("{call} succeeded but returned no value"),
            });
        }
        // SAFETY: `out` is a valid pmix_value_t returned by PMIx_Get.
        let got = read(unsafe { &*out });
        // SAFETY: PMIX_VALUE_RELEASE: destruct the contents, then free the malloc'ed value;
        // `out` is not used afterwards.
        unsafe {
            (self.value_destruct)(out);
            libc::free(out.cast());
        }
        got.map_err(|detail| BootstrapError::Protocol {
            peer: "the PMIx server".into(),
            detail: format!("{call}: {detail}"),
        })
    }

    /// `PMIx_Get` of a `uint32_t`.
    pub fn get_u32(&self, proc: &Proc, key: &str, timeout_s: c_int) -> Result<u32, BootstrapError> {
        self.get(proc, key, timeout_s, |v| {
            if v.ty == TYPE_UINT32 {
                // SAFETY: the type tag says the union holds a uint32.
                Ok(unsafe { v.data.uint32 })
            } else {
                Err(format!(
                    "a value of PMIx type {}, expected PMIX_UINT32 ({TYPE_UINT32})",
                    v.ty
                ))
            }
        })
    }

    /// `PMIx_Get` of a string.
    pub fn get_string(
        &self,
        proc: &Proc,
        key: &str,
        timeout_s: c_int,
    ) -> Result<String, BootstrapError> {
        self.get(proc, key, timeout_s, |v| {
            let p = if v.ty == TYPE_STRING {
                // SAFETY: the type tag says the union holds a string pointer.
                unsafe { v.data.string }
            } else {
                std::ptr::null_mut()
            };
            if p.is_null() {
                return Err(format!(
                    "a value of PMIx type {}, expected a PMIX_STRING ({TYPE_STRING})",
                    v.ty
                ));
            }
            // SAFETY: a non-null PMIX_STRING value holds a NUL-terminated string.
            Ok(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        })
    }
}

/// A rank for messages: `wildcard` for [`RANK_WILDCARD`].
fn proc_rank_text(rank: u32) -> String {
    if rank == RANK_WILDCARD {
        "wildcard".into()
    } else {
        rank.to_string()
    }
}

#[cfg(test)]
pub(super) mod layout {
    //! Sizes and offsets of the declared structs, for the layout test.
    use super::{Info, Proc, Value};

    /// `(name, value)` pairs in the order the C check program prints them.
    pub fn facts() -> Vec<(&'static str, usize)> {
        vec![
            ("proc_size", std::mem::size_of::<Proc>()),
            ("proc_rank", std::mem::offset_of!(Proc, rank)),
            ("value_size", std::mem::size_of::<Value>()),
            ("value_data", std::mem::offset_of!(Value, data)),
            ("info_size", std::mem::size_of::<Info>()),
            ("info_flags", std::mem::offset_of!(Info, flags)),
            ("info_value", std::mem::offset_of!(Info, value)),
        ]
    }
}
