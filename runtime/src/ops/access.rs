//! How this PE reaches each PE's heap, and why, as the public API tells it; the accesses
//! themselves go through the data path (`data_path.rs`).

use crate::error::Result;
use crate::route::{PeRoute, Route, RoutePath};
use crate::runtime::Runtime;

impl Runtime {
    /// How this PE reaches `pe`'s heap, and why, as chosen at init.
    pub fn route_to(&self, pe: usize) -> Result<PeRoute> {
        self.path.check_pe("route_to", pe)?;
        let me = self.my_pe();
        let same_node = self.path.topo().node(pe) == self.path.topo().node(me);
        let weak = self.config.ordering == crate::config::MemoryOrdering::Weak
            && pe != me
            && self.path.transport().is_some();
        let nodes = if same_node {
            "same node"
        } else {
            "different nodes"
        };
        let mapped = self.path.heap().base(pe).is_some();
        let (path, why) = match self.path.route(pe) {
            _ if pe == me => (RoutePath::Own, "this PE".to_string()),
            Route::Remote if weak && mapped => (
                RoutePath::Direct,
                format!("{nodes}, heap mapped; SYMMEM_ORDERING=weak routes it through the weak-ordering transport"),
            ),
            Route::Direct(_) => (RoutePath::Direct, format!("{nodes}, heap mapped (P2P)")),
            #[cfg(feature = "cuda")]
            Route::Copy(_) => (
                RoutePath::CudaCopy,
                format!("{nodes}, GPU heap mapped into this PE's CUDA context"),
            ),
            Route::Remote => {
                let unmapped = if !same_node {
                    nodes.to_string()
                } else if self.config.disable_p2p {
                    "same node, but SYMMEM_DISABLE_P2P=1".to_string()
                } else {
                    "same node, but its heap cannot be mapped here (GPU not peer-accessible)"
                        .to_string()
                };
                match &self.path.remote_choice() {
                    Some(c) => (RoutePath::Transport(c.name), format!("{unmapped}; {}", c.why)),
                    None => (RoutePath::Unreachable, format!("{unmapped}; no remote transport")),
                }
            }
            Route::Unreachable => (
                RoutePath::Unreachable,
                format!("{nodes}, heap not mapped and no remote transport"),
            ),
        };
        Ok(PeRoute { path, weak, why })
    }

    /// What decided this PE's node identity ([`Self::node_of`]): `SYMMEM_NODE_ID`, or the
    /// machine identity with the launcher's node where it tells one, and
    /// `SYMMEM_SIMULATE_NODES` when it splits the job.
    pub fn node_identity_source(&self) -> String {
        let source = self
            .config
            .node_identity_source(self.path.topo().launcher(self.my_pe()));
        match self.config.simulate_nodes {
            1 => source,
            k => format!("{source}; split into {k} simulated nodes (SYMMEM_SIMULATE_NODES={k})"),
        }
    }
}
