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

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use symmem_bootstrap::{report_signal, Bootstrap};

use crate::config::Config;
use crate::error::Result;
use graph::{analyse, describe, Analysis};
use record::{PeState, WaitBoard};
use reporter::{Peers, Reporter};

/// At least this long between two reports of one PE: a hang lasts, and one report names
/// it (a wait retried after `SYMMEM_TIMEOUT`, or the next wait, would report it again).
const MIN_INTERVAL: Duration = Duration::from_secs(60);

/// A PE's hang reporting: its published waits, its listener, when it last reported and
/// the SIGUSR1 handler it holds.
pub(crate) struct HangReport {
    /// This PE's slow waits.
    pub board: Arc<WaitBoard>,
    /// How long a wait blocks before a report (`SYMMEM_HANG_REPORT`).
    pub after: Duration,
    output: Output,
    /// Dropped before `_signal`: no request is served once the handler is gone.
    reporter: Reporter,
    /// When this PE last reported, to report once per hang.
    last: Mutex<Option<Instant>>,
    /// SIGUSR1 asks for a report while it lives (`None`: the application handles SIGUSR1);
    /// dropping the last of the process puts the previous disposition back.
    _signal: Option<report_signal::Handler>,
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
    /// Starts hang reporting where `SYMMEM_HANG_REPORT` is set, with SIGUSR1 asking for a
    /// report; collective (every PE has the same configuration).
    pub fn start(config: &Config, b: &dyn Bootstrap) -> Result<Option<HangReport>> {
        let Some(after) = config.hang_report else {
            return Ok(None);
        };
        let board = Arc::new(WaitBoard::new());
        let output = Output {
            me: b.rank(),
            file: config.hang_report_file.clone(),
        };
        let on_request = {
            let (board, output) = (board.clone(), output.clone());
            Arc::new(move |peers: &Peers| {
                output.write(Trigger::Asked, &peers.gather(&board));
            })
        };
        let reporter = Reporter::start(
            b,
            config.socket_ifname.as_deref(),
            board.clone(),
            on_request,
        )?;
        let signal = report_signal::install(&format!("PE {}", b.rank()));
        Ok(Some(HangReport {
            board,
            after,
            output,
            reporter,
            last: Mutex::new(None),
            _signal: signal,
        }))
    }

    /// Called by PE `me`'s wait that has blocked `after` or more: gathers, analyses and
    /// logs one report. Returns when the wait is to try again: `None` once it has
    /// reported, or when this PE reported less than [`MIN_INTERVAL`] (or `after`, if
    /// longer) ago: the same hang, still going; in `after` when a lower PE waits too (it
    /// reports the hang, unless its wait ends first).
    pub fn report(&self, me: usize) -> Option<Instant> {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|t| t.elapsed() < self.after.max(MIN_INTERVAL)) {
            return None;
        }
        let states = self.reporter.gather(&self.board);
        let lower_reports = states[..me]
            .iter()
            .any(|s| matches!(s, PeState::Waiting { .. }));
        if lower_reports {
            tracing::debug!(target: "hang", "PE {me}: a lower PE waits too and reports the hang");
            return Some(Instant::now() + self.after);
        }
        *last = Some(Instant::now());
        drop(last);
        debug_assert_eq!(me, self.output.me);
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
