//! The PMI-1 client against a fake process manager: threads that speak the text protocol
//! over socketpairs (as Hydra's `PMI_FD`) or TCP (as `PMI_PORT`).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Barrier, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::*;
use crate::interface::Bootstrap;

const KVS: &str = "kvs_4242_0";

/// A fake server's answer to one request line: lines to send back, or `None` to close.
type Script = dyn Fn(&str) -> Option<String> + Send + Sync;

/// The node layout the fake process manager publishes: ranks 0 and 1 on node 0, rank 2 on
/// node 1.
const MAPPING: &str = "(vector,(0,1,2),(1,1,1))";

/// Hydra's answers, with a shared KVS (holding [`MAPPING`] as `PMI_process_mapping`) and
/// a barrier of `n` ranks.
fn hydra_like(n: usize, maxes: &'static str) -> Arc<Script> {
    let kvs: Arc<Mutex<HashMap<String, String>>> = Arc::new(Mutex::new(HashMap::from([(
        PROCESS_MAPPING_KEY.to_string(),
        MAPPING.to_string(),
    )])));
    let barrier = Arc::new(Barrier::new(n));
    Arc::new(move |line: &str| {
        let words: HashMap<&str, &str> = line
            .split_whitespace()
            .filter_map(|w| w.split_once('='))
            .collect();
        let reply = match words.get("cmd").copied() {
            Some("init") => "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0".into(),
            Some("get_maxes") => format!("cmd=maxes {maxes}"),
            Some("get_my_kvsname") => format!("cmd=my_kvsname kvsname={KVS}"),
            Some("put") => {
                kvs.lock()
                    .unwrap()
                    .insert(words["key"].into(), words["value"].into());
                "cmd=put_result rc=0 msg=success".into()
            }
            Some("barrier_in") => {
                barrier.wait();
                "cmd=barrier_out".into()
            }
            Some("get") => match kvs.lock().unwrap().get(words["key"]) {
                Some(v) => format!("cmd=get_result rc=0 msg=success value={v}"),
                None => "cmd=get_result rc=-1 msg=key_not_found".into(),
            },
            Some("finalize") => "cmd=finalize_ack".into(),
            Some("initack") => {
                "cmd=initack\ncmd=set size=2\ncmd=set rank=RANK\ncmd=set debug=0".into()
            }
            _ => return None,
        };
        Some(reply)
    })
}

const HYDRA_MAXES: &str = "kvsname_max=256 keylen_max=64 vallen_max=1024";

/// Serves `script` on one connection until it closes or the script says to close.
fn serve<S: std::io::Read + Write + Send + 'static>(
    stream: S,
    reader: impl std::io::Read + Send + 'static,
    script: Arc<Script>,
    rank_for_initack: usize,
) -> JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let mut stream = stream;
        let mut seen = Vec::new();
        for line in BufReader::new(reader).lines() {
            let Ok(line) = line else { break };
            seen.push(line.clone());
            let Some(reply) = script(&line) else { break };
            let reply = reply.replace("RANK", &rank_for_initack.to_string());
            if stream.write_all(format!("{reply}\n").as_bytes()).is_err() {
                break;
            }
        }
        seen
    })
}

/// A client over a socketpair served by `script`, as if `PMI_FD` named it.
fn pair_client(script: Arc<Script>, timeout: Duration) -> (PmiClient, JoinHandle<Vec<String>>) {
    let (mine, theirs) = UnixStream::pair().unwrap();
    let server = serve(theirs.try_clone().unwrap(), theirs, script, 0);
    let vars = format!("PMI_FD={}", mine.as_raw_fd());
    let client = PmiClient::over(
        Box::new(mine),
        &vars,
        timeout,
        crate::duration::deadline_after(timeout),
    );
    (client, server)
}

fn env_of(rank: usize, size: usize) -> PmiEnv {
    PmiEnv {
        endpoint: Endpoint::Fd(-1),
        rank: Some(rank),
        size: Some(size),
        vars: format!("PMI_RANK={rank}, PMI_SIZE={size}"),
        slurm_node: None,
    }
}

fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| map.get(k).cloned()
}

const TIMEOUT: Duration = Duration::from_secs(10);

/// One init over a fresh session, then finalize, as a process that inits once does.
fn join_over(
    client: PmiClient,
    env: &PmiEnv,
    ifname: Option<&str>,
    timeout: Duration,
) -> Result<TcpBootstrap, BootstrapError> {
    let mut session = Session::open(client, env)?;
    let joined = session.exchange(ifname, env.slurm_node.clone(), timeout)?;
    session.client.finalize()?;
    Ok(joined)
}

#[test]
fn three_ranks_init_put_barrier_get_then_rendezvous() {
    let script = hydra_like(3, HYDRA_MAXES);
    let ranks: Vec<_> = (0..3)
        .map(|rank| {
            let (client, server) = pair_client(script.clone(), TIMEOUT);
            let joiner = std::thread::spawn(move || {
                let b = join_over(client, &env_of(rank, 3), Some("lo"), TIMEOUT)?;
                let all = b.allgather(&[rank as u8])?;
                Ok::<_, BootstrapError>((b.rank(), b.size(), all, b.launcher_node()))
            });
            (joiner, server)
        })
        .collect();
    for (rank, (joiner, server)) in ranks.into_iter().enumerate() {
        let (r, n, all, node) = joiner.join().unwrap().unwrap();
        assert_eq!((r, n), (rank, 3));
        assert_eq!(all, vec![vec![0], vec![1], vec![2]]);
        let want_node = if rank < 2 { "0" } else { "1" };
        assert_eq!(
            node,
            Some(LauncherNode::new(want_node, PMI_PROCESS_MAPPING)),
            "rank {rank}"
        );
        let seen = server.join().unwrap();
        let cmds: Vec<&str> = seen
            .iter()
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        let want: &[&str] = if rank == 0 {
            &[
                "cmd=init",
                "cmd=get_maxes",
                "cmd=get_my_kvsname",
                "cmd=put",
                "cmd=barrier_in",
                "cmd=get",
                "cmd=finalize",
            ]
        } else {
            &[
                "cmd=init",
                "cmd=get_maxes",
                "cmd=get_my_kvsname",
                "cmd=barrier_in",
                "cmd=get",
                "cmd=get",
                "cmd=finalize",
            ]
        };
        assert_eq!(cmds, want, "rank {rank}: {seen:?}");
        assert_eq!(seen[0], "cmd=init pmi_version=1 pmi_subversion=1");
        assert!(
            seen[seen.len() - 2].ends_with(&format!("key={PROCESS_MAPPING_KEY}")),
            "{seen:?}"
        );
        let kvs_words = format!("kvsname={KVS} key={RENDEZVOUS_KEY}");
        assert!(
            seen[if rank == 0 { 3 } else { 4 }].contains(&kvs_words),
            "{seen:?}"
        );
    }
}

#[test]
fn successive_inits_reuse_the_session_with_a_key_per_init() {
    let script = hydra_like(2, HYDRA_MAXES);
    let ranks: Vec<_> = (0..2)
        .map(|rank| {
            let (client, server) = pair_client(script.clone(), TIMEOUT);
            let joiner = std::thread::spawn(move || {
                let mut session = Session::open(client, &env_of(rank, 2))?;
                for round in 0..3u8 {
                    let b = session.exchange(Some("lo"), None, TIMEOUT)?;
                    assert_eq!(b.allgather(&[round])?, vec![vec![round]; 2]);
                }
                session.client.finalize()
            });
            (joiner, server)
        })
        .collect();
    for (rank, (joiner, server)) in ranks.into_iter().enumerate() {
        joiner.join().unwrap().unwrap();
        let seen = server.join().unwrap();
        assert_eq!(
            seen.iter().filter(|l| l.starts_with("cmd=init ")).count(),
            1,
            "{seen:?}"
        );
        assert_eq!(seen.iter().filter(|l| *l == "cmd=barrier_in").count(), 3);
        for n in 0..3 {
            let key = format!("key={RENDEZVOUS_KEY}-{n}");
            assert!(
                seen.iter().any(|l| l.contains(&key)),
                "rank {rank} never used {key}: {seen:?}"
            );
        }
    }
}

#[test]
fn pmi_port_and_pmi_id_take_rank_and_size_from_the_handshake() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let script = hydra_like(2, HYDRA_MAXES);
    let accept = std::thread::spawn(move || {
        (0..2)
            .map(|_| {
                let (s, _) = listener.accept().unwrap();
                s
            })
            .collect::<Vec<_>>()
    });
    let joiners: Vec<_> = (0..2u64)
        .map(|id| {
            let get = lookup(&[("PMI_PORT", &addr), ("PMI_ID", &id.to_string())]);
            let env = pmi_env(&get).unwrap().unwrap();
            assert_eq!(env.rank, None);
            // Connect in order, so the fake server's n-th connection is rank n.
            let client = PmiClient::connect(&env, TIMEOUT).unwrap();
            (env, client)
        })
        .collect();
    let servers: Vec<_> = accept
        .join()
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(rank, s)| serve(s.try_clone().unwrap(), s, script.clone(), rank))
        .collect();
    let handles: Vec<_> = joiners
        .into_iter()
        .map(|(env, client)| {
            std::thread::spawn(move || {
                join_over(client, &env, Some("lo"), TIMEOUT).map(|b| (b.rank(), b.size()))
            })
        })
        .collect();
    let mut got: Vec<_> = handles
        .into_iter()
        .map(|h| h.join().unwrap().unwrap())
        .collect();
    got.sort();
    assert_eq!(got, vec![(0, 2), (1, 2)]);
    for s in servers {
        assert!(s.join().unwrap()[0].starts_with("cmd=initack pmiid="));
    }
}

#[test]
fn a_value_longer_than_vallen_max_is_refused_before_sending() {
    let script = hydra_like(1, "kvsname_max=256 keylen_max=64 vallen_max=16");
    let (client, _server) = pair_client(script, TIMEOUT);
    let err = join_over(client, &env_of(0, 2), Some("lo"), TIMEOUT)
        .err()
        .expect("an error");
    let text = err.to_string();
    assert!(text.contains("vallen_max=16"), "{text}");
    assert!(text.contains("at most 15 bytes"), "{text}");
}

#[test]
fn a_key_longer_than_keylen_max_is_refused_before_sending() {
    let script = hydra_like(1, "kvsname_max=256 keylen_max=8 vallen_max=1024");
    let (client, _server) = pair_client(script, TIMEOUT);
    let err = join_over(client, &env_of(1, 2), Some("lo"), TIMEOUT)
        .err()
        .expect("an error");
    // Rank 1 reaches the barrier alone (a job of one at the fake server), then `get`.
    assert!(err.to_string().contains("keylen_max=8"), "{err}");
}

#[test]
fn a_kvsname_over_the_servers_own_limit_is_an_error() {
    let script = hydra_like(1, "kvsname_max=4 keylen_max=64 vallen_max=1024");
    let (client, _server) = pair_client(script, TIMEOUT);
    let err = join_over(client, &env_of(0, 2), Some("lo"), TIMEOUT)
        .err()
        .expect("an error");
    assert!(err.to_string().contains("kvsname_max=4"), "{err}");
}

fn error_with(script: Arc<Script>) -> (String, Duration) {
    let start = Instant::now();
    let timeout = Duration::from_secs(2);
    let (client, _server) = pair_client(script, timeout);
    let err = join_over(client, &env_of(1, 2), Some("lo"), timeout)
        .err()
        .expect("an error");
    (err.to_string(), start.elapsed())
}

#[test]
fn a_server_that_answers_garbage_is_named_with_the_command() {
    let (text, _) = error_with(Arc::new(|_: &str| Some("hello there".into())));
    assert!(
        text.contains("answered cmd=init with \"hello there\""),
        "{text}"
    );
    assert!(text.contains("PMI server (PMI_FD="), "{text}");
    let (text, _) = error_with(Arc::new(|l: &str| {
        Some(if l.starts_with("cmd=init") {
            "cmd=response_to_init rc=0".into()
        } else {
            "cmd=maxes kvsname_max=many".into()
        })
    }));
    assert!(
        text.contains("cmd=get_maxes") && text.contains("no number kvsname_max="),
        "{text}"
    );
}

#[test]
fn a_server_that_closes_mid_init_is_named() {
    let (text, elapsed) = error_with(Arc::new(|_: &str| None));
    assert!(
        text.contains("during cmd=init: the server closed the connection"),
        "{text}"
    );
    assert!(elapsed < Duration::from_secs(2), "{elapsed:?}");
}

#[test]
fn rc_minus_one_is_a_refusal_naming_the_command_and_message() {
    let (text, _) = error_with(Arc::new(|l: &str| {
        Some(if l.starts_with("cmd=init") {
            "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1 msg=version_mismatch".into()
        } else {
            "cmd=unexpected".into()
        })
    }));
    assert!(
        text.contains("refused cmd=init (rc=-1, msg=version_mismatch)"),
        "{text}"
    );
    // Rank 1's get of a key rank 0 never put.
    let script = hydra_like(1, HYDRA_MAXES);
    let (text, _) = error_with(script);
    assert!(
        text.contains("refused cmd=get (rc=-1, msg=key_not_found)"),
        "{text}"
    );
}

#[test]
fn a_barrier_that_never_completes_times_out_naming_barrier_in() {
    // Two ranks expected, one arrives: the fake server's barrier never opens.
    let script = hydra_like(2, HYDRA_MAXES);
    let (text, elapsed) = error_with(script);
    assert!(
        text.contains("during cmd=barrier_in: no answer within 2s"),
        "{text}"
    );
    assert!(text.contains("SYMMEM_BOOTSTRAP_TIMEOUT"), "{text}");
    assert!(elapsed < Duration::from_secs(4), "{elapsed:?}");
}

#[test]
fn pmi_fd_that_is_a_regular_file_is_named() {
    let file = std::fs::File::open("/proc/self/status").unwrap();
    let fd = file.as_raw_fd().to_string();
    let get = lookup(&[("PMI_FD", &fd), ("PMI_RANK", "0"), ("PMI_SIZE", "2")]);
    let env = pmi_env(&get).unwrap().unwrap();
    let err = PmiClient::connect(&env, TIMEOUT).unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("PMI_FD={fd} is not a socket")),
        "{err}"
    );
    // The file is still ours: it was not taken over.
    drop(file);
}

#[test]
fn pmi_fd_that_is_closed_is_named() {
    // Far above anything this test process opens, so no other test opens it meanwhile.
    let get = lookup(&[("PMI_FD", "1000000"), ("PMI_RANK", "0"), ("PMI_SIZE", "2")]);
    let env = pmi_env(&get).unwrap().unwrap();
    let err = PmiClient::connect(&env, TIMEOUT).unwrap_err();
    assert!(
        err.to_string()
            .contains("PMI_FD=1000000 is not an open file descriptor"),
        "{err}"
    );
}

#[test]
fn pmi_variables_are_checked_and_named() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[("PMI_FD", "seven"), ("PMI_RANK", "0"), ("PMI_SIZE", "2")],
            "PMI_FD=\"seven\" is not a file descriptor number",
        ),
        (
            &[("PMI_FD", "5")],
            "PMI_RANK and PMI_SIZE must be set with PMI_FD",
        ),
        (
            &[("PMI_FD", "5"), ("PMI_RANK", "2"), ("PMI_SIZE", "2")],
            "PMI_RANK=2 is out of range for PMI_SIZE=2",
        ),
        (
            &[("PMI_FD", "5"), ("PMI_RANK", "0"), ("PMI_SIZE", "0")],
            "PMI_SIZE=0 is out of range",
        ),
        (
            &[("PMI_FD", "5"), ("PMI_RANK", "0"), ("PMI_SIZE", "70000")],
            "PMI_SIZE=70000 is out of range",
        ),
        (
            &[("PMI_FD", "5"), ("PMI_RANK", "x"), ("PMI_SIZE", "2")],
            "PMI_RANK=\"x\"",
        ),
        (
            &[("PMI_PORT", "nohost")],
            "PMI_PORT=\"nohost\" is not host:port",
        ),
        (&[("PMI_PORT", "h:1"), ("PMI_ID", "-3")], "PMI_ID=\"-3\""),
    ];
    for (vars, want) in cases {
        let err = pmi_env(&lookup(vars)).unwrap_err();
        assert!(err.to_string().contains(want), "{vars:?}: {err}");
    }
    assert_eq!(pmi_env(&lookup(&[("PMI_RANK", "0")])).unwrap(), None);
}

#[test]
fn an_unreachable_pmi_port_fails_within_the_timeout() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let get = lookup(&[("PMI_PORT", &addr), ("PMI_ID", "0")]);
    let env = pmi_env(&get).unwrap().unwrap();
    let start = Instant::now();
    let err = PmiClient::connect(&env, Duration::from_secs(1)).unwrap_err();
    assert!(
        err.to_string().contains(&format!("PMI_PORT={addr}")),
        "{err}"
    );
    assert!(start.elapsed() < Duration::from_secs(3));
}

#[test]
fn a_handshake_rank_out_of_range_names_the_server() {
    let (mine, theirs) = UnixStream::pair().unwrap();
    let script: Arc<Script> = Arc::new(|_: &str| {
        Some("cmd=initack\ncmd=set size=2\ncmd=set rank=5\ncmd=set debug=0".into())
    });
    let _server = serve(theirs.try_clone().unwrap(), theirs, script, 0);
    let env = PmiEnv {
        endpoint: Endpoint::Port {
            addr: "127.0.0.1:1".into(),
            id: Some(5),
        },
        rank: None,
        size: None,
        vars: "PMI_PORT=127.0.0.1:1, PMI_ID=5".into(),
        slurm_node: None,
    };
    let client = PmiClient::over(
        Box::new(mine),
        &env.vars,
        TIMEOUT,
        crate::duration::deadline_after(TIMEOUT),
    );
    let err = Session::open(client, &env).err().expect("an error");
    let text = err.to_string();
    assert!(
        text.contains("PMI server (PMI_PORT=127.0.0.1:1, PMI_ID=5) handshake: rank 5 is out of range for size 2"),
        "{text}"
    );
}

#[test]
fn without_a_usable_process_mapping_the_slurm_node_is_used() {
    // One server that lacks the key, one whose value is not a vector mapping: neither is an
    // error, and the session goes on to the rendezvous.
    let hydra = hydra_like(1, HYDRA_MAXES);
    let garbage: Arc<Script> = Arc::new(move |line: &str| {
        if line.contains(&format!("key={PROCESS_MAPPING_KEY}")) {
            Some("cmd=get_result rc=0 msg=success value=(block,(0,1,1))".into())
        } else {
            hydra(line)
        }
    });
    let missing = hydra_like(1, HYDRA_MAXES);
    let absent: Arc<Script> = Arc::new(move |line: &str| {
        if line.contains(&format!("key={PROCESS_MAPPING_KEY}")) {
            Some("cmd=get_result rc=-1 msg=key_not_found".into())
        } else {
            missing(line)
        }
    });
    let slurm = LauncherNode::new("n07", "Slurm SLURMD_NODENAME");
    for script in [garbage, absent] {
        let (client, server) = pair_client(script, TIMEOUT);
        let env = PmiEnv {
            slurm_node: Some(slurm.clone()),
            ..env_of(0, 1)
        };
        let b = join_over(client, &env, Some("lo"), TIMEOUT).unwrap();
        assert_eq!(b.launcher_node(), Some(slurm.clone()));
        drop(b);
        server.join().unwrap();
    }
    // srun --mpi=pmi2 sets Slurm's node variables next to the PMI ones.
    let get = lookup(&[
        ("PMI_FD", "5"),
        ("PMI_RANK", "0"),
        ("PMI_SIZE", "2"),
        ("SLURMD_NODENAME", "n07"),
    ]);
    assert_eq!(pmi_env(&get).unwrap().unwrap().slurm_node, Some(slurm));
}

mod properties {
    use super::*;
    use proptest::collection::vec;
    use proptest::prelude::*;

    /// A reply line: mostly well-formed words a PMI server sends, sometimes not.
    fn line() -> impl Strategy<Value = String> {
        let key = prop_oneof![
            Just("cmd"),
            Just("rc"),
            Just("msg"),
            Just("size"),
            Just("rank"),
            Just("kvsname"),
            Just("kvsname_max"),
            Just("keylen_max"),
            Just("vallen_max"),
            Just("value"),
        ];
        let value = prop_oneof![
            Just("initack".to_string()),
            Just("set".to_string()),
            Just("response_to_init".to_string()),
            Just("maxes".to_string()),
            Just("my_kvsname".to_string()),
            Just("put_result".to_string()),
            Just("barrier_out".to_string()),
            Just("get_result".to_string()),
            Just("finalize_ack".to_string()),
            Just("0".to_string()),
            "[0-9]{1,22}",
            "[ -~]{0,12}",
        ];
        prop_oneof![
            4 => vec((key, value).prop_map(|(k, v)| format!("{k}={v}")), 0..5)
                .prop_map(|words| words.join(" ")),
            1 => "[^\\n]{0,30}",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever a server answers, the session ends in an error or completes: never
        /// a panic.
        #[test]
        fn arbitrary_replies_never_panic(
            lines in vec(line(), 0..16),
            bytes in vec(any::<u8>(), 0..100),
        ) {
            let _ = replay(&bytes);
            let _ = replay((lines.join("\n") + "\n").as_bytes());
        }
    }

    /// The replay reaches the end of a session when every reply is right.
    #[test]
    fn a_well_formed_session_replays_to_the_end() {
        let id = format!("symmem-uid-v2:127.0.0.1:5:{}", "ab".repeat(32));
        let replies = [
            "cmd=initack",
            "cmd=set size=2",
            "cmd=set rank=1",
            "cmd=set debug=0",
            "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0",
            "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024",
            "cmd=my_kvsname kvsname=kvs_1",
            "cmd=get_result rc=0 value=(vector,(0,2,1))",
            "cmd=put_result rc=0",
            "cmd=barrier_out",
            &format!("cmd=get_result rc=0 value={id}"),
            "cmd=finalize_ack",
        ];
        replay((replies.join("\n") + "\n").as_bytes()).unwrap();
        let err = replay(b"cmd=initack\ncmd=set size=2\n").unwrap_err();
        assert!(err.to_string().contains("closed the connection"), "{err}");
    }
}
