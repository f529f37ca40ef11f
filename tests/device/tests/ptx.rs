//! The PTX every kernel crate embeds (what GPU PEs load: `sm_80` PTX, JIT-loaded or
//! assembled on later GPUs) assembles with ptxas for sm_80 and sm_90, and has the ordering
//! the design requires: AMOs relaxed at system scope, each signal one `fence.sc.sys` then a
//! relaxed store or add, waits that acquire at system scope.
//!
//! The kernel crates' build scripts build the PTX (`symmem_ptx_build::embed_from_build_script`);
//! this test checks what they embedded rather than building every crate again. It needs
//! `ptxas` from the PyPI wheel `nvidia-cuda-nvcc-cu12` and PTX in the build (the nvptx
//! rustup components); `scripts/test-all.sh` installs both and sets `SYMMEM_REQUIRE_PTX=1`,
//! which turns a missing tool or PTX into a failure. Without it the test is skipped with the
//! reason printed.

use std::path::{Path, PathBuf};

use symmem::device::EmbeddedPtx;
use symmem_ptx_build::{assemble_cached, find_ptxas, Ptx, EMBED_ARCH};

/// The GPUs the embedded PTX must assemble for: the A100 and the H100/H200.
const ARCHS: [&str; 2] = ["sm_80", "sm_90"];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The kernel crates' embedded PTX: the test, example, perftest and runtime kernels (every
/// device function a kernel uses is compiled into one of them).
fn embedded() -> [(&'static str, &'static EmbeddedPtx); 4] {
    [
        ("tests/kernels", &symmem_test_kernels::PTX),
        ("examples/kernels", &symmem_example_kernels::PTX),
        ("benches/kernels", &symmem_bench_kernels::PTX),
        ("runtime/kernels", &symmem_runtime_kernels::PTX),
    ]
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
    let states = text
        .matches(".visible .const .align 8 .b8 SYMMEM_DEVICE_STATE[80]")
        .count();
    assert_eq!(
        states, 1,
        "{what}: SYMMEM_DEVICE_STATE must be defined exactly once, in the constant bank"
    );
    assert!(
        !text.contains(".global .align 8 .b8 SYMMEM_DEVICE_STATE"),
        "{what}: SYMMEM_DEVICE_STATE is also declared in .global"
    );
    for line in text.lines().map(str::trim) {
        // The proxy ring's ticket counter: GPU scope on purpose (checked where it belongs
        // by `check_proxy_path`).
        if line.starts_with(TICKET_RMW) {
            continue;
        }
        // AMOs and signal adds are relaxed at system scope: ordering comes from fence and
        // quiet (and a signal's own fence), never from a barrier inside every AMO. The
        // block-scope atomics (`block_fetch_add`…) are relaxed at CTA scope by design.
        if line.starts_with("atom.") || line.starts_with("red.") {
            assert!(
                (line.contains(".sys") || line.starts_with("atom.relaxed.cta."))
                    && line.contains(".relaxed"),
                "{what}: RMW that is not relaxed at system scope (AMOs are relaxed; order with fence/quiet): {line}"
            );
        }
        assert!(
            !line.contains(".volatile"),
            "{what}: volatile access instead of relaxed/acquire/release: {line}"
        );
    }
    let funcs = functions(text);
    check_proxy_path(&funcs, &what, crate_dir.ends_with("tests/kernels"));
    check_panic_record(&funcs, &what);
    check_wait_record(&funcs, &what, crate_dir.ends_with("tests/kernels"));
    for (name, body) in funcs {
        if name.contains("put_signal") {
            check_signals(&what, &name, &body);
        }
        if name.contains("wait") {
            check_wait(&what, &name, &body);
        }
    }
}

/// The panic handler records where a kernel panicked before it traps: it claims the error
/// record (a system-scope CAS), writes the location, block and thread with relaxed
/// system-scope stores (words and bytes), fences at system scope and publishes the error
/// word with a release store. Every module with a panic path has it.
fn check_panic_record(funcs: &[(String, Vec<&str>)], what: &str) {
    if !funcs
        .iter()
        .any(|(name, _)| name.contains("rust_begin_unwind"))
    {
        return;
    }
    // The definition, not its forward declaration (also parsed as a function).
    let (_, body) = funcs
        .iter()
        .filter(|(name, _)| name.contains("record_panic"))
        .max_by_key(|(_, body)| body.len())
        .unwrap_or_else(|| panic!("{what}: a panic handler but no record_panic"));
    let body = body.join("\n");
    for needle in [
        "%ctaid.x",
        "%tid.x",
        "atom.relaxed.sys.cas.b64",
        "st.relaxed.sys.u32",
        "st.relaxed.sys.u8",
    ] {
        assert!(
            body.contains(needle),
            "{what}: record_panic has no {needle}:\n{body}"
        );
    }
    // After the last write of the record: a system fence, then the error word's release
    // store, inline or in `arch::fail` (mangled `4fail`).
    let last_write = body.rfind("st.relaxed.sys.u8").unwrap_or(0);
    let tail = &body[last_write..];
    let fence = tail.find("fence.sc.sys");
    let publish = tail.find("st.release.sys.u64").or_else(|| {
        tail.find("call.uni")
            .filter(|&at| tail[at..].contains("4fail"))
    });
    assert!(
        matches!((fence, publish), (Some(f), Some(p)) if f < p),
        "{what}: record_panic must write the record, then fence, then publish the word:\n{body}"
    );
}

/// A slow device wait publishes itself in the PE's wait record (host-mapped memory the
/// host reads while the kernel runs) under a sequence lock, out of line in
/// `symmem_device::stall`: `claim` takes the record with a relaxed system-scope CAS, and
/// `claim`, `refresh` and `release` each store an odd sequence number, fence at system
/// scope, write the fields with relaxed system-scope stores and end with a release store
/// (`release` another, of the owner word). `required`: the crate's kernels wait.
fn check_wait_record(funcs: &[(String, Vec<&str>)], what: &str, required: bool) {
    let body = |name: &str| {
        funcs
            .iter()
            .filter(|(f, _)| f.ends_with(name))
            .max_by_key(|(_, body)| body.len())
            .map(|(_, body)| body.join("\n"))
    };
    let Some(claim) = body("5stall5claim") else {
        assert!(!required, "{what}: device waits but no wait record claim");
        return;
    };
    assert!(
        claim.contains("atom.relaxed.sys.cas.b64"),
        "{what}: the wait record claim has no system-scope CAS:\n{claim}"
    );
    for (name, text) in [
        ("claim", claim.clone()),
        ("refresh", body("5stall7refresh").unwrap_or_default()),
        ("release", body("5stall7release").unwrap_or_default()),
    ] {
        // Positions after `from` of `needle`.
        let after = |from: usize, needle: &str| text[from..].find(needle).map(|at| from + at);
        let odd = text.find("st.relaxed.sys.u64");
        let fence = odd.and_then(|o| after(o, "fence.sc.sys"));
        let fields = fence.and_then(|f| after(f, "st."));
        let even = text.rfind("st.release.sys.u64");
        assert!(
            matches!((fields, even), (Some(w), Some(e)) if w < e),
            "{what}: the wait record's {name} must store the odd sequence, fence, write, then release:\n{text}"
        );
        assert!(
            !text.contains(".volatile") && !text.contains("st.global") && !text.contains("st.b64"),
            "{what}: the wait record's {name} writes host-mapped memory below system scope:\n{text}"
        );
    }
}

/// A signal of a put_signal function: a relaxed system-scope store or add of a u64.
fn is_signal(line: &str) -> bool {
    line.starts_with("st.relaxed.sys.u64") || line.starts_with("red.relaxed.sys.add.u64")
}

/// In a put_signal function every signal comes after exactly one `fence.sc.sys` since the
/// last data store (a release pattern: one system barrier, not a fence and then a release
/// store), and no release store or add stands in for it. The error path (record the error
/// word, then trap) is not a signal.
fn check_signals(what: &str, name: &str, body: &[&str]) {
    let mut signals = 0;
    for (i, line) in body.iter().enumerate() {
        let error_path = body[i + 1..].iter().take(3).any(|l| l.starts_with("trap"));
        if error_path {
            continue;
        }
        assert!(
            !(line.starts_with("st.release.sys") || line.starts_with("red.release.sys")),
            "{what}: in {name}, `{line}`: a signal is one fence then a relaxed store or add, not a release (a second system barrier)"
        );
        if !is_signal(line) {
            continue;
        }
        signals += 1;
        let before = &body[..i];
        let store = before.iter().rposition(|l| is_plain_store(l));
        let after_store = &before[store.map_or(0, |s| s + 1)..];
        let fences = after_store
            .iter()
            .filter(|l| l.starts_with("fence."))
            .count();
        assert!(
            fences >= 1 && after_store.iter().any(|l| l.starts_with("fence.sc.sys")),
            "{what}: in {name}, signal `{line}` is not preceded by fence.sc.sys after the last data store"
        );
        // Two fences in a row between the data and the signal would be a second barrier.
        let last_two_fenced = after_store
            .iter()
            .rev()
            .take_while(|l| !is_signal(l))
            .filter(|l| l.starts_with("fence."))
            .count();
        assert!(
            last_two_fenced <= 1,
            "{what}: in {name}, signal `{line}` follows {last_two_fenced} fences: one is enough"
        );
    }
    assert!(signals > 0, "{what}: {name} has no signal instruction");
}

/// A wait acquires what it waits for at system scope: it has an `ld.acquire.sys` (a
/// single-word wait polls with it; a wait on many words polls relaxed and re-reads the
/// words that hold with it), and no `fence.acq_rel.sys` instead (slower on an H100).
fn check_wait(what: &str, name: &str, body: &[&str]) {
    assert!(
        body.iter().any(|l| l.starts_with("ld.acquire.sys")),
        "{what}: {name} must acquire with ld.acquire.sys"
    );
    assert!(
        !body.iter().any(|l| l.starts_with("fence.acq_rel.sys")),
        "{what}: {name} acquires with fence.acq_rel.sys instead of ld.acquire.sys"
    );
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
        text: format!(".visible .const .align 8 .b8 SYMMEM_DEVICE_STATE[80];\n.visible .entry k_put_signal(\n{body}"),
        arch: "sm_90".into(),
    }
}

#[test]
fn the_build_and_the_device_crate_agree_on_launch_bounds() {
    assert_eq!(symmem_ptx_build::MAX_THREADS, symmem::device::MAX_THREADS);
    assert_eq!(
        symmem_ptx_build::MAX_THREADS_SYMBOL_PREFIX,
        symmem::device::MAX_THREADS_SYMBOL_PREFIX
    );
}

#[test]
fn the_build_moves_the_state_the_device_crate_declares() {
    assert_eq!(
        symmem_ptx_build::STATE_SYMBOL,
        symmem::device::state::STATE_SYMBOL
    );
}

#[test]
fn the_checks_accept_a_fenced_relaxed_signal() {
    check_structure(
        &fake_ptx("st.u64 [%rd1], %rd2;\nfence.sc.sys;\nred.relaxed.sys.add.u64 [%rd3], %rd4;"),
        Path::new("fake"),
    );
}

#[test]
#[should_panic(expected = "not preceded by fence.sc.sys")]
fn the_checks_reject_a_signal_after_an_unfenced_store() {
    check_structure(
        &fake_ptx("fence.sc.sys;\nst.u64 [%rd1], %rd2;\nst.relaxed.sys.u64 [%rd3], %rd4;"),
        Path::new("fake"),
    );
}

#[test]
#[should_panic(expected = "not a release")]
fn the_checks_reject_a_fence_then_a_release_store() {
    check_structure(
        &fake_ptx("st.u64 [%rd1], %rd2;\nfence.sc.sys;\nst.release.sys.u64 [%rd3], %rd4;"),
        Path::new("fake"),
    );
}

#[test]
#[should_panic(expected = "not relaxed at system scope")]
fn the_checks_reject_an_acq_rel_amo() {
    check_structure(
        &fake_ptx("atom.acq_rel.sys.add.u64 %rd1, [%rd2], %rd3;"),
        Path::new("fake"),
    );
}

#[test]
#[should_panic(expected = "not relaxed at system scope")]
fn the_checks_reject_a_gpu_scope_relaxed_atomic() {
    check_structure(
        &fake_ptx("atom.global.add.u64 %rd1, [%rd2], %rd3;"),
        Path::new("fake"),
    );
}

#[test]
#[should_panic(expected = "must acquire with ld.acquire.sys")]
fn the_checks_reject_a_wait_that_never_acquires() {
    let ptx = Ptx {
        path: PathBuf::from("fake.ptx"),
        text: ".visible .const .align 8 .b8 SYMMEM_DEVICE_STATE[80];\n.visible .entry k_wait(\n$L1:\nld.relaxed.sys.u64 %rd1, [%rd2];\n@%p1 bra $L1;".into(),
        arch: "sm_90".into(),
    };
    check_structure(&ptx, Path::new("fake"));
}

#[test]
#[should_panic(
    expected = "the wait record's refresh must store the odd sequence, fence, write, then release"
)]
fn the_checks_reject_a_wait_record_written_before_its_fence() {
    let stall = "_RNvNtCs1_13symmem_device5stall";
    let ptx = Ptx {
        path: PathBuf::from("fake.ptx"),
        text: format!(
            ".visible .const .align 8 .b8 SYMMEM_DEVICE_STATE[80];\n\
             .func (.param .b32 r) {stall}5claim(\n\
             atom.relaxed.sys.cas.b64 %rd4, [%rd3], %rd5, %rd6;\n\
             st.relaxed.sys.u64 [%rd8], %rd9;\nfence.sc.sys;\n\
             st.relaxed.sys.u64 [%rd10], %rd11;\nst.release.sys.u64 [%rd8], %rd12;\n}}\n\
             .func {stall}7refresh(\n\
             st.relaxed.sys.u64 [%rd2], %rd3;\nst.relaxed.sys.u64 [%rd4], %rd5;\n\
             fence.sc.sys;\nst.release.sys.u64 [%rd2], %rd8;\n}}\n"
        ),
        arch: "sm_90".into(),
    };
    check_structure(&ptx, Path::new("fake"));
}

/// The MoE example's results are bit for bit those of its host model only if every f32
/// operation rounds once as on the host: no contraction into `fma`, no approximate or
/// flush-to-zero forms (see `examples/kernels/src/moe/wire.rs`).
#[test]
fn the_moe_kernels_round_every_f32_operation_like_the_host() {
    let module = &symmem_example_kernels::PTX;
    if module.ptx.is_empty() {
        let required = std::env::var("SYMMEM_REQUIRE_PTX").is_ok_and(|v| v == "1");
        assert!(!required, "SYMMEM_REQUIRE_PTX=1 but {}", module.missing);
        eprintln!("skipped: {}", module.missing);
        return;
    }
    let funcs = functions(module.ptx);
    let moe: Vec<_> = funcs
        .iter()
        .filter(|(name, _)| name.starts_with("moe_"))
        .collect();
    assert_eq!(
        moe.len(),
        6,
        "moe_count, moe_dispatch and moe_expert (each at warp and block scope) and moe_combine in the PTX"
    );
    let mut rounded = 0;
    for (name, body) in moe {
        for line in body {
            let fused = line.starts_with("fma.") || line.starts_with("mad.");
            let inexact = [".approx", ".ftz", ".full."]
                .iter()
                .any(|m| line.contains(m));
            assert!(
                !(fused || inexact) || !line.contains("f32"),
                "{name}: `{line}` does not round like the host's f32 arithmetic"
            );
            rounded +=
                usize::from(line.starts_with("mul.rn.f32") || line.starts_with("add.rn.f32"));
        }
    }
    assert!(
        rounded > 0,
        "the MoE kernels' f32 arithmetic is missing from the PTX"
    );
}

#[test]
fn every_embedded_module_assembles_for_sm80_and_sm90_with_the_required_ordering() {
    let required = std::env::var("SYMMEM_REQUIRE_PTX").is_ok_and(|v| v == "1");
    let Some(ptxas) = find_ptxas() else {
        assert!(!required, "SYMMEM_REQUIRE_PTX=1 but ptxas was not found (set SYMMEM_PTXAS or install nvidia-cuda-nvcc-cu12)");
        eprintln!(
            "skipped: ptxas not found (pip install nvidia-cuda-nvcc-cu12, or set SYMMEM_PTXAS)"
        );
        return;
    };
    let dir = workspace().join("target/ptx-test");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    // (module, GPU) pairs still to assemble; a cubin the build embedded (`SYMMEM_SASS_ARCH`,
    // as `scripts/gpu-check.sh bundle` and the test command set it) already shows that
    // its pair assembles, with the same ptxas.
    let mut modules = Vec::new();
    for (crate_dir, module) in embedded() {
        if module.ptx.is_empty() {
            assert!(
                !required,
                "SYMMEM_REQUIRE_PTX=1 but {} embeds no PTX: {}",
                module.crate_name, module.missing
            );
            eprintln!("skipped {}: {}", module.crate_name, module.missing);
            continue;
        }
        assert_eq!(module.arch, EMBED_ARCH, "{}", module.crate_name);
        let path = dir.join(format!("{}.ptx", module.crate_name));
        std::fs::write(&path, module.ptx)
            .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        let ptx = Ptx {
            path,
            text: module.ptx.to_string(),
            arch: module.arch.to_string(),
        };
        check_structure(&ptx, &workspace().join(crate_dir));
        let embedded_cubin = (!module.sass.is_empty()).then_some(module.sass_arch);
        if let Some(arch) = embedded_cubin {
            eprintln!("ok: {} embeds a cubin for {arch}", module.crate_name);
        }
        let archs: Vec<_> = ARCHS
            .into_iter()
            .filter(|&a| Some(a) != embedded_cubin)
            .collect();
        modules.push((ptx, archs));
    }
    // ptxas takes minutes on the test kernels (11 MB of PTX) and uses one core: assemble
    // every (module, GPU) pair at once, through the build's cubin cache, which the kernel
    // crates' build scripts fill for `SYMMEM_PTX_CHECK_ARCHS` (the test command sets
    // sm_80): an entry there shows that exactly this PTX assembled with this ptxas.
    let cache = workspace().join("target/symmem-ptx/sass");
    std::thread::scope(|scope| {
        let jobs: Vec<_> = modules
            .iter()
            .flat_map(|(ptx, archs)| archs.iter().map(move |&arch| (ptx, arch)))
            .map(|(ptx, arch)| {
                let ptxas = &ptxas;
                let cache = &cache;
                let job = scope.spawn(move || assemble_cached(ptxas, ptx, arch, None, cache));
                (ptx, arch, job)
            })
            .collect();
        for (ptx, arch, job) in jobs {
            job.join()
                .expect("the ptxas thread panicked")
                .unwrap_or_else(|e| panic!("ptxas {arch} {}: {e}", ptx.path.display()));
            eprintln!(
                "ok: {} ({}) assembles for {arch}: {} entry points",
                ptx.path.display(),
                ptx.arch,
                ptx.text.matches(".entry").count()
            );
        }
    });
}

/// The body of `.entry name`, with the entry's own name, its local depot, its labels and
/// call sequences (numbered per function) and the numbers LLVM appends to copies of one
/// device function (`…4fail9`, `…4fail13`) made neutral, so two entries compiled from the
/// same code compare equal.
fn normalized_entry(ptx: &str, name: &str) -> Option<String> {
    let start = ptx.find(&format!(".visible .entry {name}("))?;
    let end = start + ptx[start..].find("\n}\n")?;
    let body = ptx[start..end].replace(name, "ENTRY");
    let mut out = String::with_capacity(body.len());
    let mut rest = body.as_str();
    while let Some(at) = ["__local_depot", "$L__BB", "callseq ", "4fail"]
        .iter()
        .filter_map(|p| rest.find(p).map(|i| i + p.len()))
        .min()
    {
        out.push_str(&rest[..at]);
        rest = rest[at..].trim_start_matches(|c: char| c.is_ascii_digit());
        out.push('N');
    }
    out.push_str(rest);
    Some(out)
}

/// Instructions in the loop blocks of `.entry name` (those LLVM marks `Loop Header` or
/// `in Loop`): what one iteration executes, at most.
fn loop_instructions(ptx: &str, name: &str) -> usize {
    let body = normalized_entry(ptx, name).unwrap_or_default();
    let mut in_loop = false;
    let mut count = 0;
    for line in body.lines().map(str::trim) {
        if line.starts_with('$') || line.starts_with("// %bb") {
            in_loop = line.contains("Loop");
            continue;
        }
        let instruction = !line.is_empty()
            && !line.starts_with(['.', '/', '{', '}', '(', ')'])
            && !line.starts_with("begin inline")
            && !line.starts_with("end inline");
        if in_loop && instruction {
            count += 1;
        }
    }
    count
}

/// Every instance of the test kernels' generic kernels is a PTX entry of its own name; a
/// scope-generic instance (`S::put_nbi` at `Warp`, `Block`) is the same code as the
/// explicit form (`put_nbi_warp`, `put_nbi_block`). Also prints what the bounds check of
/// a typed slice's `p` and block `put` costs in a loop: the instructions of the loop
/// blocks and of the whole entry, checked and unchecked (recorded in the kernels
/// chapter).
#[test]
fn generic_instances_are_entries_and_scope_dispatch_costs_nothing() {
    let ptx = symmem_test_kernels::PTX.ptx;
    if ptx.is_empty() {
        assert!(
            !std::env::var("SYMMEM_REQUIRE_PTX").is_ok_and(|v| v == "1"),
            "SYMMEM_REQUIRE_PTX=1 but the test kernels embed no PTX: {}",
            symmem_test_kernels::PTX.missing
        );
        eprintln!("skipped: {}", symmem_test_kernels::PTX.missing);
        return;
    }
    for entry in [
        "slice_rma_u64_thread_4",
        "slice_rma_u32_warp_2",
        "slice_rma_f64_block_8",
        "slice_rma_u8_block_1",
        "slice_elems_u32_3",
        "slice_elems_f64_2",
        "scope_collectives_thread",
        "scope_collectives_warp",
        "scope_collectives_block",
        "scope_put_nbi_warp",
        "scope_put_nbi_block",
    ] {
        assert!(
            ptx.contains(&format!(".visible .entry {entry}(")),
            "no .entry {entry} in the test kernels' PTX"
        );
    }
    for (generic, explicit) in [
        ("scope_put_nbi_warp", "explicit_put_nbi_warp"),
        ("scope_put_nbi_block", "explicit_put_nbi_block"),
    ] {
        let (g, e) = (
            normalized_entry(ptx, generic).expect("generic entry"),
            normalized_entry(ptx, explicit).expect("explicit entry"),
        );
        assert_eq!(
            g, e,
            "{generic} (S::put_nbi) is not the same code as {explicit}"
        );
    }
    for (checked, unchecked) in [
        ("slice_p_loop", "slice_p_loop_unchecked"),
        ("slice_put_loop", "slice_put_loop_unchecked"),
    ] {
        let c = normalized_entry(ptx, checked).expect("checked entry");
        let u = normalized_entry(ptx, unchecked).expect("unchecked entry");
        eprintln!(
            "bounds check cost: {checked} {} instructions per iteration ({} in the entry), {unchecked} {} ({})",
            loop_instructions(ptx, checked),
            c.lines().count(),
            loop_instructions(ptx, unchecked),
            u.lines().count()
        );
    }
}
