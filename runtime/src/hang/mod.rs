//! The hang report (`SYMMEM_HANG_REPORT`): when a host wait has blocked that long, its PE
//! gathers every PE's wait record over a side path that works while the data path is
//! stuck, builds the wait-for graph and logs one report naming the root.
//!
//! [`record`] is what each PE publishes, [`reporter`] the side path (a listener thread per
//! PE), [`graph`] the analysis. The wait itself still ends only at `SYMMEM_TIMEOUT`.

mod graph;
pub(crate) mod record;
mod reporter;
mod test_loop;

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use symmem_bootstrap::Bootstrap;
use symmem_transport::Transport;

use crate::config::Config;
use crate::error::Result;
use graph::{analyse, describe, Analysis};
use record::{PeState, WaitBoard};
use reporter::Reporter;

/// At least this long between two reports of one PE: a hang lasts, and one report names
/// it (a wait retried after `SYMMEM_TIMEOUT`, or the next wait, would report it again).
const MIN_INTERVAL: Duration = Duration::from_secs(60);

/// A PE's hang reporting: its published waits, its listener and when it last reported.
pub(crate) struct HangReport {
    /// This PE's slow waits.
    pub board: Arc<WaitBoard>,
    /// This PE's loop of failing `test` calls, if one runs.
    pub tests: Arc<test_loop::TestLoop>,
    /// How long a wait blocks before a report (`SYMMEM_HANG_REPORT`).
    pub after: Duration,
    file: Option<std::path::PathBuf>,
    reporter: Reporter,
    /// When this PE last reported, to report once per hang.
    last: Mutex<Option<Instant>>,
    /// Sources of waits beside the host wait loops (the transport's calls); asked by
    /// `board` until dropped.
    _sources: Vec<record::SourceGuard>,
}

impl HangReport {
    /// Starts hang reporting unless `SYMMEM_HANG_REPORT` is 0 or the job has one PE, with
    /// `transport`'s blocked calls among the waits shown. Collective (every PE has the
    /// same configuration, and one PE's failure to start is every PE's: the addresses go
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
        let reporter = match Reporter::start(b, config.socket_ifname.as_deref(), board.clone()) {
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
        Ok(Some(HangReport {
            board,
            tests,
            after,
            file: config.hang_report_file.clone(),
            reporter,
            last: Mutex::new(None),
            _sources: sources,
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
        let a = analyse(me, &states);
        let text = text(me, &states, &a);
        let json = json(me, &states, &a);
        tracing::error!(target: "hang", "{text}");
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
        None
    }
}

/// The report as people read it.
fn text(me: usize, states: &[PeState], a: &Analysis) -> String {
    let mut out = format!(
        "hang report from PE {me}: root: {} [{}]",
        a.summary,
        a.reason.name()
    );
    for (pe, s) in states.iter().enumerate() {
        let _ = write!(out, "\n  PE {pe}: {}", describe(s));
    }
    let chain: Vec<String> = a.chain.iter().map(|p| format!("PE {p}")).collect();
    let _ = write!(out, "\n  chain: {}", chain.join(" -> "));
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
fn json(me: usize, states: &[PeState], a: &Analysis) -> String {
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
        "{{\"reporter\":{me},\"root\":[{}],\"reason\":\"{}\",\"summary\":\"{}\",\"chain\":[{}],\"pes\":[{}]}}",
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
        let j = json(0, &states, &a);
        assert!(
            j.contains("\"root\":[1],\"reason\":\"in user code\""),
            "{j}"
        );
        assert!(j.contains("signal \\\"#1\\\"[0]"), "{j}");
        let t = text(0, &states, &a);
        assert!(t.contains("chain: PE 0 -> PE 1"), "{t}");
    }
}
