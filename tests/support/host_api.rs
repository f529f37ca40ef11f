//! Host API scenarios (tests/host_api.rs runs them on 2 and 4 PEs): every RMA, signal,
//! wait, atomic, ordering and local-view operation, every `Cmp` and `SignalOp`, the error
//! cases, `SYMMEM_TIMEOUT`, a peer dying during a wait or during each kind of operation
//! (the kill -9 matrix), and a random stress test.
//!
//! Every scenario checks its results exactly and returns `Err` on the first mismatch. The
//! values written identify (writer, target, round, index), so stale or reordered data is
//! never mistaken for fresh data. Scenarios that overlap in time use ack counters rather
//! than sleeps, so nothing depends on timing. On success each PE prints
//! `PE <me>: <scenario> ok`.

// The scenarios, a file per group; test_pe.rs runs them by name.
mod align;
mod atomics;
mod collectives;
mod errors;
mod failures;
mod foreign;
mod hangs;
mod kill_matrix;
mod litmus;
mod local_views;
mod mismatch;
mod ordering;
mod remote;
mod rma;
mod signals;
mod stream_alltoallv;
mod stream_collectives;
mod stream_rma;
mod stress;
mod sync;
mod teams;
mod waits;
mod weak;

pub use align::align;
pub use atomics::atomics;
pub use collectives::{
    collective_errors, collective_mismatch, collective_one_bad, collective_timeout, collectives,
};
pub use errors::errors;
pub use failures::{kill_wait, wait_timeout};
pub use foreign::foreign;
pub use hangs::{
    hang_asked, hang_barrier_skipped, hang_barrier_three, hang_device_signal,
    hang_forgotten_signal, hang_mismatched_collectives, hang_quiet_stopped_peer, hang_stopped_pe,
    hang_test_loop, hang_until_asked,
};
pub use kill_matrix::kill_matrix;
pub use litmus::litmus;
pub use local_views::local_views;
pub use mismatch::{collective_pair_hangs, collective_pairs, mismatched_collectives_named};
pub use ordering::fence_quiet;
pub use remote::{kill_transfer, put_signal_large, quiet_visibility};
pub use rma::rma;
pub use signals::{put_signal, signals};
pub use stream_alltoallv::stream_alltoallv;
pub use stream_collectives::{stream_collective_errors, stream_collectives};
pub use stream_rma::stream_rma;
pub use stress::stress;
pub use sync::{barrier_sync, barrier_then_finalize};
pub use teams::{team_errors, team_limit, team_timeout, teams};
pub use waits::{wait_arrays, wait_test};
pub use weak::{
    bug_get_nbi_read_early, bug_nbi_source_reused, bug_put_then_p, bug_put_then_put,
    bug_signal_first,
};

use std::fmt::Debug;

use symmem::{Error, Runtime, SymInt};

/// The result of a scenario.
pub type Outcome = Result<(), String>;

/// `Result<T, symmem::Error>` → `Result<T, String>` naming the line that failed.
trait OrFail<T> {
    fn or_fail(self) -> Result<T, String>;
}

impl<T> OrFail<T> for symmem::Result<T> {
    #[track_caller]
    fn or_fail(self) -> Result<T, String> {
        let at = std::panic::Location::caller();
        self.map_err(|e| format!("line {}: unexpected error: {e}", at.line()))
    }
}

macro_rules! check {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!("line {}: {}", line!(), format!($($fmt)+)));
        }
    };
}
// The scenario files import the macros by path (`use super::check`).
use check;

macro_rules! check_eq {
    ($got:expr, $want:expr, $($fmt:tt)+) => {{
        let (got, want) = (&$got, &$want);
        if got != want {
            return Err(format!(
                "line {}: {}: got {:?}, expected {:?}",
                line!(),
                format!($($fmt)+),
                got,
                want
            ));
        }
    }};
}
use check_eq;

/// Prefixes a failure with the PE and scenario; prints the success line.
fn finish(rt: &Runtime, name: &str, r: Outcome) -> Outcome {
    match r {
        Ok(()) => {
            println!("PE {}: {name} ok", rt.my_pe());
            Ok(())
        }
        Err(e) => Err(format!("PE {}: {name}: {e}", rt.my_pe())),
    }
}

/// The splitmix64 finalizer.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A hash of a tuple of numbers.
fn key(parts: &[u64]) -> u64 {
    parts.iter().fold(0x243F_6A88_85A3_08D3, |h, &p| mix(h ^ p))
}

/// Element `i` of a stream identified by `seed`: cheap, and different for every seed.
#[inline]
fn elem(seed: u64, i: usize) -> u64 {
    seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// The integer types of atomics and waits, with the arithmetic the tests model them with.
pub trait TInt: SymInt {
    /// The type's name, for messages.
    const NAME: &'static str;
    /// A step that changes bits above the low half: 2^32 for 64-bit types, 2^16 else.
    const HIGH: i64;
    /// `v as Self` (truncating, so models computed in 64 bits match 32-bit wrapping).
    fn of(v: i64) -> Self;
    /// Comparison pivots: values that probe sign, width and range.
    fn pivots() -> Vec<Self>;
    /// Wrapping addition.
    fn wadd(self, o: Self) -> Self;
    /// Bitwise and.
    fn band(self, o: Self) -> Self;
    /// Bitwise or.
    fn bor(self, o: Self) -> Self;
    /// Bitwise xor.
    fn bxor(self, o: Self) -> Self;
    /// Bitwise not.
    fn bnot(self) -> Self;
    /// `self + k` (wrapping).
    fn plus(self, k: i64) -> Self {
        self.wadd(Self::of(k))
    }
}

macro_rules! tint {
    ($t:ty, $high:expr, [$($p:expr),*]) => {
        impl TInt for $t {
            const NAME: &'static str = stringify!($t);
            const HIGH: i64 = $high;
            fn of(v: i64) -> Self {
                v as $t
            }
            fn pivots() -> Vec<Self> {
                vec![$($p),*]
            }
            fn wadd(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            fn band(self, o: Self) -> Self {
                self & o
            }
            fn bor(self, o: Self) -> Self {
                self | o
            }
            fn bxor(self, o: Self) -> Self {
                self ^ o
            }
            fn bnot(self) -> Self {
                !self
            }
        }
    };
}

tint!(u32, 1 << 16, [100, 0xFFFF_FF00]);
tint!(u64, 1 << 32, [100, 0x1_0000_0005, 0xFFFF_FFFF_FFFF_FF00]);
// Signed pivots: 0 (where -1 and 1 are on opposite sides only under a signed compare),
// a negative value, and one near MIN.
tint!(i32, 1 << 16, [0, -1_000_000, i32::MIN + 100]);
tint!(i64, 1 << 32, [0, -5_000_000_000, i64::MIN + 100]);

fn neighbours(rt: &Runtime) -> (usize, usize, usize, usize) {
    let (me, n) = (rt.my_pe(), rt.n_pes());
    (me, n, (me + 1) % n, (me + n - 1) % n)
}

/// The name of an error's variant, for messages.
fn kind(e: &Error) -> &'static str {
    match e {
        Error::InvalidPe { .. } => "InvalidPe",
        Error::OutOfBounds { .. } => "OutOfBounds",
        Error::InvalidArgument { .. } => "InvalidArgument",
        Error::ForeignAllocation { .. } => "ForeignAllocation",
        Error::Timeout { .. } => "Timeout",
        Error::PeerFailed { .. } => "PeerFailed",
        Error::TeamMismatch { .. } => "TeamMismatch",
        Error::TeamLimit { .. } => "TeamLimit",
        Error::AllocMismatch { .. } => "AllocMismatch",
        Error::KernelFailed { .. } => "KernelFailed",
        _ => "other",
    }
}

/// Checks that `r` is an error of `want_kind` whose message contains every needle.
#[track_caller]
fn expect_err<R: Debug>(r: symmem::Result<R>, want_kind: &str, needles: &[String]) -> Outcome {
    let line = std::panic::Location::caller().line();
    match r {
        Ok(v) => Err(format!(
            "line {line}: succeeded with {v:?}, expected a {want_kind} error"
        )),
        Err(e) => {
            let s = e.to_string();
            if kind(&e) != want_kind {
                return Err(format!(
                    "line {line}: {s:?} is a {}, expected {want_kind}",
                    kind(&e)
                ));
            }
            match needles.iter().find(|n| !s.contains(n.as_str())) {
                Some(n) => Err(format!("line {line}: {s:?} lacks {n:?}")),
                None => Ok(()),
            }
        }
    }
}
