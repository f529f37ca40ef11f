//! `SYMMEM_OFI_ASSUME_ORDER`: the order the transport relies on, in place of what the
//! provider reported. `weakest` takes efa's (only sends stay behind sends; `FI_FENCE`
//! only where the provider really offers it), so that efa's protocol (waits between
//! same-peer operations, signals as messages) runs and is tested on `tcp;ofi_rxm` and
//! `shm`.

use super::ffi;
use crate::config::OfiAssumeOrder;

/// Replaces the orders in `attrs` (as the provider reported them) with the ones assumed,
/// and says so in PE `me`'s log.
pub(super) fn assume_order(attrs: &mut ffi::Attrs, assumed: OfiAssumeOrder, me: usize) {
    match assumed {
        OfiAssumeOrder::Provider => {}
        OfiAssumeOrder::Weakest => {
            tracing::info!(
                target: "init::transport",
                "PE {me}: SYMMEM_OFI_ASSUME_ORDER=weakest: the ofi transport relies only on sends staying behind sends (efa's order){}, not on the provider's order bits {:#x}",
                if attrs.fence != 0 { " and the provider's FI_FENCE" } else { "" },
                attrs.order
            );
            attrs.order = 0;
            attrs.max_order_size = [0; 3];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weakest_keeps_only_what_sends_and_fi_fence_keep() {
        let mut attrs = ffi::Attrs {
            order: u64::MAX,
            max_order_size: [1 << 20; 3],
            fence: 1,
            sends_in_order: 1,
            ..ffi::Attrs::default()
        };
        assume_order(&mut attrs, OfiAssumeOrder::Provider, 0);
        assert_eq!((attrs.order, attrs.fence), (u64::MAX, 1));
        assume_order(&mut attrs, OfiAssumeOrder::Weakest, 0);
        assert_eq!(
            (
                attrs.order,
                attrs.max_order_size,
                attrs.fence,
                attrs.sends_in_order
            ),
            (0, [0; 3], 1, 1)
        );
    }
}
