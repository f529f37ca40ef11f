//! How a device wait that had to stop is described: the same words for a GPU kernel's
//! error record (read back after its trap) and for the CPU executor's checks.

use std::time::Duration;

use symmem_device::state::{wait_op, WaitSite, ANY_PE};
use symmem_device::{Cmp, DeviceState};

/// `site` of a wait on PE `state.my_pe` that last saw `seen`, in words: what it waited
/// for, where, and for whom.
pub(crate) fn describe_wait(state: &DeviceState, site: &WaitSite, seen: u64) -> String {
    let me = state.my_pe;
    let op = wait_op::name(site.op);
    let whom = match site.pe {
        ANY_PE => String::new(),
        pe => format!(" for PE {pe}"),
    };
    let word = polled_word(state, site, seen).map_or(String::new(), |w| format!(": {w}"));
    format!("PE {me}'s device {op}{whom}{word}")
}

/// The word `site` polls on `state`'s PE, with the value last seen and the condition (`the
/// word at heap offset 0x40 is 3, waiting for >= 5`, and who may write it); `None` for a
/// wait on no one word (a proxy slot or completion).
pub(crate) fn polled_word(state: &DeviceState, site: &WaitSite, seen: u64) -> Option<String> {
    if site.addr == 0 {
        return None;
    }
    let cmp = Cmp::from_u32(site.cmp).map_or("", symbol);
    let place = match site.addr.checked_sub(state.heap_base) {
        Some(off) if off < state.heap_size => format!("the word at heap offset {off:#x}"),
        _ => format!("the word at {:#x}", site.addr),
    };
    let any = if site.pe == ANY_PE {
        " (any PE may write it)"
    } else {
        ""
    };
    Some(format!(
        "{place} is {seen}, waiting for {cmp} {}{any}",
        site.wanted
    ))
}

/// The error of a wait on `state`'s PE that outlasted `limit`.
pub(crate) fn timed_out(
    state: &DeviceState,
    site: &WaitSite,
    seen: u64,
    limit: Duration,
) -> String {
    format!(
        "{} timed out after {limit:?} (SYMMEM_TIMEOUT; default 60 s, inf = no limit)",
        describe_wait(state, site, seen)
    )
}

/// The operator of `cmp`, as in `>= 5`.
fn symbol(cmp: Cmp) -> &'static str {
    match cmp {
        Cmp::Eq => "==",
        Cmp::Ne => "!=",
        Cmp::Gt => ">",
        Cmp::Ge => ">=",
        Cmp::Lt => "<",
        Cmp::Le => "<=",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> DeviceState {
        DeviceState {
            my_pe: 3,
            heap_base: 0x1000,
            heap_size: 0x1000,
            ..bytemuck::Zeroable::zeroed()
        }
    }

    #[test]
    fn a_signal_wait_names_the_pe_the_word_and_both_values() {
        let site = WaitSite {
            op: wait_op::WAIT_UNTIL,
            cmp: Cmp::Ge as u32,
            pe: ANY_PE,
            addr: 0x1040,
            wanted: 5,
        };
        assert_eq!(
            timed_out(&state(), &site, 3, Duration::from_secs(2)),
            "PE 3's device wait_until: the word at heap offset 0x40 is 3, waiting for >= 5 (any PE may write it) timed out after 2s (SYMMEM_TIMEOUT; default 60 s, inf = no limit)"
        );
    }

    #[test]
    fn a_barrier_round_and_a_proxy_completion_name_the_awaited_pe() {
        let barrier = WaitSite {
            op: wait_op::SYNC_ALL,
            cmp: Cmp::Ge as u32,
            pe: 1,
            addr: 0x1080,
            wanted: 7,
        };
        assert_eq!(
            describe_wait(&state(), &barrier, 6),
            "PE 3's device sync_all for PE 1: the word at heap offset 0x80 is 6, waiting for >= 7"
        );
        let proxy = WaitSite {
            op: wait_op::PROXY_COMPLETION,
            cmp: wait_op::NO_CMP,
            pe: 2,
            addr: 0,
            wanted: 0,
        };
        assert_eq!(
            describe_wait(&state(), &proxy, 0),
            "PE 3's device proxy request completion for PE 2"
        );
    }
}
