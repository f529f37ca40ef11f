//! Two PEs in two network namespaces joined by a veth pair: they share a kernel but no
//! network namespace, so they are different nodes and no shared memory can be involved;
//! every operation crosses the socket transport over the veth addresses.
//!
//! Needs root and `ip netns` (iproute2). Otherwise the test prints `SKIPPED: <reason>`
//! and passes. Namespaces and interfaces are named after this process's id, so parallel
//! runs do not collide, and a guard deletes them whatever happens.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{test_pe, wait_output};

/// The two ends: (namespace, veth interface, address/prefix).
struct Ends {
    ns: [String; 2],
    veth: [String; 2],
}

const ADDRS: [&str; 2] = ["10.77.0.1/24", "10.77.0.2/24"];

/// Runs `ip ARGS`; Err carries the command and its stderr.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {} {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Deletes the namespaces (which deletes the veth ends inside them) and a veth end left
/// in this namespace if setup stopped before moving it.
struct Guard(Ends);

impl Drop for Guard {
    fn drop(&mut self) {
        for ns in &self.0.ns {
            let _ = ip(&["netns", "del", ns]);
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.0.veth[0]])
            .stderr(Stdio::null())
            .status();
    }
}

/// Creates the namespaces, the veth pair and the addresses. Err(reason) before anything
/// exists means the machine cannot do it (a skip); the guard cleans up what exists.
fn setup() -> Result<Guard, String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root (network namespaces need CAP_SYS_ADMIN)".into());
    }
    let pid = std::process::id();
    let ends = Ends {
        ns: [format!("symmem-a{pid}"), format!("symmem-b{pid}")],
        // Interface names have at most 15 bytes.
        veth: [format!("smva{pid}"), format!("smvb{pid}")],
    };
    // Names of a crashed earlier run whose pid this process reuses are stale: drop them.
    drop(Guard(Ends {
        ns: ends.ns.clone(),
        veth: ends.veth.clone(),
    }));
    ip(&["netns", "add", &ends.ns[0]]).map_err(|e| format!("ip netns unsupported: {e}"))?;
    let guard = Guard(ends);
    let Ends { ns, veth } = &guard.0;
    ip(&["netns", "add", &ns[1]])?;
    ip(&[
        "link", "add", &veth[0], "type", "veth", "peer", "name", &veth[1],
    ])
    .map_err(|e| format!("veth unsupported: {e}"))?;
    for i in 0..2 {
        ip(&["link", "set", &veth[i], "netns", &ns[i]])?;
        ip(&["-n", &ns[i], "addr", "add", ADDRS[i], "dev", &veth[i]])?;
        ip(&["-n", &ns[i], "link", "set", &veth[i], "up"])?;
        ip(&["-n", &ns[i], "link", "set", "lo", "up"])?;
    }
    Ok(guard)
}

/// `symmem-test-pe netns ARGS` inside namespace `i`, on its veth.
/// Starts `symmem-test-pe netns ARGS` in namespace `i`; a joining PE gets the unique id in
/// its environment (never argv: the id is a secret).
fn spawn_in(ends: &Ends, i: usize, args: &[&str], uid: Option<&str>) -> std::process::Child {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ends.ns[i], test_pe(), "netns"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("SYMMEM_SOCKET_IFNAME", &ends.veth[i])
        .env("SYMMEM_REMOTE_TRANSPORT", "socket")
        .env("SYMMEM_DEBUG", "info")
        .env("SYMMEM_DEBUG_SUBSYS", "init")
        .env("SYMMEM_BOOTSTRAP_TIMEOUT", "60");
    for var in [
        "SYMMEM_LAUNCH_ADDR",
        "SYMMEM_LAUNCH_SECRET",
        "SYMMEM_LAUNCH_RANK",
        "SYMMEM_LAUNCH_SIZE",
        "SYMMEM_NODE_ID",
        "SYMMEM_SIMULATE_NODES",
        "SYMMEM_DISABLE_P2P",
    ] {
        cmd.env_remove(var);
    }
    if let Some(uid) = uid {
        cmd.env("SYMMEM_TEST_UID", uid);
    }
    cmd.spawn().expect("spawning ip netns exec symmem-test-pe")
}

/// Reads the `UID ...` line that rank 0 prints, leaving the rest of its output piped.
fn read_uid_line(root: &mut std::process::Child) -> String {
    use std::io::Read;
    let out = root.stdout.as_mut().unwrap();
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while out.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    let line = String::from_utf8(line).unwrap();
    line.strip_prefix("UID ")
        .unwrap_or_else(|| panic!("expected a UID line from PE 0, got {line:?}"))
        .to_string()
}

/// A veth end's byte counter, read inside its namespace.
fn veth_bytes(ends: &Ends, i: usize, counter: &str) -> u64 {
    let out = Command::new("ip")
        .args(["netns", "exec", &ends.ns[i], "cat"])
        .arg(format!(
            "/sys/class/net/{}/statistics/{counter}",
            ends.veth[i]
        ))
        .output()
        .expect("reading the veth counters");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("veth counter {counter}: {out:?}"))
}

#[test]
fn socket_transport_between_two_network_namespaces() {
    let guard = match setup() {
        Ok(g) => g,
        Err(reason) => {
            println!("SKIPPED: {reason}");
            eprintln!("SKIPPED: {reason}");
            return;
        }
    };
    let ends = &guard.0;
    let mut root = spawn_in(ends, 0, &["0", "2"], None);
    let uid = read_uid_line(&mut root);
    // The rendezvous listens on PE 0's veth address, which PE 1 reaches across the pair.
    assert!(
        uid.contains(":10.77.0.1:"),
        "unique id {uid} is not on {}",
        ADDRS[0]
    );
    let joiner = spawn_in(ends, 1, &["1", "2"], Some(&uid));
    let jobs = [root, joiner].map(|c| wait_output(c, Duration::from_secs(120)));
    for (me, job) in jobs.iter().enumerate() {
        let other = 1 - me;
        job.assert_success();
        for want in [
            format!("PE {me}: node "),
            format!("PE {me}: rma ok"),
            format!("PE {me}: put_signal ok"),
            format!("PE {me}: atomics ok"),
            format!("PE {me}: put_signal_large ok"),
            format!("PE {me}: netns ok"),
        ] {
            assert!(
                job.stdout.contains(&want),
                "PE {me} did not print {want:?}\nstdout:\n{}\nstderr:\n{}",
                job.stdout,
                job.stderr
            );
        }
        // The nodes differ by network namespace (same boot id and IPC namespace).
        let nodes = job.lines_with(&format!("PE {me}: node "));
        assert!(
            nodes
                .iter()
                .any(|l| l.contains("(other node)") && l.contains("net=")),
            "PE {me}'s node line: {nodes:?}"
        );
        let route = format!("PE {me} reaches PE {other} over socket");
        assert!(
            job.stderr.contains(&route),
            "PE {me} did not log {route:?}\nstderr:\n{}",
            job.stderr
        );
    }
    // Everything crossed the veth pair: at least the 1 MiB put, 1 MiB get answer and
    // 6 × 3 MiB of put_signal_large each way.
    for i in 0..2 {
        let (tx, rx) = (
            veth_bytes(ends, i, "tx_bytes"),
            veth_bytes(ends, i, "rx_bytes"),
        );
        assert!(
            tx >= 20 << 20 && rx >= 20 << 20,
            "{}: tx {tx} B, rx {rx} B: the traffic did not cross the veth pair",
            ends.veth[i]
        );
        println!("{}: tx {tx} B, rx {rx} B", ends.veth[i]);
    }
    drop(guard);
}
