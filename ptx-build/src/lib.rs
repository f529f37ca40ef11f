//! Builds a `no_std` kernel crate to PTX, for embedding in a host program, and checks PTX
//! with `ptxas`.
//!
//! The build runs a nested `cargo rustc --crate-type cdylib --target nvptx64-nvidia-cuda
//! -Zbuild-std=core` with `RUSTC_BOOTSTRAP=1` and `-C target-cpu=sm_XX` in its own target
//! directory, so it works on the stable toolchain and never contends with the outer build.
//! From a `build.rs`:
//!
//! ```no_run
//! let ptx = symmem_ptx_build::PtxBuilder::new("kernels", "my-kernels")
//!     .arch("sm_90")
//!     .build()
//!     .unwrap();
//! let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("kernels.ptx");
//! std::fs::write(&out, &ptx.text).unwrap();
//! println!("cargo:rerun-if-changed=kernels/src");
//! // then in the crate: include_str!(concat!(env!("OUT_DIR"), "/kernels.ptx"))
//! ```
//!
//! Needs the rustup components `rust-src`, `llvm-tools` and `llvm-bitcode-linker`
//! ([`ensure_components`] installs them). Assembling needs `ptxas`: from `SYMMEM_PTXAS`,
//! `PATH`, or the PyPI wheel `nvidia-cuda-nvcc-cu12` ([`find_ptxas`]).

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The rustup components the nvptx build needs.
pub const COMPONENTS: [&str; 3] = ["rust-src", "llvm-tools", "llvm-bitcode-linker"];

/// The compilation target for PTX.
pub const TARGET: &str = "nvptx64-nvidia-cuda";

/// What went wrong, with the command and its output when a tool failed.
#[derive(Debug)]
pub enum PtxBuildError {
    /// A tool could not be started.
    Spawn {
        /// The command line.
        command: String,
        /// The OS error.
        error: std::io::Error,
    },
    /// A tool ran and failed.
    Failed {
        /// The command line.
        command: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// Its standard error (and output), trimmed.
        output: String,
    },
    /// The build succeeded but no PTX file appeared where expected.
    Missing(PathBuf),
    /// Reading or writing a file failed.
    Io(PathBuf, std::io::Error),
    /// A `max_threads(N)` marker that is malformed, out of 1..=1024, or names no kernel.
    LaunchBound(String),
}

impl fmt::Display for PtxBuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PtxBuildError::Spawn { command, error } => write!(f, "cannot run `{command}`: {error}"),
            PtxBuildError::Failed {
                command,
                status,
                output,
            } => write!(f, "`{command}` failed ({status}):\n{output}"),
            PtxBuildError::Missing(p) => write!(f, "the PTX build produced no {}", p.display()),
            PtxBuildError::Io(p, e) => write!(f, "{}: {e}", p.display()),
            PtxBuildError::LaunchBound(what) => {
                write!(
                    f,
                    "bad kernel launch bound (max_threads must be 1..=1024): {what}"
                )
            }
        }
    }
}

impl std::error::Error for PtxBuildError {}

/// Runs `cmd`, turning failure into an error that carries the command and its output.
fn run(mut cmd: Command) -> Result<String, PtxBuildError> {
    let command = format!("{cmd:?}");
    let out = cmd.output().map_err(|error| PtxBuildError::Spawn {
        command: command.clone(),
        error,
    })?;
    let mut text = String::from_utf8_lossy(&out.stderr).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stdout));
    if out.status.success() {
        Ok(text)
    } else {
        Err(PtxBuildError::Failed {
            command,
            status: out.status,
            output: text.trim().to_string(),
        })
    }
}

/// Installs the rustup components of [`COMPONENTS`] for the toolchain in use (a no-op
/// when present). Fails with rustup's message when they cannot be installed.
pub fn ensure_components() -> Result<(), PtxBuildError> {
    let mut cmd = Command::new("rustup");
    cmd.args(["component", "add"]).args(COMPONENTS);
    run(cmd).map(drop)
}

/// A built PTX module.
#[derive(Debug, Clone)]
pub struct Ptx {
    /// Where it was written.
    pub path: PathBuf,
    /// Its text.
    pub text: String,
    /// The `sm_XX` it targets.
    pub arch: String,
}

/// Builds one kernel crate to PTX.
#[derive(Debug, Clone)]
pub struct PtxBuilder {
    crate_dir: PathBuf,
    package: String,
    arch: String,
    target_dir: Option<PathBuf>,
}

impl PtxBuilder {
    /// A builder for the kernel crate in `crate_dir` (its `Cargo.toml` directory) whose
    /// package is named `package` (the PTX file is named after it; a build script of the
    /// crate itself passes `CARGO_PKG_NAME`), targeting `sm_90` unless told otherwise.
    pub fn new(crate_dir: impl AsRef<Path>, package: &str) -> Self {
        PtxBuilder {
            crate_dir: crate_dir.as_ref().to_path_buf(),
            package: package.to_string(),
            arch: "sm_90".into(),
            target_dir: None,
        }
    }

    /// The GPU architecture, e.g. `sm_80` or `sm_90`. PTX for `sm_90` does not assemble
    /// for `sm_80`; PTX for `sm_80` also JIT-loads on `sm_90`.
    pub fn arch(mut self, arch: &str) -> Self {
        self.arch = arch.to_string();
        self
    }

    /// The nested build's target directory (default: `$OUT_DIR/ptx-<arch>` in a build
    /// script, else `<crate>/target/ptx-<arch>`).
    pub fn target_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.target_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Runs the nested build and returns the PTX.
    pub fn build(&self) -> Result<Ptx, PtxBuildError> {
        let target_dir = self.target_dir.clone().unwrap_or_else(|| {
            let base = std::env::var_os("OUT_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| self.crate_dir.join("target"));
            base.join(format!("ptx-{}", self.arch))
        });
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
        let mut cmd = Command::new(cargo);
        cmd.current_dir(&self.crate_dir)
            .args([
                "rustc",
                "--release",
                "--lib",
                "--crate-type",
                "cdylib",
                "--target",
                TARGET,
                "-Zbuild-std=core",
                "--target-dir",
            ])
            .arg(&target_dir);
        // A build script's cargo passes its own flags and target through the environment;
        // none of them apply to the nvptx build.
        for var in [
            "CARGO_ENCODED_RUSTFLAGS",
            "RUSTFLAGS",
            "CARGO_BUILD_TARGET",
            "CARGO_TARGET_DIR",
            "CARGO_BUILD_RUSTFLAGS",
            "CARGO_MAKEFLAGS",
            "RUSTC_WORKSPACE_WRAPPER",
            "__CARGO_FIX_PLZ",
        ] {
            cmd.env_remove(var);
        }
        cmd.env("RUSTC_BOOTSTRAP", "1")
            .env("RUSTFLAGS", format!("-C target-cpu={}", self.arch));
        run(cmd)?;
        let path = target_dir
            .join(TARGET)
            .join("release")
            .join(format!("{}.ptx", self.package.replace('-', "_")));
        let text =
            std::fs::read_to_string(&path).map_err(|_| PtxBuildError::Missing(path.clone()))?;
        // Written back, so that the file (which ptxas assembles) is the PTX returned.
        let moved = with_launch_bounds(&state_to_constant_bank(&text))?;
        if moved != text {
            std::fs::write(&path, &moved).map_err(|e| PtxBuildError::Io(path.clone(), e))?;
        }
        let text = moved;
        Ok(Ptx {
            path,
            text,
            arch: self.arch.clone(),
        })
    }
}

/// The device state's symbol (`symmem_device::state::STATE_SYMBOL`; a test checks that
/// they agree).
pub const STATE_SYMBOL: &str = "SYMMEM_DEVICE_STATE";

/// `ptx` with the device state's declaration moved from the `.global` state space, where
/// the compiler puts every Rust static, to `.const`: kernels then read the state through
/// the constant cache, which system fences do not empty (symmem-device reads it only by
/// name, with `ld.const`). PTX without the state (a crate that does not use
/// symmem-device) is returned unchanged.
pub fn state_to_constant_bank(ptx: &str) -> String {
    let mut out = String::with_capacity(ptx.len());
    for line in ptx.split_inclusive('\n') {
        let moved = line
            .trim_start()
            .strip_prefix(".visible .global ")
            .filter(|rest| {
                rest.split_whitespace()
                    .any(|word| word.split(['[', ';']).next() == Some(STATE_SYMBOL))
            });
        match moved {
            Some(rest) => {
                let indent = &line[..line.len() - line.trim_start().len()];
                out.push_str(indent);
                out.push_str(".visible .const ");
                out.push_str(rest);
            }
            None => out.push_str(line),
        }
    }
    out
}

/// The most threads per block of a kernel that declares no `max_threads(N)`
/// (`symmem_device::MAX_THREADS`; a test checks that they agree).
pub const MAX_THREADS: u32 = 1024;

/// The prefix of the marker globals of kernels declared `max_threads(N)`
/// (`symmem_device::MAX_THREADS_SYMBOL_PREFIX`).
pub const MAX_THREADS_SYMBOL_PREFIX: &str = "SYMMEM_MAX_THREADS_";

/// `ptx` with a `.maxntid N, 1, 1` directive on every `.entry`: `N` from the entry's
/// marker global (`SYMMEM_MAX_THREADS_<entry> = N`, which `kernel!` emits for
/// `max_threads(N)`), else [`MAX_THREADS`]. ptxas then gives each kernel the registers
/// that `N` threads per block can have (64 at 1024, up to 255 at 256 or fewer), so every
/// launch within the bound has the registers it needs. A directive already there is kept;
/// a marker naming no entry, or a bound outside 1..=1024, is an error.
pub fn with_launch_bounds(ptx: &str) -> Result<String, PtxBuildError> {
    let mut bounds = std::collections::HashMap::new();
    for line in ptx.lines() {
        let Some(at) = line.find(MAX_THREADS_SYMBOL_PREFIX) else {
            continue;
        };
        if !line.trim_start().starts_with(".visible .global") {
            continue;
        }
        let rest = &line[at + MAX_THREADS_SYMBOL_PREFIX.len()..];
        let bad = || PtxBuildError::LaunchBound(line.trim().to_string());
        let (entry, value) = rest.split_once('=').ok_or_else(bad)?;
        let n = marker_value(value).ok_or_else(bad)?;
        if !(1..=MAX_THREADS).contains(&n) {
            return Err(bad());
        }
        // `NAME[4]` when the compiler wrote the u32 as bytes.
        let entry = entry.split('[').next().unwrap_or_default().trim();
        bounds.insert(entry.to_string(), n);
    }
    let mut out = String::with_capacity(ptx.len() + 64 * 32);
    let mut pending: Option<String> = None;
    for line in ptx.split_inclusive('\n') {
        let t = line.trim();
        if let Some(name) = t
            .split(".entry ")
            .nth(1)
            .filter(|_| t.starts_with(".visible .entry ") || t.starts_with(".entry "))
        {
            pending = Some(
                name.split(['(', ' '])
                    .next()
                    .unwrap_or_default()
                    .to_string(),
            );
        } else if t.starts_with(".maxntid") {
            // Already bounded (PTX processed before, then reused by the nested build).
            if let Some(name) = pending.take() {
                bounds.remove(&name);
            }
        } else if t == "{" {
            if let Some(name) = pending.take() {
                let n = bounds.remove(&name).unwrap_or(MAX_THREADS);
                out.push_str(&format!(".maxntid {n}, 1, 1\n"));
            }
        }
        out.push_str(line);
    }
    match bounds.into_keys().next() {
        Some(orphan) => Err(PtxBuildError::LaunchBound(format!(
            "{MAX_THREADS_SYMBOL_PREFIX}{orphan} names no .entry"
        ))),
        None => Ok(out),
    }
}

/// The u32 initializer of a marker global: `64;` (`.u32`), or the little-endian bytes
/// `{64, 0, 0, 0};` or `{64};` (`.b8 NAME[4]`, trailing zeros left out).
fn marker_value(init: &str) -> Option<u32> {
    let init = init.trim().trim_end_matches(';').trim();
    match init.strip_prefix('{').and_then(|b| b.strip_suffix('}')) {
        Some(bytes) => {
            let bytes: Vec<u8> = bytes
                .split(',')
                .map(|b| b.trim().parse().ok())
                .collect::<Option<_>>()?;
            (bytes.len() <= 4).then(|| {
                bytes
                    .iter()
                    .rev()
                    .fold(0u32, |n, &b| (n << 8) | u32::from(b))
            })
        }
        None => init.parse().ok(),
    }
}

/// The architecture kernel crates embed: `sm_80` PTX assembles for the A100 and JIT-loads
/// on every later GPU (H100, H200), so one embedded module serves all of them.
pub const EMBED_ARCH: &str = "sm_80";

/// Builds the calling kernel crate (the package whose build script this is) to PTX and
/// writes the files [`symmem_device::embedded_ptx!`] reads into `OUT_DIR`. Call it as the
/// whole `main` of a kernel crate's `build.rs`.
///
/// Where the program being built can run kernels on GPU PEs (symmem's `cuda` feature, on
/// by default, which turns on `symmem-device/cuda`), or `SYMMEM_REQUIRE_PTX=1` is set,
/// the rustup components the nvptx build needs are installed first when missing (a cargo
/// warning says so), and a PTX build that still fails fails the crate's build with an
/// error naming the missing components and the `rustup component add` command. Otherwise
/// (a build for CPU PEs only) the crate still builds; the reason is embedded instead and `Runtime::load_module` reports it on a GPU
/// PE. Set `SYMMEM_SKIP_PTX=1` to skip the nested build on purpose (CPU PEs only; the
/// reason then says so); docs.rs builds (`DOCS_RS` set) skip it too.
///
/// [`symmem_device::embedded_ptx!`]: https://docs.rs/symmem-device
pub fn embed_from_build_script() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("run from a build script"));
    let write = |name: &str, text: &str| {
        std::fs::write(out.join(name), text)
            .unwrap_or_else(|e| panic!("writing {}: {e}", out.join(name).display()))
    };
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-env-changed=SYMMEM_SKIP_PTX");
    println!("cargo:rerun-if-env-changed=SYMMEM_REQUIRE_PTX");
    println!("cargo:rerun-if-env-changed=DEP_SYMMEM_DEVICE_CUDA");
    println!("cargo:rerun-if-env-changed=DOCS_RS");
    let crate_dir =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run from a build script"));
    let package = std::env::var("CARGO_PKG_NAME").expect("run from a build script");
    // The nested nvptx build of this very crate runs this script again: embed nothing there.
    let target = std::env::var("TARGET").unwrap_or_default();
    let result = if target.starts_with("nvptx") {
        Err("this is the nvptx build itself".to_string())
    } else if std::env::var_os("SYMMEM_SKIP_PTX").is_some_and(|v| v == "1") {
        Err("SYMMEM_SKIP_PTX=1 was set when the kernel crate was built".to_string())
    } else if std::env::var_os("DOCS_RS").is_some() {
        // docs.rs builds documentation only, with no nvptx toolchain.
        Err("built by docs.rs (DOCS_RS is set), which builds no PTX".to_string())
    } else {
        // The device crate's sources are inputs too: its build script names them
        // (`DEP_SYMMEM_DEVICE_SRC`, to every crate that depends on it directly).
        if let Some(device_src) = std::env::var_os("DEP_SYMMEM_DEVICE_SRC") {
            println!(
                "cargo:rerun-if-changed={}",
                Path::new(&device_src).display()
            );
        }
        if ptx_required().is_some() {
            install_missing_components(&out);
        }
        PtxBuilder::new(&crate_dir, &package)
            .arch(EMBED_ARCH)
            .target_dir(shared_ptx_dir(&out).join(EMBED_ARCH))
            .build()
            .map_err(|e| e.to_string())
    };
    let sass = match &result {
        Ok(ptx) => std::thread::scope(|scope| {
            // The check assemblies run beside the embedded one: ptxas uses one core.
            let checks = scope.spawn(|| check_archs(ptx, &out));
            let sass = embed_sass(ptx, &out);
            checks.join().expect("the check assembly thread panicked");
            sass
        }),
        Err(_) => String::new(),
    };
    write("symmem-sass-arch", &sass);
    match result {
        Ok(ptx) => {
            write("symmem.ptx", &ptx.text);
            write("symmem-ptx-arch", &ptx.arch);
            write("symmem-ptx-missing", "");
        }
        Err(why) => {
            if let Some(required) = ptx_required().filter(|_| !target.starts_with("nvptx")) {
                // Skipping on purpose opts out of the `cuda` feature's requirement, not of
                // SYMMEM_REQUIRE_PTX's.
                let skipped = std::env::var_os("SYMMEM_SKIP_PTX").is_some_and(|v| v == "1");
                if !(skipped && required == Required::ByCudaFeature) {
                    panic!(
                        "{}",
                        failure_report(&package, required, &why, missing_components())
                    );
                }
            }
            let why = format!(
                "the kernel crate was built without PTX: {}",
                why.lines().take(20).collect::<Vec<_>>().join("\n")
            );
            if !target.starts_with("nvptx") {
                println!(
                    "cargo:warning=no PTX embedded (GPU PEs cannot load these kernels): {}",
                    why.lines().next().unwrap_or("")
                );
            }
            write("symmem.ptx", "");
            // `embedded_ptx!` includes the cubin too: an empty one is "none built".
            write("symmem.cubin", "");
            write("symmem-ptx-arch", EMBED_ARCH);
            write("symmem-ptx-missing", &why);
        }
    }
}

/// With `SYMMEM_SASS_ARCH=sm_XX` set, assembles `ptx` into `out/symmem.cubin` for that
/// architecture, so a GPU of exactly it loads the kernels without the driver's JIT (which
/// takes minutes for a large kernel crate, in every process, until its cache holds the
/// result); returns the architecture, or an empty string when no cubin was built (the file
/// is then empty). A missing ptxas or a failed assembly fails the build under
/// `SYMMEM_REQUIRE_PTX=1`, else is a warning.
fn embed_sass(ptx: &Ptx, out: &Path) -> String {
    println!("cargo:rerun-if-env-changed=SYMMEM_SASS_ARCH");
    println!("cargo:rerun-if-env-changed=SYMMEM_PTXAS");
    let cubin = out.join("symmem.cubin");
    std::fs::write(&cubin, b"").unwrap_or_else(|e| panic!("writing {}: {e}", cubin.display()));
    let arch = std::env::var("SYMMEM_SASS_ARCH").unwrap_or_default();
    if arch.is_empty() {
        return String::new();
    }
    let built = if !is_sm_arch(&arch) {
        Err(format!(
            "SYMMEM_SASS_ARCH={arch:?} is not an architecture like sm_90"
        ))
    } else if let Some(ptxas) = find_ptxas() {
        let cache = shared_ptx_dir(out).join("sass");
        assemble_cached(&ptxas, ptx, &arch, Some(&cubin), &cache).map_err(|e| e.to_string())
    } else {
        Err("ptxas was not found (set SYMMEM_PTXAS or pip install nvidia-cuda-nvcc-cu12)".into())
    };
    match built {
        Ok(_) => arch,
        Err(why) => {
            if let Some(required) = ptx_required() {
                panic!("{required} and the {arch} cubin was not built: {why}");
            }
            println!("cargo:warning=no {arch} cubin embedded (GPU PEs JIT-compile the PTX): {why}");
            std::fs::write(&cubin, b"")
                .unwrap_or_else(|e| panic!("writing {}: {e}", cubin.display()));
            String::new()
        }
    }
}

/// With `SYMMEM_PTX_CHECK_ARCHS=sm_80,...` set, assembles `ptx` for each of those
/// architectures into the cubin cache without embedding anything: the PTX test
/// (`tests/device/tests/ptx.rs`) checks through the same cache that the PTX assembles for
/// every GPU it must run on, so the assembly it needs runs here, beside the embedded one,
/// while cargo builds other crates. A failed assembly fails the build under
/// `SYMMEM_REQUIRE_PTX=1`, else is a warning (the PTX test then fails on it).
fn check_archs(ptx: &Ptx, out: &Path) {
    println!("cargo:rerun-if-env-changed=SYMMEM_PTX_CHECK_ARCHS");
    let archs = std::env::var("SYMMEM_PTX_CHECK_ARCHS").unwrap_or_default();
    let Some(ptxas) = find_ptxas() else { return };
    let cache = shared_ptx_dir(out).join("sass");
    for arch in archs.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        let checked = if !is_sm_arch(arch) {
            Err(format!(
                "SYMMEM_PTX_CHECK_ARCHS names {arch:?}, not an architecture like sm_80"
            ))
        } else {
            assemble_cached(&ptxas, ptx, arch, None, &cache).map_err(|e| e.to_string())
        };
        if let Err(why) = checked {
            if let Some(required) = ptx_required() {
                panic!("{required} and the PTX does not assemble for {arch}: {why}");
            }
            println!("cargo:warning=the PTX does not assemble for {arch}: {why}");
        }
    }
}

/// Why a kernel crate whose PTX or cubin cannot be built must fail its build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Required {
    /// `SYMMEM_REQUIRE_PTX=1` (CI, the GPU bundle).
    ByVariable,
    /// The program can run kernels on GPU PEs: `symmem-device`'s `cuda` feature is on
    /// (symmem's `cuda` feature turns it on), which its build script hands this one as
    /// `DEP_SYMMEM_DEVICE_CUDA`.
    ByCudaFeature,
}

impl fmt::Display for Required {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Required::ByVariable => "SYMMEM_REQUIRE_PTX=1",
            Required::ByCudaFeature => {
                "symmem's `cuda` feature is on (GPU PEs load this PTX; symmem-device/cuda)"
            }
        })
    }
}

/// Whether a kernel crate whose PTX or cubin cannot be built fails the build instead of
/// warning, and why.
fn ptx_required() -> Option<Required> {
    if std::env::var_os("SYMMEM_REQUIRE_PTX").is_some_and(|v| v == "1") {
        Some(Required::ByVariable)
    } else if std::env::var_os("DEP_SYMMEM_DEVICE_CUDA").is_some_and(|v| v == "1") {
        Some(Required::ByCudaFeature)
    } else {
        None
    }
}

/// Where the PTX is required (see [`embed_from_build_script`]), installs the rustup
/// components of [`COMPONENTS`] that the toolchain lacks, so that a first build on a fresh
/// machine (rustup's default profile has none of them) just works; says so in a cargo
/// warning. One build script at a time (a lock file beside the shared PTX build), since
/// kernel crates build in parallel. When rustup cannot list or install them, nothing
/// happens here: the PTX build then fails and its error names what is missing.
fn install_missing_components(out: &Path) {
    let dir = shared_ptx_dir(out);
    let lock = std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::File::create(dir.join("rustup-components.lock")));
    // Held until the end of this function; without a lock file, install unlocked.
    let _held = lock.and_then(|f| f.lock().map(|()| f));
    let Ok(missing) = missing_components() else {
        return;
    };
    if missing.is_empty() {
        return;
    }
    match ensure_components() {
        Ok(()) => println!(
            "cargo:warning=installed the rustup components {} (symmem-ptx-build needs them to build kernels to PTX for GPU PEs; SYMMEM_SKIP_PTX=1 skips that)",
            missing.join(", ")
        ),
        Err(e) => println!(
            "cargo:warning=could not install the rustup components {}: {}",
            missing.join(", "),
            e.to_string().lines().next().unwrap_or("")
        ),
    }
}

/// The components of [`COMPONENTS`] missing from the toolchain this build runs with
/// (`rustup component list --installed`), or why that could not be learnt (no rustup).
pub fn missing_components() -> Result<Vec<&'static str>, String> {
    let host = std::env::var("HOST").unwrap_or_default();
    let mut cmd = Command::new("rustup");
    cmd.args(["component", "list", "--installed"]);
    run(cmd)
        .map(|listed| missing_from(&listed, &host))
        .map_err(|e| e.to_string())
}

/// The components of [`COMPONENTS`] that `installed` (rustup's list: one a line, host
/// components suffixed with the `host` triple, e.g. `llvm-tools-x86_64-unknown-linux-gnu`)
/// does not name.
fn missing_from(installed: &str, host: &str) -> Vec<&'static str> {
    COMPONENTS
        .into_iter()
        .filter(|c| {
            let hosted = format!("{c}-{host}");
            !installed
                .lines()
                .map(str::trim)
                .any(|line| line == *c || line == hosted)
        })
        .collect()
}

/// The first line of a failed build's output (the command) and its last 15 (the error).
fn excerpt(output: &str) -> String {
    let lines: Vec<&str> = output.lines().collect();
    let tail = lines.len().saturating_sub(15).max(1);
    let mut kept = lines[..1.min(lines.len())].to_vec();
    if tail > 1 {
        kept.push("…");
    }
    kept.extend(&lines[tail.min(lines.len())..]);
    kept.join("\n")
}

/// The build error of kernel crate `package` whose PTX build failed (`why`) while
/// `required`: what is missing and how to install it, or the build's own error when
/// nothing is missing, and how to opt out.
fn failure_report(
    package: &str,
    required: Required,
    why: &str,
    missing: Result<Vec<&str>, String>,
) -> String {
    let toolchain = std::env::var("RUSTUP_TOOLCHAIN")
        .map(|t| format!(" of toolchain {t}"))
        .unwrap_or_default();
    let fix = match missing {
        Ok(missing) if !missing.is_empty() => format!(
            "missing rustup components{toolchain}: {}\ninstall them with:\n    rustup component add {}\n",
            missing.join(", "),
            missing.join(" ")
        ),
        Ok(_) => format!(
            "the rustup components it needs ({}) are installed: the kernel crate itself failed to compile for nvptx64\n",
            COMPONENTS.join(", ")
        ),
        Err(e) => format!(
            "the nvptx build needs the rustup components {} and rustup could not list them ({e}); with rustup:\n    rustup component add {}\n",
            COMPONENTS.join(", "),
            COMPONENTS.join(" ")
        ),
    };
    let opt_out = match required {
        Required::ByVariable => "unset SYMMEM_REQUIRE_PTX",
        Required::ByCudaFeature => "build without symmem's `cuda` feature",
    };
    format!(
        "the PTX of kernel crate `{package}` could not be built, and {required}.\n{fix}\
         To build for CPU PEs only, set SYMMEM_SKIP_PTX=1 (or {opt_out}).\n\
         The nvptx build said:\n{}",
        excerpt(why)
    )
}

/// Whether `arch` names a GPU architecture the way ptxas takes it (`sm_90`).
fn is_sm_arch(arch: &str) -> bool {
    arch.strip_prefix("sm_")
        .is_some_and(|n| n.parse::<u32>().is_ok())
}

/// [`assemble_to`] through a cache of cubins in `cache`, keyed by the PTX, the
/// architecture, the register cap and the ptxas used: the debug and release builds (and
/// builds with other features) of a kernel crate embed the same PTX, and ptxas takes
/// minutes on a large one. A cache entry is written whole (a temporary file, then a
/// rename), so a concurrent or interrupted build never reads half a cubin. The cubin is
/// copied to `out` when one is given; an entry in the cache shows that exactly this PTX
/// assembled for `arch` with this ptxas.
pub fn assemble_cached(
    ptxas: &Path,
    ptx: &Ptx,
    arch: &str,
    out: Option<&Path>,
    cache: &Path,
) -> Result<(), PtxBuildError> {
    use std::hash::{Hash, Hasher};
    let mut key = std::collections::hash_map::DefaultHasher::new();
    // An upgraded ptxas at the same path is another key: its size and time differ.
    let tool = std::fs::metadata(ptxas).map_err(|e| PtxBuildError::Io(ptxas.to_path_buf(), e))?;
    (&ptx.text, arch, ptxas, tool.len(), tool.modified().ok()).hash(&mut key);
    let entry = cache.join(format!("{arch}-{:016x}.cubin", key.finish()));
    if !entry.is_file() {
        std::fs::create_dir_all(cache).map_err(|e| PtxBuildError::Io(cache.to_path_buf(), e))?;
        let partial = cache.join(format!(
            "{}.{}.partial",
            entry.file_name().unwrap_or_default().to_string_lossy(),
            std::process::id()
        ));
        assemble_to(ptxas, ptx, arch, &partial)?;
        std::fs::rename(&partial, &entry).map_err(|e| PtxBuildError::Io(entry.clone(), e))?;
    }
    if let Some(out) = out {
        std::fs::copy(&entry, out).map_err(|e| PtxBuildError::Io(out.to_path_buf(), e))?;
    }
    Ok(())
}

/// One nested target directory for every kernel crate of the outer build, so `core` is
/// built once and cubins are shared between profiles and feature sets:
/// `<outer target dir>/symmem-ptx`. `OUT_DIR` is
/// `<target dir>/[<triple>/]<profile>/build/<package>-<hash>/out`; anywhere else (a
/// build script run by hand), `OUT_DIR/ptx`.
fn shared_ptx_dir(out_dir: &Path) -> PathBuf {
    out_dir
        .parent()
        .and_then(Path::parent)
        .filter(|build| build.file_name() == Some("build".as_ref()))
        .and_then(Path::parent)
        .and_then(Path::parent)
        .map_or_else(|| out_dir.join("ptx"), |target| target.join("symmem-ptx"))
}

/// Finds `ptxas`: `$SYMMEM_PTXAS`, then `PATH`, then the `nvidia-cuda-nvcc-cu12` wheel of
/// the `python3` on `PATH`.
pub fn find_ptxas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("SYMMEM_PTXAS").map(PathBuf::from) {
        return p.is_file().then_some(p);
    }
    if let Some(p) = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|d| d.join("ptxas"))
        .find(|p| p.is_file())
    {
        return Some(p);
    }
    let out = Command::new("python3")
        .args(["-c", "import nvidia.cuda_nvcc, os; print(os.path.join(list(nvidia.cuda_nvcc.__path__)[0], 'bin', 'ptxas'))"])
        .output()
        .ok()?;
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    (out.status.success() && p.is_file()).then_some(p)
}

/// Assembles `ptx` with `ptxas` for its architecture; returns ptxas's messages.
pub fn assemble(ptxas: &Path, ptx: &Ptx) -> Result<String, PtxBuildError> {
    assemble_to(ptxas, ptx, &ptx.arch, Path::new("/dev/null"))
}

/// Assembles `ptx` with `ptxas` into a cubin for `arch` (`sm_90`: PTX built for an older
/// architecture assembles for a newer one) at `out`, each kernel with the registers its
/// `.maxntid` allows ([`with_launch_bounds`]); returns ptxas's messages.
pub fn assemble_to(
    ptxas: &Path,
    ptx: &Ptx,
    arch: &str,
    out: &Path,
) -> Result<String, PtxBuildError> {
    let mut cmd = Command::new(ptxas);
    cmd.arg(format!("-arch={arch}"))
        .arg(&ptx.path)
        .arg("-o")
        .arg(out);
    run(cmd)
}

#[cfg(test)]
mod tests {
    #[test]
    fn missing_components_are_named_from_rustups_list() {
        let all = "cargo-x86_64-unknown-linux-gnu\nllvm-bitcode-linker-x86_64-unknown-linux-gnu\nllvm-tools-x86_64-unknown-linux-gnu\nrust-src\nrust-std-x86_64-unknown-linux-gnu\n";
        let host = "x86_64-unknown-linux-gnu";
        assert!(missing_from(all, host).is_empty());
        let no_linker =
            "llvm-tools-x86_64-unknown-linux-gnu\nrust-src\nrust-std-x86_64-unknown-linux-gnu\n";
        assert_eq!(missing_from(no_linker, host), ["llvm-bitcode-linker"]);
        // Another host's components are not this one's.
        assert_eq!(missing_from(all, "aarch64-apple-darwin").len(), 2);
        assert_eq!(
            missing_from(
                "llvm-tools-preview\nrust-std-x86_64-unknown-linux-gnu",
                host
            ),
            COMPONENTS
        );
    }

    #[test]
    fn a_long_build_output_keeps_its_command_and_its_error() {
        let out: Vec<String> = (0..40).map(|i| format!("line {i}")).collect();
        let kept = excerpt(&out.join("\n"));
        assert!(kept.starts_with("line 0\n…\nline 25\n"), "{kept}");
        assert!(kept.ends_with("line 39"), "{kept}");
        assert_eq!(excerpt("only\ntwo"), "only\ntwo");
    }

    #[test]
    fn a_required_ptx_failure_says_what_to_install_and_how_to_opt_out() {
        let text = failure_report(
            "my-kernels",
            Required::ByCudaFeature,
            "error: the `-Zbuild-std` flag requires rust-src",
            Ok(vec!["rust-src", "llvm-bitcode-linker"]),
        );
        for needle in [
            "kernel crate `my-kernels` could not be built",
            "symmem's `cuda` feature is on",
            "missing rustup components",
            "rust-src, llvm-bitcode-linker",
            "rustup component add rust-src llvm-bitcode-linker\n",
            "SYMMEM_SKIP_PTX=1",
            "build without symmem's `cuda` feature",
            "requires rust-src",
        ] {
            assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
        }
        let text = failure_report("k", Required::ByVariable, "error[E0425]", Ok(vec![]));
        assert!(text.contains("SYMMEM_REQUIRE_PTX=1"), "{text}");
        assert!(text.contains("failed to compile for nvptx64"), "{text}");
        assert!(text.contains("unset SYMMEM_REQUIRE_PTX"), "{text}");
        let text = failure_report("k", Required::ByVariable, "x", Err("no rustup".into()));
        assert!(
            text.contains("rustup component add rust-src llvm-tools llvm-bitcode-linker"),
            "{text}"
        );
    }

    use super::*;

    #[test]
    fn kernel_crates_share_one_nested_target_dir_per_outer_target_dir() {
        let shared = |out: &str| shared_ptx_dir(Path::new(out));
        assert_eq!(
            shared("/w/target/debug/build/k-0123/out"),
            Path::new("/w/target/symmem-ptx")
        );
        assert_eq!(
            shared("/w/target/release/build/k-4567/out"),
            Path::new("/w/target/symmem-ptx")
        );
        assert_eq!(
            shared("/w/target/x86_64-unknown-linux-gnu/debug/build/k-0123/out"),
            Path::new("/w/target/x86_64-unknown-linux-gnu/symmem-ptx")
        );
        assert_eq!(shared("/tmp/out"), Path::new("/tmp/out/ptx"));
    }

    #[test]
    fn the_state_moves_to_the_constant_bank_and_nothing_else_does() {
        // A symbol whose name only starts with the state's stays in `.global`.
        let longer = format!("{STATE_SYMBOL}_2");
        let ptx = format!(
            ".visible .global .align 8 .b8 OTHER[8];\n\
             .visible .global .align 8 .b8 {STATE_SYMBOL}[72] = {{0, 0}};\n\
             .visible .global .align 8 .b8 {longer}[8];\n\
             \tld.const.u32 %r1, [{STATE_SYMBOL}+8];\n"
        );
        assert_eq!(
            state_to_constant_bank(&ptx),
            format!(
                ".visible .global .align 8 .b8 OTHER[8];\n\
                 .visible .const .align 8 .b8 {STATE_SYMBOL}[72] = {{0, 0}};\n\
                 .visible .global .align 8 .b8 {longer}[8];\n\
                 \tld.const.u32 %r1, [{STATE_SYMBOL}+8];\n"
            )
        );
    }

    #[test]
    fn every_entry_gets_its_launch_bound() {
        let ptx = format!(
            ".visible .global .align 4 .b8 {MAX_THREADS_SYMBOL_PREFIX}ping[4] = {{64}};\n\
             .visible .global .align 4 .b8 {MAX_THREADS_SYMBOL_PREFIX}pang[4] = {{0, 1, 0, 0}};\n\
             .visible .entry pang()\n{{\n\tret;\n}}\n\
             .visible .entry ping(\n\t.param .u64 ping_param_0\n)  // @ping\n{{\n\tret;\n}}\n\
             .visible .entry pong()\n{{\n\tret;\n}}\n\
             .visible .entry tuned()\n.maxntid 32, 1, 1\n{{\n\tret;\n}}\n"
        );
        let out = with_launch_bounds(&ptx).unwrap();
        assert!(out.contains(")  // @ping\n.maxntid 64, 1, 1\n{\n"), "{out}");
        assert!(out.contains("pong()\n.maxntid 1024, 1, 1\n{\n"), "{out}");
        assert!(out.contains("tuned()\n.maxntid 32, 1, 1\n{\n"), "{out}");
        assert!(out.contains("pang()\n.maxntid 256, 1, 1\n{\n"), "{out}");
        assert_eq!(out.matches(".maxntid").count(), 4, "{out}");
        // Processing twice (the nested build reuses a processed file) changes nothing.
        assert_eq!(with_launch_bounds(&out).unwrap(), out);
        // A bound out of range, or one naming no kernel, fails the build with the line.
        for bad in [
            format!(".visible .global .align 4 .u32 {MAX_THREADS_SYMBOL_PREFIX}ping = 2048;\n.visible .entry ping()\n{{\n}}\n"),
            format!(".visible .global .align 4 .u32 {MAX_THREADS_SYMBOL_PREFIX}gone = 64;\n.visible .entry ping()\n{{\n}}\n"),
        ] {
            let e = with_launch_bounds(&bad).unwrap_err().to_string();
            assert!(e.contains("max_threads must be 1..=1024"), "{e}");
            assert!(e.contains("2048") || e.contains("gone"), "{e}");
        }
    }
}
