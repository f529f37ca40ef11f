//! The hang report (`SYMMEM_HANG_REPORT`): when a host wait has blocked that long, its PE
//! gathers every PE's wait record over a side path that works while the data path is
//! stuck, builds the wait-for graph and logs one report naming the root. A report can also
//! be asked for: SIGUSR1 to a PE's process ([`symmem_bootstrap::report_signal`]) makes
//! that PE report at once, hang or not (a snapshot of every PE's state).
//!
//! [`record`] is what each PE publishes, [`reporter`] the side path (a listener thread per
//! PE, which also notices requests), [`graph`] the analysis. The wait itself still ends
//! only at `SYMMEM_TIMEOUT`.

mod graph;
pub(crate) mod record;
mod reporter;
mod test_loop;

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use symmem_bootstrap::{report_signal, Bootstrap};
use symmem_transport::Transport;

use crate::config::Config;
use crate::error::Result;
use graph::{analyse, describe, Analysis};
use record::{PeState, WaitBoard};
use reporter::{Peers, Reporter, Request};

/// At least this long between two reports of one PE: a hang lasts, and one report names
/// it (a wait retried after `SYMMEM_TIMEOUT`, or the next wait, would report it again).
const MIN_INTERVAL: Duration = Duration::from_secs(60);

/// A PE's hang reporting: its published waits, its listener, its reports of slow waits
/// and the SIGUSR1 handler it holds.
pub(crate) struct HangReport {
    /// This PE's slow waits.
    pub board: Arc<WaitBoard>,
    /// This PE's loop of failing `test` calls, if one runs.
    pub tests: Arc<test_loop::TestLoop>,
    /// How long a wait blocks before a report (`SYMMEM_HANG_REPORT`).
    pub after: Duration,
    slow: Arc<SlowReports>,
    /// Dropped before `_signal`: no request is served once the handler is gone.
    reporter: Reporter,
    /// SIGUSR1 asks for a report while it lives (`None`: the application handles SIGUSR1);
    /// dropping the last of the process puts the previous disposition back.
    _signal: Option<report_signal::Handler>,
    /// Sources of waits beside the host wait loops (the transport's calls, the loop of
    /// tests); asked by `board` until dropped.
    _sources: Vec<record::SourceGuard>,
}

/// The reports of slow waits, once per hang: made by a host wait loop that has blocked
/// `after` ([`HangReport::report`]), or by the listener thread for a wait that does not
/// report itself (a transport's, a loop of tests, a kernel's).
struct SlowReports {
    after: Duration,
    output: Output,
    /// When this PE last reported, to report once per hang.
    last: Mutex<Option<Instant>>,
}

/// Why a report is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trigger {
    /// The reporting PE's wait blocked `SYMMEM_HANG_REPORT`.
    SlowWait,
    /// Asked for (SIGUSR1): a snapshot, hang or not.
    Asked,
}

impl Trigger {
    /// As the JSON report names it.
    fn name(self) -> &'static str {
        match self {
            Trigger::SlowWait => "slow wait",
            Trigger::Asked => "asked",
        }
    }
}

/// Where a PE's reports go: the log, and the JSON line to `SYMMEM_HANG_REPORT_FILE` if set.
#[derive(Debug, Clone)]
struct Output {
    me: usize,
    file: Option<std::path::PathBuf>,
}

impl HangReport {
    /// Starts hang reporting unless `SYMMEM_HANG_REPORT` is 0 or the job has one PE, with
    /// SIGUSR1 asking for a report and `transport`'s blocked calls among the waits shown.
    /// Collective (every PE has the same configuration, and the listeners' addresses go
    /// round in one allgather). Left at its default, a side path that cannot start is
    /// warned about and the job goes on without it.
    pub fn start(
        config: &Config,
        b: &dyn Bootstrap,
        transport: Option<&Arc<dyn Transport>>,
    ) -> Result<Option<HangReport>> {
        let Some(after) = config.hang_report else {
            return Ok(None);
        };
        if b.size() == 1 && !config.hang_report_asked {
            return Ok(None);
        }
        let board = Arc::new(WaitBoard::new());
        let output = Output {
            me: b.rank(),
            file: config.hang_report_file.clone(),
        };
        let slow = Arc::new(SlowReports {
            after,
            output: output.clone(),
            last: Mutex::new(None),
        });
        let on_request = {
            let (board, slow) = (board.clone(), slow.clone());
            Arc::new(move |peers: &Peers, request: Request| match request {
                Request::Asked => output.write(Trigger::Asked, &peers.gather(&board)),
                Request::Due => {
                    slow.report(peers, &board);
                }
            })
        };
        let watch = {
            // The wait of a source that lasted `after`, reported once.
            let board = board.clone();
            let mut reported: Option<Instant> = None;
            Box::new(move || match board.source_wait() {
                Some(w) if w.since.elapsed() >= after && reported != Some(w.since) => {
                    reported = Some(w.since);
                    true
                }
                _ => false,
            })
        };
        let started = Reporter::start(
            b,
            config.socket_ifname.as_deref(),
            board.clone(),
            on_request,
            watch,
        );
        let reporter = match started {
            Ok(r) => r,
            Err(e) if !config.hang_report_asked => {
                tracing::warn!(target: "hang", "PE {}: no hang reports in this job (SYMMEM_HANG_REPORT=0 silences this): {e}", b.rank());
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let tests = Arc::new(test_loop::TestLoop::default());
        let mut sources = vec![board.add_source(Box::new({
            let tests = tests.clone();
            move || tests.wait()
        }))];
        sources.extend(transport.map(|t| {
            let t = t.clone();
            board.add_source(Box::new(move || {
                t.blocked().map(|c| record::Wait {
                    op: c.op.into(),
                    detail: c.detail,
                    peer: c.peer,
                    collective: None,
                    since: c.since,
                })
            }))
        }));
        let signal = report_signal::install(&format!("PE {}", b.rank()));
        Ok(Some(HangReport {
            board,
            tests,
            after,
            slow,
            reporter,
            _signal: signal,
            _sources: sources,
        }))
    }

    /// Called by PE `me`'s wait that has blocked `after` or more: gathers, analyses and
    /// logs one report ([`SlowReports::report`]). Returns when the wait is to try again.
    pub fn report(&self, me: usize) -> Option<Instant> {
        debug_assert_eq!(me, self.slow.output.me);
        self.slow.report(self.reporter.peers(), &self.board)
    }
}

impl SlowReports {
    /// Gathers every PE's state over `peers` and writes one report, unless this PE
    /// reported less than [`MIN_INTERVAL`] (or `after`, if longer) ago (the same hang,
    /// still going) or a lower PE waits too (it reports the hang). Returns when the wait
    /// is to try again: `None` once it has reported, or for the same hang; in `after`
    /// when a lower PE waits (unless its wait ends first).
    fn report(&self, peers: &Peers, board: &WaitBoard) -> Option<Instant> {
        let me = self.output.me;
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|t| t.elapsed() < self.after.max(MIN_INTERVAL)) {
            return None;
        }
        let states = peers.gather(board);
        let lower_reports = states[..me]
            .iter()
            .any(|s| matches!(s, PeState::Waiting { .. }));
        if lower_reports {
            tracing::debug!(target: "hang", "PE {me}: a lower PE waits too and reports the hang");
            return Some(Instant::now() + self.after);
        }
        *last = Some(Instant::now());
        drop(last);
        self.output.write(Trigger::SlowWait, &states);
        None
    }
}

impl Output {
    /// Analyses `states` and writes the report: the text to the log (error level for a
    /// hang, warn for an asked-for report that finds none), the JSON line to the file, or
    /// to the log where none is set.
    fn write(&self, trigger: Trigger, states: &[PeState]) {
        let me = self.me;
        let a = analyse(me, states);
        let text = text(me, trigger, states, &a);
        let json = json(me, trigger, states, &a);
        if a.reason == graph::Reason::NoHang {
            tracing::warn!(target: "hang", "{text}");
        } else {
            tracing::error!(target: "hang", "{text}");
        }
        match &self.file {
            Some(path) => {
                let written = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .and_then(|mut f| {
                        std::io::Write::write_all(&mut f, format!("{json}\n").as_bytes())
                    });
                if let Err(e) = written {
                    tracing::error!(target: "hang", "writing the hang report to {}: {e}", path.display());
                }
            }
            None => tracing::error!(target: "hang", "hang report JSON: {json}"),
        }
    }
}

/// The report as people read it.
fn text(me: usize, trigger: Trigger, states: &[PeState], a: &Analysis) -> String {
    let asked = match trigger {
        Trigger::Asked => " (asked for)",
        Trigger::SlowWait => "",
    };
    let mut out = match a.reason {
        graph::Reason::NoHang => format!("hang report from PE {me}{asked}: {}", a.summary),
        reason => format!(
            "hang report from PE {me}{asked}: root: {} [{}]",
            a.summary,
            reason.name()
        ),
    };
    for (pe, s) in states.iter().enumerate() {
        let _ = write!(out, "\n  PE {pe}: {}", describe(s));
    }
    if !a.chain.is_empty() {
        let chain: Vec<String> = a.chain.iter().map(|p| format!("PE {p}")).collect();
        let _ = write!(out, "\n  chain: {}", chain.join(" -> "));
    }
    out
}

/// JSON string contents for `s`.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// The report as one JSON object.
fn json(me: usize, trigger: Trigger, states: &[PeState], a: &Analysis) -> String {
    let nums = |v: &[usize]| {
        v.iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let pes: Vec<String> = states
        .iter()
        .enumerate()
        .map(|(pe, s)| match s {
            PeState::Waiting {
                op,
                detail,
                peer,
                collective,
                secs,
            } => {
                let peer = peer.map_or(String::new(), |p| format!(",\"peer\":{p}"));
                let coll = collective.as_ref().map_or(String::new(), |c| {
                    format!(
                        ",\"team\":\"{}\",\"members\":[{}],\"seq\":{}",
                        escape(&c.team),
                        nums(&c.members),
                        c.seq
                    )
                });
                format!(
                    "{{\"pe\":{pe},\"state\":\"waiting\",\"op\":\"{}\",\"detail\":\"{}\"{peer},\"secs\":{secs:.3}{coll}}}",
                    escape(op),
                    escape(detail)
                )
            }
            PeState::Outside { secs } => {
                format!("{{\"pe\":{pe},\"state\":\"outside\",\"secs\":{secs:.3}}}")
            }
            PeState::NotAnswering { why } => format!(
                "{{\"pe\":{pe},\"state\":\"not answering\",\"why\":\"{}\"}}",
                escape(why)
            ),
        })
        .collect();
    format!(
        "{{\"reporter\":{me},\"trigger\":\"{}\",\"root\":[{}],\"reason\":\"{}\",\"summary\":\"{}\",\"chain\":[{}],\"pes\":[{}]}}",
        trigger.name(),
        nums(&a.root),
        a.reason.name(),
        escape(&a.summary),
        nums(&a.chain),
        pes.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_report_escapes_and_names_the_root() {
        let states = [
            PeState::Waiting {
                op: "signal_wait_until".into(),
                detail: "signal \"#1\"[0]".into(),
                peer: None,
                collective: None,
                secs: 2.0,
            },
            PeState::Outside { secs: 2.5 },
        ];
        let a = analyse(0, &states);
        let j = json(0, Trigger::SlowWait, &states, &a);
        assert!(
            j.contains("\"trigger\":\"slow wait\",\"root\":[1],\"reason\":\"in user code\""),
            "{j}"
        );
        assert!(j.contains("signal \\\"#1\\\"[0]"), "{j}");
        let t = text(0, Trigger::SlowWait, &states, &a);
        assert!(t.contains("chain: PE 0 -> PE 1"), "{t}");
    }

    #[test]
    fn an_asked_for_report_with_no_wait_says_there_is_no_hang() {
        let states = [
            PeState::Outside { secs: 1.0 },
            PeState::Outside { secs: 2.0 },
        ];
        let a = analyse(1, &states);
        let j = json(1, Trigger::Asked, &states, &a);
        assert!(
            j.starts_with(
                "{\"reporter\":1,\"trigger\":\"asked\",\"root\":[],\"reason\":\"no hang\""
            ),
            "{j}"
        );
        assert!(j.contains("\"chain\":[]"), "{j}");
        let t = text(1, Trigger::Asked, &states, &a);
        assert!(
            t.starts_with(
                "hang report from PE 1 (asked for): no hang: every PE is outside symmem or running"
            ),
            "{t}"
        );
        assert!(!t.contains("chain:"), "{t}");
    }
}
