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
# Cargo takes a registry crate of a given name and version to be immutable: it never
# unpacks one again that it finds under $CARGO_HOME/registry/src/, nor rebuilds one whose
# artifacts it has. Ours change under the same version, so a second run would verify the
# sources of the first. Remove both caches of our crates (cargo unpacks them again), and
# build in a target directory of this check's own, so the workspace's stays as it is.
target=${CARGO_TARGET_DIR:-target}/package-check
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/symmem-*0.1.0 \
  "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/symmem-0.1.0 \
  "$target"/debug/deps/*symmem* "$target"/debug/build/symmem-* "$target"/debug/.fingerprint/symmem-*
env -u SYMMEM_REQUIRE_PTX SYMMEM_SKIP_PTX=1 CARGO_TARGET_DIR="$target" \
  cargo publish --dry-run --workspace --allow-dirty --quiet "$@"
