//! Device waits in the hang report (`SYMMEM_HANG_REPORT`): this PE's [`WaitRecord`], which
//! a kernel's slow device wait fills while it runs (see `symmem_device::state`), read as
//! one of the [`WaitBoard`]'s sources, which the hang report's listener thread watches
//! (a kernel's wait that lasts `SYMMEM_HANG_REPORT` is reported from there).
//!
//! The record is host memory on a CPU PE and mapped pinned host memory on a GPU PE (as the
//! error record is), so the host reads it while the kernel runs. Its memory belongs to the
//! source: it lives until the source is removed from the board.

use std::cell::UnsafeCell;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use symmem_device::state::{wait_op, WaitRecord, ANY_PE};
use symmem_device::DeviceState;

use crate::error::Result;
use crate::hang::record::{SourceGuard, Wait, WaitBoard};
use crate::pe_device::Device;

/// Reads of a record that found its owner writing before [`read`] gives up (the owner
/// writes a few words between two fences: a retry or two is the most seen).
const READ_TRIES: u32 = 1000;

/// This PE's device wait record, published on its hang report's board.
pub(crate) struct DeviceWaits {
    /// Removes the record's source (and frees its memory) when dropped.
    _source: SourceGuard,
    /// The record as kernels address it ([`DeviceState::wait_record`]).
    device_address: u64,
}

impl DeviceWaits {
    /// Allocates the record of the PE whose state is `state` (on its GPU for a GPU PE) and
    /// adds its source to `board`: a wait it holds shows as `device <op>`, naming the
    /// word, the values and the PE awaited as a device timeout names them.
    pub(crate) fn start(
        board: &Arc<WaitBoard>,
        device: &Option<Device>,
        state: DeviceState,
    ) -> Result<Self> {
        let record = Arc::new(RecordMemory::new(device)?);
        let device_address = record.device_address();
        let source = board.add_source(Box::new(move || record.wait(&state)));
        Ok(DeviceWaits {
            _source: source,
            device_address,
        })
    }

    /// The record's address for [`DeviceState::wait_record`].
    pub(crate) fn device_address(&self) -> u64 {
        self.device_address
    }
}

/// The record's memory.
enum RecordMemory {
    /// A CPU PE's: written by kernel threads through raw pointers, hence the cell.
    Host(Box<UnsafeCell<WaitRecord>>),
    /// A GPU PE's: mapped pinned host memory the GPU writes with system-scope stores.
    #[cfg(feature = "cuda")]
    Mapped(crate::cuda::MappedHost),
}

// SAFETY: the record is only accessed through atomics (the device's and [`read`]'s);
// `MappedHost` is Send and Sync itself.
unsafe impl Send for RecordMemory {}
// SAFETY: as above.
unsafe impl Sync for RecordMemory {}

impl RecordMemory {
    /// A zeroed record (no wait, free) for the PE whose GPU is `device`, if any.
    fn new(device: &Option<Device>) -> Result<Self> {
        #[cfg(feature = "cuda")]
        if let Some(d) = device {
            return Ok(RecordMemory::Mapped(crate::cuda::MappedHost::new(
                &d.gpu,
                std::mem::size_of::<WaitRecord>(),
                "device wait record",
            )?));
        }
        #[cfg(not(feature = "cuda"))]
        if let Some(d) = device {
            match *d {}
        }
        Ok(RecordMemory::Host(Box::new(UnsafeCell::new(
            bytemuck::Zeroable::zeroed(),
        ))))
    }

    /// Where the host reads the record.
    fn host(&self) -> *const WaitRecord {
        match self {
            RecordMemory::Host(cell) => cell.get(),
            #[cfg(feature = "cuda")]
            RecordMemory::Mapped(m) => m.host().cast(),
        }
    }

    /// Where kernels write the record.
    fn device_address(&self) -> u64 {
        match self {
            RecordMemory::Host(cell) => cell.get() as u64,
            #[cfg(feature = "cuda")]
            RecordMemory::Mapped(m) => m.device(),
        }
    }

    /// The wait the record holds, on the PE whose state is `state`, as the hang report
    /// shows it; `None` when it holds none.
    fn wait(&self, state: &DeviceState) -> Option<Wait> {
        // SAFETY: the record lives as long as `self`, aligned, accessed by the device
        // only through atomics.
        let record = unsafe { read(self.host()) }?;
        wait_of(&record, state, Instant::now())
    }
}

/// The wait `record` holds on the PE whose state is `state`, as read at `now`: `device
/// <op>`, the word and values named as a device timeout names them (or the PE a wait on
/// no one word waits for), the PE awaited when one PE is, and since when.
pub(crate) fn wait_of(record: &WaitRecord, state: &DeviceState, now: Instant) -> Option<Wait> {
    let (site, seen, waited_ns) = record.site()?;
    let detail =
        crate::wait_report::polled_word(state, &site, seen).unwrap_or_else(|| match site.pe {
            ANY_PE => "the host's proxy thread".to_string(),
            pe => format!("PE {pe}"),
        });
    Some(Wait {
        op: format!("device {}", wait_op::name(site.op)).into(),
        detail,
        peer: (site.pe != ANY_PE).then_some(site.pe as usize),
        collective: None,
        since: now
            .checked_sub(Duration::from_nanos(waited_ns))
            .unwrap_or(now),
    })
}

/// A consistent copy of the record at `rec`, read under its sequence lock; `None` if its
/// owner was writing at each of [`READ_TRIES`] tries.
///
/// # Safety
/// `rec` must be a live, aligned [`WaitRecord`] that others access only atomically.
pub(crate) unsafe fn read(rec: *const WaitRecord) -> Option<WaitRecord> {
    let word = |p: *const u64| {
        // SAFETY: a field of the record, per the caller's contract.
        unsafe { AtomicU64::from_ptr(p.cast_mut()) }
    };
    // SAFETY: the fields of a live record, per the caller's contract.
    let (seq, fields) = unsafe {
        (
            word(std::ptr::addr_of!((*rec).seq)),
            [
                std::ptr::addr_of!((*rec).owner),
                std::ptr::addr_of!((*rec).wait),
                std::ptr::addr_of!((*rec).pe),
                std::ptr::addr_of!((*rec).addr),
                std::ptr::addr_of!((*rec).wanted),
                std::ptr::addr_of!((*rec).seen),
                std::ptr::addr_of!((*rec).since_ns),
                std::ptr::addr_of!((*rec).now_ns),
            ],
        )
    };
    for _ in 0..READ_TRIES {
        let before = seq.load(Ordering::Acquire);
        if before % 2 == 1 {
            std::thread::yield_now();
            continue;
        }
        let [owner, wait, pe, addr, wanted, seen, since_ns, now_ns] =
            fields.map(|f| word(f).load(Ordering::Relaxed));
        // The field loads before the second read of `seq`: if the owner wrote meanwhile,
        // that read sees its odd (or a later) value.
        fence(Ordering::Acquire);
        if seq.load(Ordering::Relaxed) == before {
            return Some(WaitRecord {
                owner,
                seq: before,
                wait,
                pe,
                addr,
                wanted,
                seen,
                since_ns,
                now_ns,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use symmem_device::state::{wait_op, WaitRecord};
    use symmem_device::Cmp;

    fn state() -> DeviceState {
        DeviceState {
            my_pe: 0,
            heap_base: 0x1000,
            heap_size: 0x1000,
            ..bytemuck::Zeroable::zeroed()
        }
    }

    #[test]
    fn a_recorded_signal_wait_names_the_word_and_how_long_it_waited() {
        let record = WaitRecord {
            owner: 1,
            seq: 2,
            wait: wait_op::WAIT_UNTIL as u64 | (Cmp::Ge as u64) << 32,
            pe: ANY_PE as u64,
            addr: 0x1040,
            wanted: 1,
            seen: 0,
            since_ns: 5_000_000_000,
            now_ns: 7_000_000_000,
        };
        let now = Instant::now();
        let w = wait_of(&record, &state(), now).expect("a wait");
        assert_eq!(w.op, "device wait_until");
        assert_eq!(
            w.detail,
            "the word at heap offset 0x40 is 0, waiting for >= 1 (any PE may write it)"
        );
        assert_eq!((w.peer, w.collective), (None, None));
        assert_eq!(now - w.since, Duration::from_secs(2));
    }

    #[test]
    fn a_wait_for_one_pe_names_it_as_the_peer() {
        let barrier = WaitRecord {
            wait: wait_op::SYNC_ALL as u64 | (Cmp::Ge as u64) << 32,
            pe: 1,
            addr: 0x1080,
            wanted: 3,
            seen: 2,
            ..bytemuck::Zeroable::zeroed()
        };
        let w = wait_of(&barrier, &state(), Instant::now()).expect("a wait");
        assert_eq!((w.op.as_ref(), w.peer), ("device sync_all", Some(1)));
        let proxy = WaitRecord {
            wait: wait_op::PROXY_COMPLETION as u64 | (wait_op::NO_CMP as u64) << 32,
            pe: 2,
            ..bytemuck::Zeroable::zeroed()
        };
        let w = wait_of(&proxy, &state(), Instant::now()).expect("a wait");
        assert_eq!(
            (w.op.as_ref(), w.detail.as_str(), w.peer),
            ("device proxy request completion", "PE 2", Some(2))
        );
    }

    #[test]
    fn an_empty_record_is_no_wait_and_a_record_being_written_is_not_read() {
        let mut record: WaitRecord = bytemuck::Zeroable::zeroed();
        assert!(wait_of(&record, &state(), Instant::now()).is_none());
        // SAFETY: a live local record, accessed by nothing else.
        assert_eq!(unsafe { read(&record) }, Some(record));
        record.seq = 3;
        // SAFETY: as above.
        assert_eq!(unsafe { read(&record) }, None);
    }
}
