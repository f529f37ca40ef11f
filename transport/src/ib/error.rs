//! Work-completion statuses as errors that name the peer, the device, the operation and
//! the status.
//!
//! The names are libibverbs' (`IBV_WC_*`, `enum ibv_wc_status` in `verbs.h`), so they can
//! be searched for; the commonest ones carry a hint at their usual cause.

use crate::error::Error;

/// libibverbs' name of work-completion status `status`.
pub(crate) fn status_name(status: u32) -> &'static str {
    match status {
        0 => "IBV_WC_SUCCESS",
        1 => "IBV_WC_LOC_LEN_ERR",
        2 => "IBV_WC_LOC_QP_OP_ERR",
        3 => "IBV_WC_LOC_EEC_OP_ERR",
        4 => "IBV_WC_LOC_PROT_ERR",
        5 => "IBV_WC_WR_FLUSH_ERR",
        6 => "IBV_WC_MW_BIND_ERR",
        7 => "IBV_WC_BAD_RESP_ERR",
        8 => "IBV_WC_LOC_ACCESS_ERR",
        9 => "IBV_WC_REM_INV_REQ_ERR",
        10 => "IBV_WC_REM_ACCESS_ERR",
        11 => "IBV_WC_REM_OP_ERR",
        12 => "IBV_WC_RETRY_EXC_ERR",
        13 => "IBV_WC_RNR_RETRY_EXC_ERR",
        14 => "IBV_WC_LOC_RDD_VIOL_ERR",
        15 => "IBV_WC_REM_INV_RD_REQ_ERR",
        16 => "IBV_WC_REM_ABORT_ERR",
        17 => "IBV_WC_INV_EECN_ERR",
        18 => "IBV_WC_INV_EEC_STATE_ERR",
        19 => "IBV_WC_FATAL_ERR",
        20 => "IBV_WC_RESP_TIMEOUT_ERR",
        21 => "IBV_WC_GENERAL_ERR",
        22 => "IBV_WC_TM_ERR",
        23 => "IBV_WC_TM_RNDV_INCOMPLETE",
        _ => "unknown status",
    }
}

/// The usual cause of `status`, where one is well known ("" otherwise).
fn hint(status: u32) -> &'static str {
    match status {
        4 | 8 => " (a local buffer is not registered, or its lkey or access flags are wrong)",
        5 => " (the queue pair was already in the error state after an earlier failure)",
        9 => " (the peer refused the request: out of its heap, misaligned atomic, or an operation its queue pair does not allow)",
        10 => " (the peer's rkey or heap range does not cover the address: heaps or keys out of step)",
        12 => " (no acknowledgement after every retry: the peer is unreachable, dead, or the GID/LID is wrong; on RoCE check SYMMEM_IB_GID_INDEX)",
        13 => " (the peer's receive queue stayed empty)",
        19 => " (the device reported a fatal error)",
        _ => "",
    }
}

/// What went wrong with a work completion of opcode `wr` (`RDMA_WRITE` …) on `device`
/// that failed with `status` (`vendor` is the provider's syndrome).
pub(crate) fn completion_detail(device: &str, wr: &str, status: u32, vendor: u32) -> String {
    format!(
        "{wr} work completion on {device} failed with {} (status {status}, vendor error {vendor:#x}){}",
        status_name(status),
        hint(status)
    )
}

/// The error for a failed work completion (see [`completion_detail`]) of a `op` request
/// from PE `me` to PE `pe`.
pub(crate) fn completion_error(
    me: usize,
    pe: usize,
    device: &str,
    op: &'static str,
    wr: &str,
    status: u32,
    vendor: u32,
) -> Error {
    Error::Transport {
        transport: "ib",
        op,
        me,
        pe,
        detail: completion_detail(device, wr, status, vendor),
    }
}

/// The error for a verbs call that failed while issuing `op` to `pe`.
pub(crate) fn verbs_error(
    me: usize,
    pe: usize,
    device: &str,
    op: &'static str,
    what: impl std::fmt::Display,
) -> Error {
    Error::Transport {
        transport: "ib",
        op,
        me,
        pe,
        detail: format!("on {device}: {what}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sideway::ibverbs::completion::WorkCompletionStatus as S;

    #[test]
    fn names_follow_libibverbs_numbering() {
        // sideway's enum carries libibverbs' values: the table must agree with it.
        for (s, name) in [
            (S::Success, "IBV_WC_SUCCESS"),
            (S::LocalLengthError, "IBV_WC_LOC_LEN_ERR"),
            (S::LocalProtectionError, "IBV_WC_LOC_PROT_ERR"),
            (S::WorkRequestFlushedError, "IBV_WC_WR_FLUSH_ERR"),
            (S::RemoteInvalidRequestError, "IBV_WC_REM_INV_REQ_ERR"),
            (S::RemoteAccessError, "IBV_WC_REM_ACCESS_ERR"),
            (S::RemoteOperationError, "IBV_WC_REM_OP_ERR"),
            (S::RetryCounterExceededError, "IBV_WC_RETRY_EXC_ERR"),
            (
                S::ResponderNotReadyRetryCounterExceededError,
                "IBV_WC_RNR_RETRY_EXC_ERR",
            ),
            (S::FatalError, "IBV_WC_FATAL_ERR"),
            (S::GeneralError, "IBV_WC_GENERAL_ERR"),
            (
                S::TagMatchingRendezvousIncomplete,
                "IBV_WC_TM_RNDV_INCOMPLETE",
            ),
        ] {
            assert_eq!(status_name(s as u32), name);
        }
        assert_eq!(status_name(99), "unknown status");
    }

    #[test]
    fn a_failed_completion_names_peer_device_op_and_status() {
        let e = completion_error(3, 5, "mlx5_0 port 1", "put_signal", "RDMA_WRITE", 12, 0x81)
            .to_string();
        for part in [
            "PE 3",
            "PE 5",
            "ib",
            "mlx5_0 port 1",
            "put_signal",
            "RDMA_WRITE",
            "IBV_WC_RETRY_EXC_ERR",
            "status 12",
            "0x81",
            "unreachable",
        ] {
            assert!(e.contains(part), "{part:?} missing from {e}");
        }
        let e = completion_error(0, 1, "rxe0 port 1", "get", "RDMA_READ", 10, 0).to_string();
        assert!(
            e.contains("IBV_WC_REM_ACCESS_ERR") && e.contains("rkey"),
            "{e}"
        );
        let e = verbs_error(0, 2, "mlx5_1 port 1", "put", "ibv_post_send: ENOMEM").to_string();
        assert!(
            e.contains("PE 2") && e.contains("mlx5_1") && e.contains("ENOMEM"),
            "{e}"
        );
    }
}
