//! How the PEs of a job agree on one remote transport, including the host-staging
//! fallback for GPU heaps the NIC cannot register.
//!
//! Every PE proposes what it would use ([`Proposal`]) and whether it allows host staging
//! (`SYMMEM_ALLOW_HOST_STAGING`); the proposals are allgathered and every PE computes the
//! same verdict from the same list with [`agree`], so a job either connects one transport
//! everywhere or fails on every PE with the same reason.
//!
//! # Host staging
//! A GPU PE that would use ib or ofi but whose heap the NIC cannot register (no dma-buf, no
//! `nvidia_peermem`; for ofi, a provider without `FI_HMEM` CUDA support) proposes [`Proposal::Staged`] when it allows staging, instead of
//! failing. Then the whole job uses the socket transport, whose target-side service
//! receives into pinned host memory and copies into the GPU heap: data is staged through
//! host memory, at TCP speed. Every PE that proposed ib or ofi must allow staging too, or the job
//! fails naming the PEs that could not register and the variable to set. Staging is never
//! chosen silently: each PE logs a warning naming the PEs that forced it.

/// What one PE would use, as allgathered (one byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Proposal {
    /// The socket transport (asked for, or no RDMA device).
    Socket = 1,
    /// The ib transport, with the heap registrable.
    Ib = 2,
    /// ib or ofi was chosen, the GPU heap cannot be registered and staging is allowed:
    /// socket.
    Staged = 3,
    /// The ofi transport (`SYMMEM_REMOTE_TRANSPORT=ofi`): every PE must propose it.
    Ofi = 4,
}

impl Proposal {
    fn from_byte(b: u8) -> Option<Proposal> {
        match b {
            1 => Some(Proposal::Socket),
            2 => Some(Proposal::Ib),
            3 => Some(Proposal::Staged),
            4 => Some(Proposal::Ofi),
            _ => None,
        }
    }
}

/// What a PE whose GPU heap its NIC cannot register at connect time is told about host
/// staging: that it was too late for `SYMMEM_ALLOW_HOST_STAGING=1` (`allowed`), or that
/// setting it would have staged the job.
#[cfg(any(feature = "ib", feature = "ofi"))]
pub(crate) fn staging_hint(allowed: bool) -> &'static str {
    if allowed {
        " (it could be when host staging was decided; SYMMEM_ALLOW_HOST_STAGING=1 cannot help now)"
    } else {
        "; SYMMEM_ALLOW_HOST_STAGING=1 would stage the job through host memory over the socket transport instead"
    }
}

/// One PE's entry in the agreement: its proposal and whether it allows host staging.
pub(super) fn encode(proposal: Proposal, allow_staging: bool) -> [u8; 2] {
    [proposal as u8, allow_staging as u8]
}

/// The job's transport.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Every PE connects the socket transport; `staged` lists the PEs whose GPU heaps
    /// could not be registered (empty when nobody asked for ib).
    Socket { staged: Vec<usize> },
    /// Every PE connects the ib transport.
    Ib,
    /// Every PE connects the ofi transport.
    Ofi,
}

/// The verdict every PE reaches from the allgathered entries `all` (`all[pe]` from
/// [`encode`]), or why the job cannot agree (the same text on every PE).
pub(super) fn agree(all: &[Vec<u8>]) -> Result<Verdict, String> {
    let mut by_kind: [Vec<usize>; 4] = Default::default();
    // PEs that proposed ib or ofi without allowing staging, per transport.
    let mut strict: [Vec<usize>; 2] = Default::default();
    for (pe, entry) in all.iter().enumerate() {
        let (Some(&p), Some(&allow)) = (entry.first(), entry.get(1)) else {
            return Err(format!(
                "PE {pe} sent a {}-byte transport proposal, not 2",
                entry.len()
            ));
        };
        let Some(p) = Proposal::from_byte(p) else {
            return Err(format!("PE {pe} proposed unknown transport code {p}"));
        };
        by_kind[p as usize - 1].push(pe);
        match p {
            Proposal::Ib if allow == 0 => strict[0].push(pe),
            Proposal::Ofi if allow == 0 => strict[1].push(pe),
            _ => {}
        }
    }
    let [socket, ib, staged, ofi] = by_kind;
    if staged.is_empty() {
        if !ofi.is_empty() {
            let others: Vec<usize> = (0..all.len()).filter(|pe| !ofi.contains(pe)).collect();
            if others.is_empty() {
                return Ok(Verdict::Ofi);
            }
            return Err(format!(
                "PEs {} chose ofi but PEs {} chose another transport; set SYMMEM_REMOTE_TRANSPORT=ofi on every PE",
                list(&ofi),
                list(&others)
            ));
        }
        return match (socket.is_empty(), ib.is_empty()) {
            (_, true) => Ok(Verdict::Socket { staged }),
            (true, false) => Ok(Verdict::Ib),
            (false, false) => Err(format!(
                "PEs {} chose socket but PEs {} chose ib; set SYMMEM_REMOTE_TRANSPORT to the same transport on every PE",
                list(&socket),
                list(&ib)
            )),
        };
    }
    let [strict_ib, strict_ofi] = strict;
    if !strict_ib.is_empty() || !strict_ofi.is_empty() {
        let refusing = [(strict_ib, "ib"), (strict_ofi, "ofi")]
            .iter()
            .filter(|(pes, _)| !pes.is_empty())
            .map(|(pes, name)| format!("PEs {} use {name}", list(pes)))
            .collect::<Vec<_>>()
            .join(" and ");
        return Err(format!(
            "the GPU heaps of PEs {} cannot be registered with their NICs and they allow host staging, but {refusing} without SYMMEM_ALLOW_HOST_STAGING=1; set it on every PE (the whole job then stages over the socket transport), or fix GPU memory registration (GPUDirect RDMA: dma-buf or nvidia_peermem; for ofi, a libfabric with CUDA support) on PEs {}",
            list(&staged),
            list(&staged)
        ));
    }
    Ok(Verdict::Socket { staged })
}

fn list(pes: &[usize]) -> String {
    pes.iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(props: &[(Proposal, bool)]) -> Vec<Vec<u8>> {
        props.iter().map(|&(p, a)| encode(p, a).to_vec()).collect()
    }

    #[test]
    fn unanimous_proposals_win() {
        use Proposal::*;
        assert_eq!(agree(&entries(&[(Ib, false), (Ib, true)])), Ok(Verdict::Ib));
        assert_eq!(
            agree(&entries(&[(Socket, false), (Socket, true)])),
            Ok(Verdict::Socket { staged: vec![] })
        );
    }

    #[test]
    fn ofi_needs_every_pe() {
        use Proposal::*;
        assert_eq!(
            agree(&entries(&[(Ofi, false), (Ofi, false)])),
            Ok(Verdict::Ofi)
        );
        let e = agree(&entries(&[(Ofi, false), (Socket, false), (Ofi, true)])).unwrap_err();
        assert!(
            e.contains("PEs 0, 2 chose ofi but PEs 1 chose another transport"),
            "{e}"
        );
        assert!(e.contains("SYMMEM_REMOTE_TRANSPORT=ofi"), "{e}");
    }

    #[test]
    fn socket_against_ib_without_staging_names_both_sides() {
        use Proposal::*;
        let e = agree(&entries(&[(Socket, false), (Ib, true), (Ib, false)])).unwrap_err();
        assert!(
            e.contains("PEs 0 chose socket but PEs 1, 2 chose ib"),
            "{e}"
        );
        assert!(e.contains("SYMMEM_REMOTE_TRANSPORT"), "{e}");
    }

    #[test]
    fn one_unregistrable_gpu_heap_stages_the_whole_job_over_socket() {
        use Proposal::*;
        assert_eq!(
            agree(&entries(&[
                (Ib, true),
                (Staged, true),
                (Ib, true),
                (Staged, true)
            ])),
            Ok(Verdict::Socket { staged: vec![1, 3] })
        );
        // A PE that chose socket itself goes along.
        assert_eq!(
            agree(&entries(&[(Socket, false), (Staged, true)])),
            Ok(Verdict::Socket { staged: vec![1] })
        );
    }

    #[test]
    fn staging_needs_the_consent_of_every_ib_pe() {
        use Proposal::*;
        let e = agree(&entries(&[(Ib, false), (Staged, true), (Ib, true)])).unwrap_err();
        assert!(e.contains("GPU heaps of PEs 1 cannot be registered"), "{e}");
        assert!(
            e.contains("PEs 0 use ib without SYMMEM_ALLOW_HOST_STAGING=1"),
            "{e}"
        );
    }

    /// A GPU PE whose provider cannot register CUDA memory stages an ofi job over
    /// socket when every ofi PE allows it, and fails naming the PEs that do not.
    #[test]
    fn ofi_stages_like_ib() {
        use Proposal::*;
        assert_eq!(
            agree(&entries(&[(Ofi, true), (Staged, true)])),
            Ok(Verdict::Socket { staged: vec![1] })
        );
        let e = agree(&entries(&[(Ofi, false), (Staged, true), (Ib, false)])).unwrap_err();
        assert!(
            e.contains("PEs 2 use ib and PEs 0 use ofi without SYMMEM_ALLOW_HOST_STAGING=1"),
            "{e}"
        );
    }

    #[test]
    fn garbled_entries_name_the_pe() {
        let e = agree(&[vec![2, 0], vec![9, 0]]).unwrap_err();
        assert!(e.contains("PE 1 proposed unknown transport code 9"), "{e}");
        let e = agree(&[vec![2]]).unwrap_err();
        assert!(e.contains("PE 0 sent a 1-byte transport proposal"), "{e}");
    }
}
