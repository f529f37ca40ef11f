//! Every kernel crate builds to PTX and assembles with ptxas for sm_80 and sm_90, and the
//! PTX has the ordering the design requires.
//!
//! Needs the nvptx toolchain pieces (rustup components, `ptxas` from the PyPI wheel
//! `nvidia-cuda-nvcc-cu12`); `scripts/test-all.sh` installs them and sets
//! `SYMMEM_REQUIRE_PTX=1`, which turns a missing tool into a failure. Without it the test
//! is skipped with the reason printed.

use std::path::{Path, PathBuf};

use symmem_ptx_build::{assemble, find_ptxas, Ptx, PtxBuilder};

const ARCHS: [&str; 2] = ["sm_80", "sm_90"];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The kernel crates: the device crate itself, the test, example and perftest kernels.
fn kernel_crates() -> Vec<PathBuf> {
    [
        "device",
        "tests/kernels",
        "examples/kernels",
        "benches/kernels",
        "runtime/kernels",
    ]
    .iter()
    .map(|c| workspace().join(c))
    .collect()
}

/// The functions of a PTX module: (name, body lines), entries and device functions alike.
fn functions(ptx: &str) -> Vec<(String, Vec<&str>)> {
    let mut out = Vec::new();
    let mut current: Option<(String, Vec<&str>)> = None;
    for line in ptx.lines() {
        let t = line.trim();
        if t.starts_with(".visible .entry")
            || t.starts_with(".visible .func")
            || t.starts_with(".func")
        {
            if let Some(f) = current.take() {
                out.push(f);
            }
            let name = t
                .split_whitespace()
                .last()
                .unwrap_or("")
                .trim_end_matches('(')
                .to_string();
            current = Some((name, Vec::new()));
        } else if let Some((_, body)) = current.as_mut() {
            body.push(t);
        }
    }
    out.extend(current);
    out
}

/// A plain (unordered) data store: what a put's copy compiles to.
fn is_plain_store(line: &str) -> bool {
    line.starts_with("st.")
        && !line.contains(".release")
        && !line.contains(".param")
        && !line.contains(".local")
}

fn check_structure(ptx: &Ptx, crate_dir: &Path) {
    let text = &ptx.text;
    let what = format!("{} ({})", crate_dir.display(), ptx.arch);
    let globals = text
        .matches(".visible .global .align 8 .b8 SYMMEM_DEVICE_STATE[72]")
        .count();
    assert_eq!(
        globals, 1,
        "{what}: SYMMEM_DEVICE_STATE must be defined exactly once"
    );
    for line in text.lines().map(str::trim) {
        // The proxy ring's ticket counter: GPU scope on purpose (checked where it belongs
        // by `check_proxy_path`).
        if line.starts_with(TICKET_RMW) {
            continue;
        }
        if line.starts_with("atom.") || line.starts_with("red.") {
            assert!(
                line.contains(".sys")
                    && (line.contains(".acq_rel")
                        || line.contains(".release")
                        || line.contains(".acquire")),
                "{what}: RMW without explicit semantics at system scope: {line}"
            );
        }
        assert!(
            !line.contains(".volatile"),
            "{what}: volatile access instead of acquire/release: {line}"
        );
    }
    let funcs = functions(text);
    check_proxy_path(&funcs, &what, crate_dir.ends_with("tests/kernels"));
    for (name, body) in funcs {
        let mut signals = 0;
        for (i, line) in body.iter().enumerate() {
            // A release add is only ever a signal; a release store is one in put_signal
            // kernels. The error path (record the error word, then trap) is not a signal.
            let is_signal = line.starts_with("red.release.sys.add.u64")
                || (name.contains("put_signal") && line.starts_with("st.release.sys.u64"));
            let error_path = body[i + 1..].iter().take(3).any(|l| l.starts_with("trap"));
            if !is_signal || error_path {
                continue;
            }
            signals += 1;
            let before = &body[..i];
            let fence = before.iter().rposition(|l| l.starts_with("fence.sc.sys"));
            let store = before.iter().rposition(|l| is_plain_store(l));
            assert!(
                fence.is_some() && fence > store,
                "{what}: in {name}, signal `{line}` is not preceded by fence.sc.sys after the last data store"
            );
        }
        if name.contains("put_signal") {
            assert!(signals > 0, "{what}: {name} has no signal instruction");
        }
        if name.contains("wait") {
            assert!(
                body.iter().any(|l| l.starts_with("ld.acquire.sys")),
                "{what}: {name} waits without ld.acquire.sys"
            );
        }
    }
}

/// The one RMW allowed below system scope: the proxy ring's ticket counter, which only
/// the GPU's own threads update, in mapped host memory (where system-scope RMWs are atomic
/// only with `hostNativeAtomicSupported`).
const TICKET_RMW: &str = "atom.acq_rel.gpu.add.u64";

/// The proxy ring's producer (`ops::remote::submit`, kept out of line) takes its ticket
/// with [`TICKET_RMW`], waits for its slot and result with `ld.acquire.sys.u64` and
/// publishes with `st.release.sys.u64`: the host's proxy thread observes the ring at
/// system scope. The GPU-scope ticket RMW appears nowhere else. `required`: the crate's
/// kernels use remote ops, so the path must be there.
fn check_proxy_path(funcs: &[(String, Vec<&str>)], what: &str, required: bool) {
    let mut found = false;
    // The producers: `submit`, and `quiet`, which submits its own request.
    let producer = |n: &str| n.contains("remote6submit") || n.contains("remote5quiet");
    for (name, body) in funcs.iter().filter(|(n, _)| !producer(n)) {
        assert!(
            !body.iter().any(|l| l.starts_with(TICKET_RMW)),
            "{what}: {name} has a GPU-scope RMW ({TICKET_RMW}) outside the proxy producer"
        );
    }
    // Definitions only: a forward declaration's "body" is its parameter list.
    let definitions = funcs
        .iter()
        .filter(|(n, b)| n.contains("remote6submit") && b.contains(&"{"));
    for (name, body) in definitions {
        found = true;
        for needed in [TICKET_RMW, "ld.acquire.sys.u64", "st.release.sys.u64"] {
            assert!(
                body.iter().any(|l| l.starts_with(needed)),
                "{what}: the proxy producer {name} has no {needed}"
            );
        }
    }
    assert!(
        found || !required,
        "{what}: no proxy producer (ops::remote::submit) in the PTX"
    );
}

fn fake_ptx(body: &str) -> Ptx {
    Ptx {
        path: PathBuf::from("fake.ptx"),
        text: format!(".visible .global .align 8 .b8 SYMMEM_DEVICE_STATE[72];\n.visible .entry k_put_signal(\n{body}"),
        arch: "sm_90".into(),
    }
}

#[test]
fn the_checks_accept_a_fenced_signal() {
    check_structure(
        &fake_ptx("st.u64 [%rd1], %rd2;\nfence.sc.sys;\nred.release.sys.add.u64 [%rd3], %rd4;"),
        Path::new("fake"),
    );
}

#[test]
#[should_panic(expected = "not preceded by fence.sc.sys")]
fn the_checks_reject_a_signal_after_an_unfenced_store() {
    check_structure(
        &fake_ptx("fence.sc.sys;\nst.u64 [%rd1], %rd2;\nst.release.sys.u64 [%rd3], %rd4;"),
        Path::new("fake"),
    );
}

#[test]
#[should_panic(expected = "without explicit semantics")]
fn the_checks_reject_a_gpu_scope_relaxed_atomic() {
    check_structure(
        &fake_ptx("atom.global.add.u64 %rd1, [%rd2], %rd3;"),
        Path::new("fake"),
    );
}

#[test]
fn every_kernel_crate_assembles_for_sm80_and_sm90_with_the_required_ordering() {
    let required = std::env::var("SYMMEM_REQUIRE_PTX").is_ok_and(|v| v == "1");
    let Some(ptxas) = find_ptxas() else {
        assert!(!required, "SYMMEM_REQUIRE_PTX=1 but ptxas was not found (set SYMMEM_PTXAS or install nvidia-cuda-nvcc-cu12)");
        eprintln!(
            "skipped: ptxas not found (pip install nvidia-cuda-nvcc-cu12, or set SYMMEM_PTXAS)"
        );
        return;
    };
    if let Err(e) = symmem_ptx_build::ensure_components() {
        assert!(
            !required,
            "SYMMEM_REQUIRE_PTX=1 but the nvptx components are missing: {e}"
        );
        eprintln!("skipped: cannot install the nvptx toolchain components: {e}");
        return;
    }
    let target_root = workspace().join("target/ptx-test");
    for arch in ARCHS {
        for dir in kernel_crates() {
            let ptx = PtxBuilder::new(&dir)
                .arch(arch)
                .target_dir(target_root.join(arch))
                .build()
                .unwrap_or_else(|e| panic!("building {} for {arch}: {e}", dir.display()));
            assert!(
                ptx.text.contains(&format!(".target {arch}")),
                "{}",
                ptx.path.display()
            );
            assemble(&ptxas, &ptx)
                .unwrap_or_else(|e| panic!("ptxas {arch} {}: {e}", ptx.path.display()));
            check_structure(&ptx, &dir);
            eprintln!(
                "ok: {} for {arch}: {} entry points",
                dir.display(),
                ptx.text.matches(".entry").count()
            );
        }
    }
}
