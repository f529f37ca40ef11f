//! The launch contract without a GPU: every `kernel!` descriptor (name and parameter
//! layout, what `Runtime::launch` passes to `cuLaunchKernel`) matches the `.entry` of the
//! same name in the PTX its crate embedded, and every `.entry` has a descriptor.
//!
//! The embedded PTX is what a GPU PE loads. Without the nvptx toolchain it is empty: the
//! test then skips with the reason, unless `SYMMEM_REQUIRE_PTX=1` (CI) makes it fail.

use symmem::device::{EmbeddedPtx, KernelInfo};

/// `(entry name, parameter sizes in bytes)` of every `.entry` in `ptx`.
fn entries(ptx: &str) -> Vec<(String, Vec<usize>)> {
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
        out.push((name, params));
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
            .contains(".visible .const .align 8 .b8 SYMMEM_DEVICE_STATE[72]"),
        "{}: the PTX does not define SYMMEM_DEVICE_STATE in .const with the 72 bytes of DeviceState",
        ptx.crate_name
    );
    for (name, sizes) in &found {
        let k = kernels.iter().find(|k| k.name == name).unwrap_or_else(|| {
            panic!(
                "{}: .entry {name} has no descriptor in KERNELS",
                ptx.crate_name
            )
        });
        let declared: Vec<usize> = k.params.iter().map(|p| p.size).collect();
        assert_eq!(&declared, sizes, "{}: parameters of {name}", ptx.crate_name);
    }
    for k in kernels {
        assert!(
            found.iter().any(|(n, _)| n == k.name),
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
    let ptx = ".visible .entry k(\n\t.param .u64 .ptr .align 1 k_param_0,\n\t.param .u32 k_param_1,\n\t.param .align 8 .b8 k_param_2[24]\n)\n{\n}\n.visible .entry e()          // @e\n{\n}\n";
    assert_eq!(
        entries(ptx),
        vec![("k".to_string(), vec![8, 4, 24]), ("e".to_string(), vec![])]
    );
}

#[test]
fn runtime_helper_kernels_match_their_ptx() {
    check(
        &symmem_runtime_kernels::PTX,
        symmem_runtime_kernels::KERNELS,
    );
}
