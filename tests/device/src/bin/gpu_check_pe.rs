//! The GPU-specific checks of `scripts/gpu-check.sh`: `gpu_check_pe SCENARIO` under
//! `symrun -n N` (or `--pes N`), with `SYMMEM_DEVICE=cuda` on a machine with a GPU.
//!
//! - `ipc`: host puts through the CUDA copy route into the right neighbour's GPU heap,
//!   read back with gets; then a block's device `put_signal` into the neighbour's heap
//!   through the VMM-imported mapping, observed by the neighbour's kernel; every element
//!   checked.
//! - `bad_module`: PTX that does not assemble fails with the JIT's log; PTX without
//!   `SYMMEM_DEVICE_STATE` is refused naming the symbol; a launch whose declared
//!   parameters differ from the PTX entry is refused before it runs.
//!
//! - `cooperative`: a cooperative launch larger than the GPU can hold at once is refused
//!   naming the limit; one that fits runs every thread once.
//! - `trap`: PE 0's device put to a PE that does not exist fails the launch with an error
//!   naming that PE (on the GPU: the error word, then a trap).
//! - `panic`: thread 37 of block 1 of PE 0's kernel panics (`panic_one`) while the other
//!   threads wait: the launch fails with `KernelFailed` naming block (1, 0, 0), thread
//!   (37, 0, 0) and the message; on a GPU PE (where the panic handler records them
//!   before trapping) also the kernel's file and line, `failure.rs:18`.
//! - `printf`: one thread of each PE's kernel prints a line with `printf!` (CUDA's device
//!   `vprintf` on a GPU, the host's stdout on the CPU executor):
//!   `printf: PE <pe>: x=7 y=2.50 text`, which the caller checks.
//! - `remote` (2 PEs, each its own simulated node: `SYMMEM_SIMULATE_NODES=2`, set here
//!   unless given): device operations to the other node through the proxy channel (on GPU
//!   PEs: the ring in mapped pinned memory, payloads staged by the proxy thread). A
//!   block's `put_signal` of 2.4 MB (three staging chunks) observed by the other PE's
//!   kernel, every element checked; then one thread's `get`, `g`, `atomic_fetch_add`,
//!   `p` and `put` to the other PE, and `p`/`g` of a 16-byte value (the g one PE at a time), each result checked
//!   exactly.
//!
//! - `stream` (an even number of PEs): each even PE sends 200 chunks of 1 to 4096 u64s to
//!   the next PE with `put_signal_on_stream` while that PE's kernel waits for each signal
//!   and checks the chunk at once (a signal ahead of its data would show); then
//!   `signal_wait_until_on_stream`, `put_on_stream`, `quiet_on_stream` and
//!   `barrier_all_on_stream` in a round trip; then `get_on_stream` of the partner's whole
//!   source (819 200 u64s), every element checked.
//!
//! Each PE prints its device and `PE i: SCENARIO ok` and exits 0, or `FAILED: …` and exits 1.
//! On a CPU PE the scenarios run too (where they make sense), so CI runs them.

use std::process::ExitCode;

use symmem::device::{Kernel, Param};
use symmem::{Cmp, SignalOp};
use symmem::{Runtime, SelfLaunch, SymBuf};
use symmem_test_kernels::pipeline::{stream_chunk_len, stream_consume};
use symmem_test_kernels::{failure as kf, pattern, ring as k, threads as kt, PTX};

type Outcome = Result<(), String>;

/// Writes one `FAILED: …` line to stderr in a single write, so that lines of PEs sharing
/// the stderr pipe never interleave (`eprintln!` writes each formatted piece separately).
macro_rules! fail_line {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let line = format!("{}\n", format_args!($($arg)*));
        let _ = std::io::stderr().write_all(line.as_bytes());
    }};
}

fn main() -> ExitCode {
    let scenario = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--") && a.parse::<usize>().is_err())
        .unwrap_or_default();
    if scenario == "remote" && std::env::var_os("SYMMEM_SIMULATE_NODES").is_none() {
        // Each PE its own node, so the other PE is reached through the proxy channel.
        // Set before any thread exists (edition 2021), and inherited by the PEs.
        std::env::set_var("SYMMEM_SIMULATE_NODES", "2");
    }
    match symmem::self_launch() {
        Ok(SelfLaunch::Finished(code)) => return ExitCode::from(code.clamp(0, 255) as u8),
        Ok(SelfLaunch::InJob) => {}
        Err(e) => {
            fail_line!("FAILED: {e}");
            return ExitCode::FAILURE;
        }
    }
    let run: fn(&Runtime) -> Outcome = match scenario.as_str() {
        "ipc" => ipc,
        "bad_module" => bad_module,
        "cooperative" => cooperative,
        "trap" => trap,
        "panic" => panic,
        "printf" => printf,
        "remote" => remote,
        "stream" => stream,
        other => {
            eprintln!(
                "unknown scenario {other:?}; known: ipc bad_module cooperative trap panic printf remote stream"
            );
            return ExitCode::from(2);
        }
    };
    let rt = match symmem::init() {
        Ok(rt) => rt,
        Err(e) => {
            fail_line!("FAILED: init: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(msg) = run(&rt) {
        fail_line!(
            "FAILED: PE {} ({}): {scenario}: {msg}",
            rt.my_pe(),
            rt.device_description()
        );
        std::process::exit(1);
    }
    println!("PE {}: device {}", rt.my_pe(), rt.device_description());
    println!("PE {}: {scenario} ok", rt.my_pe());
    match rt.finalize() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            fail_line!("FAILED: finalize: {e}");
            ExitCode::FAILURE
        }
    }
}

fn e2s(e: symmem::Error) -> String {
    e.to_string()
}

fn sym<T>(rt: &Runtime, buf: &SymBuf<T>) -> Result<*mut T, String> {
    Ok(rt
        .ptr(buf, rt.my_pe())
        .map_err(e2s)?
        .ok_or("own heap is not mapped")?
        .as_ptr())
}

fn first_difference(what: &str, got: &[u64], want: &[u64]) -> Outcome {
    match got.iter().zip(want).position(|(g, w)| g != w) {
        None if got.len() == want.len() => Ok(()),
        None => Err(format!(
            "{what}: {} elements, want {}",
            got.len(),
            want.len()
        )),
        Some(i) => Err(format!(
            "{what}: element {i} is {:#x}, want {:#x}",
            got[i], want[i]
        )),
    }
}

fn ipc(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    let module = rt.load_module(&PTX).map_err(e2s)?;
    for len in [1usize, 1000, 1 << 20] {
        let host = rt.calloc::<u64>(len).map_err(e2s)?;
        let data: Vec<u64> = (0..len as u64).map(|i| (me as u64) << 40 | i).collect();
        rt.put(host.at(0), &data, right).map_err(e2s)?;
        rt.barrier_all().map_err(e2s)?;
        let mut got = vec![0u64; len];
        rt.get(host.at(0), &mut got, me).map_err(e2s)?;
        let want: Vec<u64> = (0..len as u64).map(|i| (left as u64) << 40 | i).collect();
        first_difference(
            &format!("host put of {len} u64s from PE {left}"),
            &got,
            &want,
        )?;
        // And the other way: read the neighbour's copy.
        rt.get(host.at(0), &mut got, right).map_err(e2s)?;
        first_difference(
            &format!("host get of {len} u64s from PE {right}"),
            &got,
            &data,
        )?;
        rt.barrier_all().map_err(e2s)?;
        rt.free(host).map_err(e2s)?;
    }
    // Device-initiated: the block puts into the right neighbour's heap through the
    // imported mapping and signals; the neighbour's kernel waits for the signal.
    let len = 100_000usize;
    let dst = rt.calloc::<u64>(len).map_err(e2s)?;
    let src = rt.alloc::<u64>(len).map_err(e2s)?;
    let sig = rt.calloc::<u64>(1).map_err(e2s)?;
    let data: Vec<u64> = (0..len as u64)
        .map(|i| i * 7 + me as u64 * 1_000_000)
        .collect();
    rt.put(src.at(0), &data, me).map_err(e2s)?;
    rt.barrier_all().map_err(e2s)?;
    let (d, s, sg) = (sym(rt, &dst)?, sym(rt, &src)?, sym(rt, &sig)?);
    // SAFETY: symmetric addresses of live allocations of `len`, `len` and 1 elements.
    unsafe {
        rt.launch(
            &module,
            k::ring_put_signal::KERNEL,
            1,
            256,
            (d, s.cast_const(), len, sg),
        )
        .map_err(e2s)?;
        rt.launch(&module, k::wait_signal::KERNEL, 1, 32, (sg, 1u64))
            .map_err(e2s)?;
    }
    let mut got = vec![0u64; len];
    rt.get(dst.at(0), &mut got, me).map_err(e2s)?;
    let want: Vec<u64> = (0..len as u64)
        .map(|i| i * 7 + left as u64 * 1_000_000)
        .collect();
    first_difference(
        "device put_signal_block from the left neighbour",
        &got,
        &want,
    )?;
    rt.barrier_all().map_err(e2s)?;
    rt.free(sig).map_err(e2s)?;
    rt.free(src).map_err(e2s)?;
    rt.free(dst).map_err(e2s)
}

fn bad_module(rt: &Runtime) -> Outcome {
    if !rt.is_gpu() {
        // CPU PEs do not load PTX: the module stands for the host functions.
        let m = rt.load_ptx("garbage", "not PTX").map_err(e2s)?;
        return if m.on_gpu() {
            Err("a CPU PE loaded PTX".into())
        } else {
            Ok(())
        };
    }
    let expect_err = |what: &str, r: symmem::Result<symmem::Module>, needles: &[&str]| -> Outcome {
        match r {
            Ok(_) => Err(format!("{what}: loaded")),
            Err(e) => {
                let text = e.to_string();
                println!("PE {}: {what}: {text}", rt.my_pe());
                match needles.iter().find(|n| !text.contains(*n)) {
                    Some(n) => Err(format!("{what}: the error does not mention {n:?}: {text}")),
                    None => Ok(()),
                }
            }
        }
    };
    expect_err(
        "PTX that does not assemble",
        rt.load_ptx("garbage", ".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry broken() { this is not ptx; }\n"),
        &["cuModuleLoadDataEx(garbage)", "CUDA_ERROR"],
    )?;
    expect_err(
        "PTX without the state global",
        rt.load_ptx(
            "stateless",
            ".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry empty() { ret; }\n",
        ),
        &["SYMMEM_DEVICE_STATE", "stateless"],
    )?;
    let module = rt.load_module(&PTX).map_err(e2s)?;
    // A descriptor that disagrees with the PTX entry: one parameter instead of four.
    unsafe fn never(_: (u64,)) {}
    let wrong: Kernel<(u64,)> =
        Kernel::new("ring_put_signal", &[Param { size: 8, align: 8 }], never);
    // SAFETY: the launch is refused before anything runs.
    match unsafe { rt.launch(&module, wrong, 1, 1, (0u64,)) } {
        Ok(()) => Err("a launch with the wrong parameter list ran".into()),
        Err(e) if e.to_string().contains("[8, 8, 8, 8]") => {
            println!("PE {}: wrong parameters: {e}", rt.my_pe());
            Ok(())
        }
        Err(e) => Err(format!("wrong parameters: unexpected error: {e}")),
    }
}

fn cooperative(rt: &Runtime) -> Outcome {
    let module = rt.load_module(&PTX).map_err(e2s)?;
    let counter = rt.calloc::<u64>(1).map_err(e2s)?;
    let c = sym(rt, &counter)?;
    // SAFETY: `c` is the symmetric address of one u64; the first launch is refused
    // before it runs.
    match unsafe {
        rt.launch_cooperative(&module, kt::count_threads::KERNEL, 1_000_000, 1024, (c,))
    } {
        Ok(()) => return Err("a cooperative launch of 10^6 blocks of 1024 threads ran".into()),
        Err(e) => {
            let text = e.to_string();
            println!("PE {}: oversized cooperative launch: {text}", rt.my_pe());
            if !text.contains("launch_cooperative") || !text.contains("1000000") {
                return Err(format!("unexpected error: {text}"));
            }
        }
    }
    // SAFETY: as above; 4 blocks of 64 threads fit on any GPU and the CPU executor.
    unsafe { rt.launch_cooperative(&module, kt::count_threads::KERNEL, 4, 64, (c,)) }
        .map_err(e2s)?;
    let mut got = [0u64];
    rt.get(counter.at(0), &mut got, rt.my_pe()).map_err(e2s)?;
    if got[0] != 256 {
        return Err(format!(
            "count_threads counted {} threads, want 256",
            got[0]
        ));
    }
    rt.barrier_all().map_err(e2s)?;
    rt.free(counter).map_err(e2s)
}

fn trap(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    let module = rt.load_module(&PTX).map_err(e2s)?;
    // Collective: every PE allocates.
    let buf = rt.calloc::<u64>(2).map_err(e2s)?;
    let b = sym(rt, &buf)?;
    if me != 0 {
        // Only PE 0 traps: under MPS a fatal fault in one client's kernel stops the
        // kernels of every client on the GPU, so a second trapping PE could see its
        // kernel stopped by the first before it reports its own error.
        return Ok(());
    }
    // SAFETY: `b` is the symmetric address of 2 u64s; the put to PE `n`, which does not
    // exist, is refused on the device, which reports it and stops the kernel.
    match unsafe {
        rt.launch(
            &module,
            kf::remote_op::KERNEL,
            1,
            32,
            (b, 0u32, n as u32, 0u32),
        )
    } {
        Ok(()) => Err(format!("a device put to PE {n} of {n} succeeded")),
        Err(e) => {
            let text = e.to_string();
            println!("PE {me}: device put to PE {n}: {text}");
            if text.contains(&format!("PE {n}")) {
                Ok(())
            } else {
                Err(format!("the error does not name PE {n}: {text}"))
            }
        }
    }
    // A trapped GPU context cannot be used again; the PE finalizes without freeing.
}

/// PE 0's kernel panics in one thread; the launch's error must name the block, the
/// thread, the message and, on a GPU PE, the panic's file and line.
fn panic(rt: &Runtime) -> Outcome {
    let me = rt.my_pe();
    let module = rt.load_module(&PTX).map_err(e2s)?;
    // Collective: every PE allocates.
    let sig = rt.calloc::<u64>(1).map_err(e2s)?;
    let s = sym(rt, &sig)?;
    if me != 0 {
        // Only PE 0 panics, as in `trap` (MPS stops every client's kernels on a fault).
        return Ok(());
    }
    // Block 0 passes its wait; block 1, the victim's, never does.
    rt.put(sig.at(0), &[1u64], me).map_err(e2s)?;
    // SAFETY: `s` is the symmetric address of one u64.
    let r = unsafe { rt.launch(&module, kf::panic_one::KERNEL, 2, 64, (s, 1u32, 37u32)) };
    let e = match r {
        Ok(()) => return Err("a kernel that panics succeeded".into()),
        Err(e) => e,
    };
    let text = e.to_string();
    println!("PE {me}: kernel panic: {text}");
    let located = match &e {
        symmem::Error::KernelFailed {
            pe: 0,
            block: (1, 0, 0),
            thread: (37, 0, 0),
            message,
        } => message.contains("deliberate kernel panic"),
        _ => false,
    };
    // The line of `panic!` in tests/kernels/src/failure.rs.
    let file_line = "failure.rs:18";
    if !located {
        Err(format!(
            "expected KernelFailed on PE 0 in block (1, 0, 0) thread (37, 0, 0) with the message: {text}"
        ))
    } else if rt.is_gpu() && !text.contains(file_line) {
        Err(format!(
            "the GPU panic's error does not name {file_line}: {text}"
        ))
    } else {
        Ok(())
    }
    // A trapped GPU context cannot be used again; the PE finalizes without freeing.
}

/// One thread of each PE's kernel prints with `printf!`; the launch must succeed (the
/// caller checks the printed line; a GPU prints it when the launch ends).
fn printf(rt: &Runtime) -> Outcome {
    let module = rt.load_module(&PTX).map_err(e2s)?;
    // SAFETY: the kernel takes plain values.
    unsafe {
        rt.launch(
            &module,
            symmem_test_kernels::print::print_values::KERNEL,
            2,
            64,
            (7u32, 2.5f64),
        )
    }
    .map_err(|e| format!("printf kernel: {e}"))
}

/// One thread's device operation `op` of `remote_op` on `buf` (sym) at PE `pe`.
fn remote_op(rt: &Runtime, module: &symmem::Module, buf: *mut u64, op: u32, pe: usize) -> Outcome {
    // SAFETY: `buf` is the symmetric address of 2 u64s on every PE.
    unsafe {
        rt.launch(
            module,
            kf::remote_op::KERNEL,
            1,
            32,
            (buf, op, pe as u32, 0u32),
        )
    }
    .map_err(|e| format!("remote_op {op} to PE {pe}: {e}"))
}

/// Reads this PE's own `buf[0..2]`.
fn own_pair(rt: &Runtime, buf: &SymBuf<u64>) -> Result<[u64; 2], String> {
    let mut got = [0u64; 2];
    rt.get(buf.at(0), &mut got, rt.my_pe()).map_err(e2s)?;
    Ok(got)
}

fn expect_pair(what: &str, got: [u64; 2], want: [u64; 2]) -> Outcome {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: this PE holds {got:?}, want {want:?}"))
    }
}

// Over 100 lines on purpose: one scenario, its checks in order on one job, each on the
// state the one before left; cut up, the parts would only hand that state around.
fn remote(rt: &Runtime) -> Outcome {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    if n != 2 {
        return Err(format!("remote runs on 2 PEs, not {n}"));
    }
    let other = 1 - me;
    let module = rt.load_module(&PTX).map_err(e2s)?;
    // A block's put_signal larger than the proxy's staging buffer, while the other PE's
    // kernel waits for the signal.
    let len = 300_000usize;
    let dst = rt.calloc::<u64>(len).map_err(e2s)?;
    let src = rt.alloc::<u64>(len).map_err(e2s)?;
    let sig = rt.calloc::<u64>(1).map_err(e2s)?;
    if rt.ptr(&dst, other).map_err(e2s)?.is_some() {
        return Err(format!(
            "PE {other} must be on another node (SYMMEM_SIMULATE_NODES=2) but has a direct pointer"
        ));
    }
    let data: Vec<u64> = (0..len as u64)
        .map(|i| i * 3 + ((me as u64) << 48))
        .collect();
    rt.put(src.at(0), &data, me).map_err(e2s)?;
    rt.barrier_all().map_err(e2s)?;
    let (d, s, sg) = (sym(rt, &dst)?, sym(rt, &src)?, sym(rt, &sig)?);
    // SAFETY: symmetric addresses of live allocations of `len`, `len` and 1 elements.
    unsafe {
        rt.launch(
            &module,
            k::ring_put_signal::KERNEL,
            1,
            256,
            (d, s.cast_const(), len, sg),
        )
        .map_err(|e| format!("put_signal of {len} u64s to PE {other}: {e}"))?;
        rt.launch(&module, k::wait_signal::KERNEL, 1, 32, (sg, 1u64))
            .map_err(|e| format!("waiting for PE {other}'s signal: {e}"))?;
    }
    let mut got = vec![0u64; len];
    rt.get(dst.at(0), &mut got, me).map_err(e2s)?;
    let want: Vec<u64> = (0..len as u64)
        .map(|i| i * 3 + ((other as u64) << 48))
        .collect();
    first_difference(
        &format!("device put_signal of {len} u64s from PE {other} on the other node"),
        &got,
        &want,
    )?;
    rt.barrier_all().map_err(e2s)?;
    // One thread's operations, each checked before the next: buf = [1000 + me, 0].
    let buf = rt.calloc::<u64>(2).map_err(e2s)?;
    let b = sym(rt, &buf)?;
    let mine = 1000 + me as u64;
    let theirs = 1000 + other as u64;
    rt.put(buf.at(0), &[mine], me).map_err(e2s)?;
    rt.barrier_all().map_err(e2s)?;
    remote_op(rt, &module, b, 1, other)?; // get: buf[1] = other's buf[0]
    expect_pair("after a device get", own_pair(rt, &buf)?, [mine, theirs])?;
    rt.put(buf.at(1), &[0], me).map_err(e2s)?;
    remote_op(rt, &module, b, 3, other)?; // g: buf[1] = other's buf[0]
    expect_pair("after a device g", own_pair(rt, &buf)?, [mine, theirs])?;
    rt.barrier_all().map_err(e2s)?;
    remote_op(rt, &module, b, 4, other)?; // atomic_fetch_add(other's buf[0], 1)
    rt.barrier_all().map_err(e2s)?;
    expect_pair(
        "after the other PE's device atomic_fetch_add",
        own_pair(rt, &buf)?,
        [mine + 1, theirs],
    )?;
    rt.barrier_all().map_err(e2s)?;
    remote_op(rt, &module, b, 2, other)?; // p: other's buf[0] = 1
    rt.barrier_all().map_err(e2s)?;
    expect_pair(
        "after the other PE's device p",
        own_pair(rt, &buf)?,
        [1, theirs],
    )?;
    rt.barrier_all().map_err(e2s)?;
    remote_op(rt, &module, b, 0, other)?; // put: other's buf[0] = my buf[1]
    rt.quiet().map_err(e2s)?;
    rt.barrier_all().map_err(e2s)?;
    expect_pair(
        "after the other PE's device put",
        own_pair(rt, &buf)?,
        [mine, theirs],
    )?;
    rt.barrier_all().map_err(e2s)?;
    // A 16-byte value: several inline requests, never the address of the thread's value.
    remote_op(rt, &module, b, 6, other)?; // p: other's buf = [0x5eed_0001, 0x5eed_0002]
    rt.barrier_all().map_err(e2s)?;
    expect_pair(
        "after the other PE's device p of 16 bytes",
        own_pair(rt, &buf)?,
        [0x5eed_0001, 0x5eed_0002],
    )?;
    // One PE at a time: the g overwrites what the other PE's g would read.
    for turn in 0..2 {
        rt.put(buf.at(0), &[mine, theirs], me).map_err(e2s)?;
        rt.barrier_all().map_err(e2s)?;
        if me == turn {
            remote_op(rt, &module, b, 7, other)?; // g: buf = other's buf
            expect_pair(
                "after a device g of 16 bytes",
                own_pair(rt, &buf)?,
                [theirs, mine],
            )?;
        }
        rt.barrier_all().map_err(e2s)?;
    }
    println!("PE {me}: device put_signal, get, g, atomic_fetch_add, p and put (8 and 16 bytes) to PE {other} on the other node went through the proxy channel");
    rt.barrier_all().map_err(e2s)?;
    rt.free(buf).map_err(e2s)?;
    rt.free(sig).map_err(e2s)?;
    rt.free(src).map_err(e2s)?;
    rt.free(dst).map_err(e2s)
}

// Over 100 lines on purpose: one scenario, its checks in order on one job, each on the
// state the one before left; cut up, the parts would only hand that state around.
fn stream(rt: &Runtime) -> Outcome {
    const ITERS: u32 = 200;
    const MAX_LEN: usize = 4096;
    let (me, n) = (rt.my_pe(), rt.n_pes());
    if n % 2 != 0 {
        return Err(format!(
            "stream pairs PEs up: run it on an even number, not {n}"
        ));
    }
    let module = rt.load_module(&PTX).map_err(e2s)?;
    let total = ITERS as usize * MAX_LEN;
    let regions = rt.calloc::<u64>(total).map_err(e2s)?;
    let src = rt.alloc::<u64>(total).map_err(e2s)?;
    let sig = rt.calloc::<u64>(2).map_err(e2s)?;
    let bad = rt.calloc::<u64>(1).map_err(e2s)?;
    let stream = rt.create_stream().map_err(e2s)?;
    let data: Vec<u64> = (0..total)
        .map(|x| pattern(me as u32, (x / MAX_LEN) as u32, x % MAX_LEN))
        .collect();
    rt.put(src.at(0), &data, me).map_err(e2s)?;
    rt.barrier_all().map_err(e2s)?;
    if me % 2 == 0 {
        let to = me + 1;
        for i in 0..ITERS {
            let at = i as usize * MAX_LEN;
            rt.put_signal_on_stream(
                regions.at(at),
                src.at(at),
                stream_chunk_len(i, MAX_LEN),
                sig.at(0),
                1,
                SignalOp::Add,
                to,
                &stream,
            )
            .map_err(e2s)?;
        }
        stream.synchronize().map_err(e2s)?;
    } else {
        let (r, s, b) = (sym(rt, &regions)?, sym(rt, &sig)?, sym(rt, &bad)?);
        // SAFETY: symmetric addresses of live allocations of the sizes the kernel uses.
        unsafe {
            rt.launch(
                &module,
                stream_consume::KERNEL,
                1,
                128,
                (r.cast_const(), MAX_LEN, ITERS, s, (me - 1) as u32, b),
            )
            .map_err(e2s)?
        };
        let mut wrong = [0u64];
        rt.get(bad.at(0), &mut wrong, me).map_err(e2s)?;
        if wrong[0] != 0 {
            return Err(format!(
                "the consumer saw {} elements whose signal came before the data",
                wrong[0]
            ));
        }
        let mut got = vec![0u64; total];
        rt.get(regions.at(0), &mut got, me).map_err(e2s)?;
        for i in 0..ITERS {
            for j in 0..stream_chunk_len(i, MAX_LEN) {
                let want = pattern((me - 1) as u32, i, j);
                let v = got[i as usize * MAX_LEN + j];
                if v != want {
                    return Err(format!("chunk {i} element {j} is {v:#x}, want {want:#x}"));
                }
            }
        }
    }
    // A round trip in stream order: the odd PE waits on the stream for the even PE's
    // signal, sends chunk 0 back with put_on_stream and signals with a put_signal.
    rt.barrier_all_on_stream(&stream).map_err(e2s)?;
    stream.synchronize().map_err(e2s)?;
    if me % 2 == 0 {
        rt.put_signal_on_stream(
            regions.at(0),
            src.at(0),
            1,
            sig.at(1),
            7,
            SignalOp::Set,
            me + 1,
            &stream,
        )
        .map_err(e2s)?;
        rt.quiet_on_stream(&stream).map_err(e2s)?;
        rt.signal_wait_until_on_stream(sig.at(1), Cmp::Eq, 9, &stream)
            .map_err(e2s)?;
        stream.synchronize().map_err(e2s)?;
        let mut back = [0u64];
        rt.get(regions.at(0), &mut back, me).map_err(e2s)?;
        if back[0] != pattern(me as u32 + 1, 5, 0) {
            return Err(format!("round trip: got {:#x}", back[0]));
        }
    } else {
        rt.signal_wait_until_on_stream(sig.at(1), Cmp::Eq, 7, &stream)
            .map_err(e2s)?;
        rt.put_on_stream(regions.at(0), src.at(5 * MAX_LEN), 1, me - 1, &stream)
            .map_err(e2s)?;
        rt.quiet_on_stream(&stream).map_err(e2s)?;
        rt.put_signal_on_stream(
            regions.at(1),
            src.at(1),
            1,
            sig.at(1),
            9,
            SignalOp::Set,
            me - 1,
            &stream,
        )
        .map_err(e2s)?;
        stream.synchronize().map_err(e2s)?;
    }
    rt.barrier_all().map_err(e2s)?;
    // get_on_stream: the partner's whole source (its pattern) into this PE's regions.
    let partner = me ^ 1;
    rt.get_on_stream(regions.at(0), src.at(0), total, partner, &stream)
        .map_err(e2s)?;
    stream.synchronize().map_err(e2s)?;
    let mut got = vec![0u64; total];
    rt.get(regions.at(0), &mut got, me).map_err(e2s)?;
    for (x, v) in got.iter().enumerate() {
        let want = pattern(partner as u32, (x / MAX_LEN) as u32, x % MAX_LEN);
        if *v != want {
            return Err(format!(
                "get_on_stream: element {x} is {v:#x}, want {want:#x}"
            ));
        }
    }
    rt.barrier_all().map_err(e2s)?;
    rt.free(bad).map_err(e2s)?;
    rt.free(sig).map_err(e2s)?;
    rt.free(src).map_err(e2s)?;
    rt.free(regions).map_err(e2s)
}
