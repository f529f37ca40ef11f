//! What one PE is blocked on, as published by its waits ([`WaitBoard`]) and sent to a
//! peer that asks ([`PeState::encode`], [`PeState::decode`]).
//!
//! A wait publishes its record only once it is slow (after the spin phase of the shared
//! wait loop, when it already costs syscalls), so a wait that ends quickly, and every put,
//! get and AMO, costs nothing. A wait that was slow records when it ended, the time from
//! which the PE counts as "not waiting in symmem".

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Instant;

/// The collective a wait belongs to: which PEs must join it and which instance it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Collective {
    /// The team, as every member names it (`TEAM_WORLD`, `team slot 3`).
    pub team: String,
    /// The team's members, as world PEs.
    pub members: Vec<usize>,
    /// The barrier epoch of the team: the same on every member in the same call.
    pub seq: u64,
}

/// A PE's state, as the hang report sees it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PeState {
    /// Blocked in a symmem wait.
    Waiting {
        /// The public operation (`barrier_all`, `signal_wait_until`, `team_reduce`...).
        op: String,
        /// What it waits for, as the timeout error would say it (allocation, offset,
        /// value wanted and last seen, the PE of a barrier round).
        detail: String,
        /// The PE whose action ends the wait, when one PE does (a barrier round's peer, a
        /// quiet's or get's target, a kernel's proxy request); `None` for a word any PE
        /// may write, or for a collective (whose members say it).
        peer: Option<usize>,
        /// The collective it waits in, if it is one.
        collective: Option<Collective>,
        /// Seconds since the wait became slow.
        secs: f64,
    },
    /// Not in a symmem wait: in user code, or in calls that do not block.
    Outside {
        /// Seconds since its last slow wait ended (or since init).
        secs: f64,
    },
    /// Did not answer the request for its record within the bound.
    NotAnswering {
        /// Why (refused, timed out, connection failed).
        why: String,
    },
}

impl PeState {
    /// The record as the reporter sends it: `key\tvalue` lines.
    pub fn encode(&self) -> String {
        let clean = |s: &str| s.replace(['\n', '\t'], " ");
        match self {
            PeState::Waiting {
                op,
                detail,
                peer,
                collective,
                secs,
            } => {
                let mut out = format!(
                    "state\twaiting\nop\t{}\ndetail\t{}\nsecs\t{secs}\n",
                    clean(op),
                    clean(detail)
                );
                if let Some(p) = peer {
                    out += &format!("peer\t{p}\n");
                }
                if let Some(c) = collective {
                    let members: Vec<String> = c.members.iter().map(|m| m.to_string()).collect();
                    out += &format!(
                        "team\t{}\nmembers\t{}\nseq\t{}\n",
                        clean(&c.team),
                        members.join(","),
                        c.seq
                    );
                }
                out
            }
            PeState::Outside { secs } => format!("state\toutside\nsecs\t{secs}\n"),
            PeState::NotAnswering { why } => format!("state\tnot answering\nwhy\t{}\n", clean(why)),
        }
    }

    /// Parses what [`Self::encode`] wrote; says what was wrong otherwise.
    pub fn decode(text: &str) -> Result<PeState, String> {
        let field = |key: &str| -> Option<&str> {
            text.lines().find_map(|l| {
                l.split_once('\t')
                    .filter(|(k, _)| *k == key)
                    .map(|(_, v)| v)
            })
        };
        let need = |key: &str| field(key).ok_or_else(|| format!("the record has no {key:?} field"));
        let secs = || -> Result<f64, String> {
            need("secs")?
                .parse()
                .map_err(|_| format!("bad secs field in {text:?}"))
        };
        match need("state")? {
            "waiting" => {
                let collective = match field("team") {
                    None => None,
                    Some(team) => Some(Collective {
                        team: team.to_string(),
                        members: need("members")?
                            .split(',')
                            .filter(|m| !m.is_empty())
                            .map(|m| m.parse().map_err(|_| format!("bad member {m:?}")))
                            .collect::<Result<_, _>>()?,
                        seq: need("seq")?
                            .parse()
                            .map_err(|_| format!("bad seq field in {text:?}"))?,
                    }),
                };
                Ok(PeState::Waiting {
                    op: need("op")?.to_string(),
                    detail: need("detail")?.to_string(),
                    peer: field("peer")
                        .map(|p| p.parse().map_err(|_| format!("bad peer field in {text:?}")))
                        .transpose()?,
                    collective,
                    secs: secs()?,
                })
            }
            "outside" => Ok(PeState::Outside { secs: secs()? }),
            "not answering" => Ok(PeState::NotAnswering {
                why: need("why")?.to_string(),
            }),
            other => Err(format!("unknown state {other:?}")),
        }
    }
}

/// A wait in progress, as a wait publishes it.
#[derive(Debug, Clone)]
pub(crate) struct Wait {
    /// The public operation (`barrier_all`, `quiet`, `device signal_wait_until`...).
    pub op: Cow<'static, str>,
    /// What it waits for, as the timeout error would say it.
    pub detail: String,
    /// The PE whose action ends it, when one PE does ([`PeState::Waiting::peer`]).
    pub peer: Option<usize>,
    /// The collective it belongs to, if any.
    pub collective: Option<Collective>,
    /// When it began.
    pub since: Instant,
}

impl Wait {
    /// The wait as a state, `secs` counted from `since` to now.
    fn state(&self) -> PeState {
        PeState::Waiting {
            op: self.op.to_string(),
            detail: self.detail.clone(),
            peer: self.peer,
            collective: self.collective.clone(),
            secs: self.since.elapsed().as_secs_f64(),
        }
    }
}

/// Something other than a host wait loop that may be blocked (a kernel's device waits, a
/// transport's internal wait, a loop of `test` calls): asked for its oldest wait when a
/// peer asks for this PE's record.
pub(crate) type WaitSource = Box<dyn Fn() -> Option<Wait> + Send + Sync>;

/// This PE's waits in progress, published for the hang reporter. Touched only by slow
/// waits: the mutex is never taken on a fast path.
pub(crate) struct WaitBoard {
    /// When the board was made: the origin of `last_exit_ns`.
    origin: Instant,
    /// When the last slow wait ended, in ns since `origin` (0: none yet).
    last_exit_ns: AtomicU64,
    /// Host wait loops, one per thread.
    waits: Mutex<Vec<(ThreadId, Wait)>>,
    /// Other places that may wait, by the id [`Self::add_source`] gave them.
    sources: Mutex<Vec<(u64, WaitSource)>>,
    next_source: AtomicU64,
}

/// Removes a [`WaitSource`] from its board when dropped.
pub(crate) struct SourceGuard {
    board: std::sync::Weak<WaitBoard>,
    id: u64,
}

impl Drop for SourceGuard {
    fn drop(&mut self) {
        if let Some(board) = self.board.upgrade() {
            board
                .sources
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .retain(|(id, _)| *id != self.id);
        }
    }
}

impl WaitBoard {
    /// An empty board: no wait, "outside" since now.
    pub fn new() -> Self {
        WaitBoard {
            origin: Instant::now(),
            last_exit_ns: AtomicU64::new(0),
            waits: Mutex::new(Vec::new()),
            sources: Mutex::new(Vec::new()),
            next_source: AtomicU64::new(0),
        }
    }

    /// Publishes the calling thread's slow wait, or refreshes its detail and peer.
    pub fn publish(&self, wait: Wait) {
        let thread = std::thread::current().id();
        let mut waits = self.waits.lock().unwrap_or_else(|p| p.into_inner());
        match waits.iter_mut().find(|(t, _)| *t == thread) {
            Some((_, w)) => {
                w.detail = wait.detail;
                w.peer = wait.peer;
            }
            None => waits.push((thread, wait)),
        }
    }

    /// Ends the calling thread's slow wait.
    pub fn withdraw(&self) {
        let thread = std::thread::current().id();
        self.waits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(t, _)| *t != thread);
        self.note_exit();
    }

    /// Records that a wait ended now: the PE counts as outside symmem from here.
    pub fn note_exit(&self) {
        let ns = self.origin.elapsed().as_nanos().min(u64::MAX as u128) as u64;
        self.last_exit_ns.store(ns.max(1), Ordering::Relaxed);
    }

    /// Adds `source`, asked at every [`Self::state`] until the guard drops.
    pub fn add_source(self: &Arc<Self>, source: WaitSource) -> SourceGuard {
        let id = self.next_source.fetch_add(1, Ordering::Relaxed);
        self.sources
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((id, source));
        SourceGuard {
            board: Arc::downgrade(self),
            id,
        }
    }

    /// The oldest wait of the sources (not of the host wait loops, which report
    /// themselves).
    pub fn source_wait(&self) -> Option<Wait> {
        self.sources
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter_map(|(_, source)| source())
            .min_by_key(|w| w.since)
    }

    /// This PE's state now: its oldest wait (host wait loops and sources), or outside
    /// since the last one ended.
    pub fn state(&self) -> PeState {
        let loops = self
            .waits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(_, w)| w)
            .min_by_key(|w| w.since)
            .cloned();
        let oldest = match (loops, self.source_wait()) {
            (Some(a), Some(b)) => Some(if b.since < a.since { b } else { a }),
            (a, b) => a.or(b),
        };
        if let Some(w) = oldest {
            return w.state();
        }
        let exit = std::time::Duration::from_nanos(self.last_exit_ns.load(Ordering::Relaxed));
        PeState::Outside {
            secs: self.origin.elapsed().saturating_sub(exit).as_secs_f64(),
        }
    }
}

std::thread_local! {
    /// The collective the calling thread is in, set by the barriers for the waits they
    /// make (read only once a wait is slow).
    static COLLECTIVE: std::cell::RefCell<Option<Collective>> = const { std::cell::RefCell::new(None) };
}

/// Marks the calling thread as in `c` until the guard drops.
pub(crate) fn in_collective(c: Collective) -> CollectiveGuard {
    COLLECTIVE.with(|cell| *cell.borrow_mut() = Some(c));
    CollectiveGuard(())
}

/// The collective the calling thread is in, if any.
pub(crate) fn current_collective() -> Option<Collective> {
    COLLECTIVE.with(|cell| cell.borrow().clone())
}

/// Clears the calling thread's collective when dropped ([`in_collective`]).
pub(crate) struct CollectiveGuard(());

impl Drop for CollectiveGuard {
    fn drop(&mut self) {
        COLLECTIVE.with(|cell| *cell.borrow_mut() = None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_survive_the_wire() {
        for s in [
            PeState::Waiting {
                op: "barrier_all".into(),
                detail: "PE 1 (round 0 of the barrier, epoch 7)".into(),
                peer: None,
                collective: Some(Collective {
                    team: "TEAM_WORLD".into(),
                    members: vec![0, 1, 2],
                    seq: 7,
                }),
                secs: 1.5,
            },
            PeState::Waiting {
                op: "signal_wait_until".into(),
                detail: "signal #2[0] Ge 1 (last seen 0)".into(),
                peer: None,
                collective: None,
                secs: 0.25,
            },
            PeState::Waiting {
                op: "quiet".into(),
                detail: "the socket transport's puts to PE 3".into(),
                peer: Some(3),
                collective: None,
                secs: 2.0,
            },
            PeState::Outside { secs: 3.0 },
            PeState::NotAnswering {
                why: "timed out".into(),
            },
        ] {
            assert_eq!(PeState::decode(&s.encode()).unwrap(), s);
        }
    }

    #[test]
    fn tabs_and_newlines_in_a_record_become_spaces() {
        let s = PeState::NotAnswering {
            why: "refused\tby\nit".into(),
        };
        assert_eq!(
            PeState::decode(&s.encode()).unwrap(),
            PeState::NotAnswering {
                why: "refused by it".into()
            }
        );
    }

    #[test]
    fn a_bad_record_says_what_is_wrong() {
        assert!(PeState::decode("state\tasleep\n")
            .unwrap_err()
            .contains("asleep"));
        assert!(PeState::decode("op\tx\n").unwrap_err().contains("state"));
        let no_secs = PeState::decode("state\toutside\n").unwrap_err();
        assert!(no_secs.contains("secs"), "{no_secs}");
    }

    #[test]
    fn the_board_shows_the_oldest_wait_then_outside() {
        let b = Arc::new(WaitBoard::new());
        assert!(matches!(b.state(), PeState::Outside { .. }));
        b.publish(wait("quiet", "the transport", Instant::now()));
        b.publish(wait("quiet", "the transport, again", Instant::now()));
        match b.state() {
            PeState::Waiting { op, detail, .. } => {
                assert_eq!(
                    (op.as_str(), detail.as_str()),
                    ("quiet", "the transport, again")
                )
            }
            other => panic!("{other:?}"),
        }
        // A source with an older wait wins while it lasts.
        let older = Instant::now() - std::time::Duration::from_secs(5);
        let source = b.add_source(Box::new(move || {
            Some(wait("device wait_until", "x", older))
        }));
        assert!(matches!(b.state(), PeState::Waiting { op, .. } if op == "device wait_until"));
        drop(source);
        assert!(matches!(b.state(), PeState::Waiting { op, .. } if op == "quiet"));
        b.withdraw();
        assert!(matches!(b.state(), PeState::Outside { secs } if secs < 1.0));
    }

    fn wait(op: &'static str, detail: &str, since: Instant) -> Wait {
        Wait {
            op: op.into(),
            detail: detail.into(),
            peer: None,
            collective: None,
            since,
        }
    }

    #[test]
    fn the_collective_guard_clears_on_drop() {
        let c = Collective {
            team: "TEAM_WORLD".into(),
            members: vec![0, 1],
            seq: 1,
        };
        {
            let _g = in_collective(c.clone());
            assert_eq!(current_collective(), Some(c));
        }
        assert_eq!(current_collective(), None);
    }
}
