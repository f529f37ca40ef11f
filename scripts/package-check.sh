#!/usr/bin/env bash
# Packages every published crate of the workspace as `cargo publish` would, then builds
# each package from its .crate file against the others' (`cargo publish --dry-run
# --workspace`: the workspace's crates resolve through a temporary local registry,
# everything else through crates.io), so a crate that would not build from crates.io fails
# here: a path dependency without a version, a file outside the package, a dependency on
# an unpublished crate. The crates marked `publish = false` are left out.
#
# The packaged kernel crate (symmem-runtime-kernels) is built without its PTX
# (SYMMEM_SKIP_PTX=1): its nested nvptx build would look for symmem-device on crates.io.
# The PTX of the same sources is built and checked by the workspace build.
set -euo pipefail
cd "$(dirname "$0")/.."
env -u SYMMEM_REQUIRE_PTX SYMMEM_SKIP_PTX=1 \
  cargo publish --dry-run --workspace --allow-dirty --quiet "$@"
