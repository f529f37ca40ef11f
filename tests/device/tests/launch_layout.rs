//! The launch contract without a GPU: every `kernel!` descriptor (name, parameter layout
//! and launch bound: what `Runtime::launch` passes to `cuLaunchKernel` and checks the block
//! against) matches the `.entry` of the same name in the PTX its crate embedded (its
//! parameters and its `.maxntid`), and every `.entry` has a descriptor.
//!
//! The embedded PTX is what a GPU PE loads. Without the nvptx toolchain it is empty: the
//! test then skips with the reason, unless `SYMMEM_REQUIRE_PTX=1` (CI) makes it fail.

use symmem::device::{EmbeddedPtx, KernelInfo};

/// One `.entry`: its name, parameter sizes in bytes, and `.maxntid` (x, if any).
#[derive(Debug, PartialEq)]
struct Entry {
    name: String,
    params: Vec<usize>,
    max_threads: Option<u32>,
}

/// Every `.entry` in `ptx`.
fn entries(ptx: &str) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut lines = ptx.lines().map(str::trim);
    while let Some(line) = lines.next() {
        let Some(rest) = line.strip_prefix(".visible .entry ") else {
            continue;
        };
        // Drop a trailing `// @name` comment.
        let rest = rest.split("//").next().unwrap_or("").trim();
        let name = rest
            .trim_end_matches('(')
            .trim_end_matches("()")
            .to_string();
        let mut params = Vec::new();
        if !rest.ends_with("()") {
            for p in lines.by_ref() {
                if p.starts_with(')') {
                    break;
                }
                params.push(param_size(p));
            }
        }
        // Performance directives sit between the parameters and the body.
        let mut max_threads = None;
        for d in lines.by_ref() {
            if d.starts_with('{') {
                break;
            }
            if let Some(v) = d.strip_prefix(".maxntid ") {
                let x = v.split(',').next().unwrap_or("").trim();
                max_threads = Some(x.parse().expect(".maxntid x"));
            }
        }
        out.push(Entry {
            name,
            params,
            max_threads,
        });
    }
    out
}

/// Size of one `.param` declaration: `.param .u64 .ptr .align 1 k_param_0,` is 8 bytes,
/// `.param .align 8 .b8 k_param_1[24]` is 24.
fn param_size(decl: &str) -> usize {
    let decl = decl.trim_end_matches(',');
    if let Some(open) = decl.rfind('[') {
        return decl[open + 1..decl.len() - 1]
            .parse()
            .expect("array length");
    }
    for (ty, size) in [("8", 1), ("16", 2), ("32", 4), ("64", 8)] {
        if decl.split_whitespace().any(|w| {
            w.len() > 2 && w.starts_with('.') && w[2..] == *ty && "usbf".contains(&w[1..2])
        }) {
            return size;
        }
    }
    panic!("unknown parameter declaration {decl:?}");
}

fn check(ptx: &EmbeddedPtx, kernels: &[KernelInfo]) {
    if ptx.ptx.is_empty() {
        if std::env::var_os("SYMMEM_REQUIRE_PTX").is_some_and(|v| v == "1") {
            panic!("{}: {}", ptx.crate_name, ptx.missing);
        }
        eprintln!("SKIPPED {}: {}", ptx.crate_name, ptx.missing);
        return;
    }
    let found = entries(ptx.ptx);
    assert!(
        !found.is_empty(),
        "{}: no .entry in its PTX",
        ptx.crate_name
    );
    assert!(
        ptx.ptx
            .contains(".visible .const .align 8 .b8 SYMMEM_DEVICE_STATE[80]"),
        "{}: the PTX does not define SYMMEM_DEVICE_STATE in .const with the 80 bytes of DeviceState",
        ptx.crate_name
    );
    for e in &found {
        let name = &e.name;
        let k = kernels.iter().find(|k| k.name == name).unwrap_or_else(|| {
            panic!(
                "{}: .entry {name} has no descriptor in KERNELS",
                ptx.crate_name
            )
        });
        let declared: Vec<usize> = k.params.iter().map(|p| p.size).collect();
        assert_eq!(
            declared, e.params,
            "{}: parameters of {name}",
            ptx.crate_name
        );
        // The bound the runtime checks launches against is the one ptxas sized the
        // registers for.
        assert_eq!(
            Some(k.max_threads),
            e.max_threads,
            "{}: launch bound (.maxntid) of {name}",
            ptx.crate_name
        );
    }
    for k in kernels {
        assert!(
            found.iter().any(|e| e.name == k.name),
            "{}: kernel {} has no .entry in the PTX",
            ptx.crate_name,
            k.name
        );
    }
    println!(
        "{}: {} kernels match their PTX entries",
        ptx.crate_name,
        found.len()
    );
}

#[test]
fn test_kernels_match_their_ptx() {
    check(&symmem_test_kernels::PTX, symmem_test_kernels::KERNELS);
}

#[test]
fn example_kernels_match_their_ptx() {
    check(
        &symmem_example_kernels::PTX,
        symmem_example_kernels::KERNELS,
    );
}

#[test]
fn bench_kernels_match_their_ptx() {
    check(&symmem_bench_kernels::PTX, symmem_bench_kernels::KERNELS);
}

#[test]
fn parameter_declarations_parse() {
    let ptx = ".visible .entry k(\n\t.param .u64 .ptr .align 1 k_param_0,\n\t.param .u32 k_param_1,\n\t.param .align 8 .b8 k_param_2[24]\n)\n.maxntid 64, 1, 1\n{\n}\n.visible .entry e()          // @e\n{\n}\n";
    assert_eq!(
        entries(ptx),
        vec![
            Entry {
                name: "k".to_string(),
                params: vec![8, 4, 24],
                max_threads: Some(64)
            },
            Entry {
                name: "e".to_string(),
                params: vec![],
                max_threads: None
            }
        ]
    );
}

#[test]
fn runtime_helper_kernels_match_their_ptx() {
    check(
        &symmem_runtime_kernels::PTX,
        symmem_runtime_kernels::KERNELS,
    );
}
