//! The ib transport's entry in every build: with the `ib` feature, `mod.rs` adds its
//! driver; without it, this file is the whole `ib` module, and asking for ib names the
//! feature.

use crate::registry::Entry;

/// The ib transport without its driver.
pub(crate) const ENTRY: Entry = Entry::not_built("ib", 2, "the ibverbs transport", "ib");
