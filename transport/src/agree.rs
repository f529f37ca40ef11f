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
pub(super) enum Proposal {
    /// The transport of this code (its registry entry's), with the heap registrable where
    /// the transport registers it.
    Use(u8),
    /// A transport that registers heaps was chosen, the GPU heap cannot be registered and
    /// staging is allowed: the staging transport (socket).
    Staged,
}

/// [`Proposal::Staged`]'s byte: one no transport's code is.
pub(super) const STAGED: u8 = 3;

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
    let code = match proposal {
        Proposal::Use(code) => code,
        Proposal::Staged => STAGED,
    };
    [code, allow_staging as u8]
}

/// The job's transport: every PE connects the transport of `code`; `staged` lists the
/// PEs whose GPU heaps could not be registered (then `code` is the staging transport's).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Verdict {
    /// The code of the transport every PE connects.
    pub code: u8,
    /// The PEs that proposed [`Proposal::Staged`].
    pub staged: Vec<usize>,
}

/// The transports a job may agree on: each one's code and name, and the code of the one
/// that stages GPU heaps through host memory.
pub(super) struct Choices<'a> {
    /// (code, name) of every transport.
    pub transports: &'a [(u8, &'static str)],
    /// The staging transport's code.
    pub staging: u8,
}

impl Choices<'_> {
    fn name(&self, code: u8) -> &'static str {
        self.transports
            .iter()
            .find(|&&(c, _)| c == code)
            .map_or("?", |&(_, name)| name)
    }
}

/// The verdict every PE reaches from the allgathered entries `all` (`all[pe]` from
/// [`encode`]), or why the job cannot agree (the same text on every PE).
pub(super) fn agree(all: &[Vec<u8>], choices: &Choices<'_>) -> Result<Verdict, String> {
    // The PEs that proposed each transport, in the order of `choices.transports`.
    let mut by_code: Vec<Vec<usize>> = vec![Vec::new(); choices.transports.len()];
    let mut staged = Vec::new();
    // PEs that proposed a transport other than the staging one without allowing staging.
    let mut strict: Vec<Vec<usize>> = vec![Vec::new(); choices.transports.len()];
    for (pe, entry) in all.iter().enumerate() {
        let (Some(&code), Some(&allow)) = (entry.first(), entry.get(1)) else {
            return Err(format!(
                "PE {pe} sent a {}-byte transport proposal, not 2",
                entry.len()
            ));
        };
        if code == STAGED {
            staged.push(pe);
            continue;
        }
        let Some(i) = choices.transports.iter().position(|&(c, _)| c == code) else {
            return Err(format!("PE {pe} proposed unknown transport code {code}"));
        };
        by_code[i].push(pe);
        if allow == 0 && code != choices.staging {
            strict[i].push(pe);
        }
    }
    let chosen: Vec<(u8, &'static str, &[usize])> = by_code
        .iter()
        .zip(choices.transports)
        .filter(|(pes, _)| !pes.is_empty())
        .map(|(pes, &(code, name))| (code, name, pes.as_slice()))
        .collect();
    if staged.is_empty() {
        return match chosen.as_slice() {
            [] => Err("no PE proposed a transport".into()),
            [(code, _, _)] => Ok(Verdict {
                code: *code,
                staged,
            }),
            [(_, first_name, first), rest @ ..] => {
                let rest = rest
                    .iter()
                    .map(|(_, name, pes)| format!("PEs {} chose {name}", list(pes)))
                    .collect::<Vec<_>>()
                    .join(" and ");
                Err(format!(
                    "PEs {} chose {first_name} but {rest}; set SYMMEM_REMOTE_TRANSPORT to the same transport on every PE",
                    list(first)
                ))
            }
        };
    }
    let refusing = strict
        .iter()
        .zip(choices.transports)
        .filter(|(pes, _)| !pes.is_empty())
        .map(|(pes, &(_, name))| format!("PEs {} use {name}", list(pes)))
        .collect::<Vec<_>>();
    if !refusing.is_empty() {
        return Err(format!(
            "the GPU heaps of PEs {} cannot be registered with their NICs and they allow host staging, but {} without SYMMEM_ALLOW_HOST_STAGING=1; set it on every PE (the whole job then stages over the {} transport), or fix GPU memory registration (GPUDirect RDMA: dma-buf or nvidia_peermem; for ofi, a libfabric with CUDA support) on PEs {}",
            list(&staged),
            refusing.join(" and "),
            choices.name(choices.staging),
            list(&staged)
        ));
    }
    Ok(Verdict {
        code: choices.staging,
        staged,
    })
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

    const IB: u8 = crate::ib::ENTRY.code;
    const OFI: u8 = crate::ofi::ENTRY.code;
    const SOCKET: u8 = crate::socket::ENTRY.code;
    const CHOICES: Choices<'static> = Choices {
        transports: &[(IB, "ib"), (OFI, "ofi"), (SOCKET, "socket")],
        staging: SOCKET,
    };

    fn agreed(props: &[(Proposal, bool)]) -> Result<Verdict, String> {
        let all: Vec<Vec<u8>> = props.iter().map(|&(p, a)| encode(p, a).to_vec()).collect();
        agree(&all, &CHOICES)
    }

    fn verdict(code: u8, staged: Vec<usize>) -> Result<Verdict, String> {
        Ok(Verdict { code, staged })
    }

    #[test]
    fn unanimous_proposals_win() {
        use Proposal::*;
        assert_eq!(
            agreed(&[(Use(IB), false), (Use(IB), true)]),
            verdict(IB, vec![])
        );
        assert_eq!(
            agreed(&[(Use(SOCKET), false), (Use(SOCKET), true)]),
            verdict(SOCKET, vec![])
        );
        assert_eq!(
            agreed(&[(Use(OFI), false), (Use(OFI), false)]),
            verdict(OFI, vec![])
        );
    }

    #[test]
    fn different_choices_name_every_side() {
        use Proposal::*;
        let e = agreed(&[(Use(OFI), false), (Use(SOCKET), false), (Use(OFI), true)]).unwrap_err();
        assert!(
            e.contains("PEs 0, 2 chose ofi but PEs 1 chose socket"),
            "{e}"
        );
        assert!(
            e.contains("SYMMEM_REMOTE_TRANSPORT to the same transport on every PE"),
            "{e}"
        );
        let e = agreed(&[(Use(SOCKET), false), (Use(IB), true), (Use(IB), false)]).unwrap_err();
        assert!(
            e.contains("PEs 1, 2 chose ib but PEs 0 chose socket"),
            "{e}"
        );
        let e = agreed(&[(Use(SOCKET), false), (Use(IB), true), (Use(OFI), false)]).unwrap_err();
        assert!(
            e.contains("PEs 1 chose ib but PEs 2 chose ofi and PEs 0 chose socket"),
            "{e}"
        );
    }

    #[test]
    fn one_unregistrable_gpu_heap_stages_the_whole_job_over_socket() {
        use Proposal::*;
        assert_eq!(
            agreed(&[
                (Use(IB), true),
                (Staged, true),
                (Use(IB), true),
                (Staged, true)
            ]),
            verdict(SOCKET, vec![1, 3])
        );
        // A PE that chose socket itself goes along, with or without allowing it.
        assert_eq!(
            agreed(&[(Use(SOCKET), false), (Staged, true)]),
            verdict(SOCKET, vec![1])
        );
    }

    #[test]
    fn staging_needs_the_consent_of_every_pe_that_registers_heaps() {
        use Proposal::*;
        let e = agreed(&[(Use(IB), false), (Staged, true), (Use(IB), true)]).unwrap_err();
        assert!(e.contains("GPU heaps of PEs 1 cannot be registered"), "{e}");
        assert!(
            e.contains("PEs 0 use ib without SYMMEM_ALLOW_HOST_STAGING=1"),
            "{e}"
        );
        assert!(e.contains("stages over the socket transport"), "{e}");
    }

    /// A GPU PE whose provider cannot register CUDA memory stages an ofi job over
    /// socket when every ofi PE allows it, and fails naming the PEs that do not.
    #[test]
    fn ofi_stages_like_ib() {
        use Proposal::*;
        assert_eq!(
            agreed(&[(Use(OFI), true), (Staged, true)]),
            verdict(SOCKET, vec![1])
        );
        let e = agreed(&[(Use(OFI), false), (Staged, true), (Use(IB), false)]).unwrap_err();
        assert!(
            e.contains("PEs 2 use ib and PEs 0 use ofi without SYMMEM_ALLOW_HOST_STAGING=1"),
            "{e}"
        );
    }

    #[test]
    fn garbled_entries_name_the_pe() {
        let e = agree(&[vec![2, 0], vec![9, 0]], &CHOICES).unwrap_err();
        assert!(e.contains("PE 1 proposed unknown transport code 9"), "{e}");
        let e = agree(&[vec![2]], &CHOICES).unwrap_err();
        assert!(e.contains("PE 0 sent a 1-byte transport proposal"), "{e}");
    }
}
