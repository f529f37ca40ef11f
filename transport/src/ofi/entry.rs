//! The ofi transport's entry in every build: with the `ofi` feature, `mod.rs` adds its
//! driver; without it, this file is the whole `ofi` module, and asking for ofi names the
//! feature.

use crate::registry::Entry;

/// The ofi transport without its driver.
pub(crate) const ENTRY: Entry = Entry::not_built("ofi", 4, "the OFI (libfabric) transport", "ofi");
