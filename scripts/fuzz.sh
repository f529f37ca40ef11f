#!/usr/bin/env bash
# Builds the cargo-fuzz targets in fuzz/ and runs each for a bounded time, one after the
# other, then prints per target the seconds, the executions and whether it crashed.
#
#   scripts/fuzz.sh                      # every target, 60 s each
#   FUZZ_SECONDS=600 scripts/fuzz.sh     # the long run
#   scripts/fuzz.sh wire_recv pe_info    # only these targets
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`); the nightly features it uses are
# enabled on the pinned stable toolchain with RUSTC_BOOTSTRAP=1. Each target's corpus
# is fuzz/corpus/<target> (the committed seeds, plus whatever the run finds); a crash is
# written to fuzz/artifacts/<target>/ and named in the summary. FUZZ_TARGET_DIR sets the
# build directory (default fuzz/target). Exits non-zero if any target crashed.
set -euo pipefail

cd "$(dirname "$0")/../fuzz"
seconds=${FUZZ_SECONDS:-60}
target_dir=${FUZZ_TARGET_DIR:-$PWD/target}
# cargo-fuzz finds its binaries under --target-dir, not under CARGO_TARGET_DIR.
unset CARGO_TARGET_DIR
export RUSTC_BOOTSTRAP=1
# The decoders need no GPU kernels: skip the nested PTX build of the runtime's.
export SYMMEM_SKIP_PTX=1
unset SYMMEM_REQUIRE_PTX

if ! command -v cargo-fuzz >/dev/null; then
    echo "fuzz.sh: cargo-fuzz is not installed (cargo install cargo-fuzz)" >&2
    exit 2
fi

if [ $# -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo fuzz list)
fi

# Release with debug assertions: overflow checks catch arithmetic a decoder got wrong.
cargo fuzz build --debug-assertions --target-dir "$target_dir"

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
failed=0
summary=()
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t"
    echo "== $t: $seconds s" >&2
    start=$(date +%s)
    status=0
    # -timeout: one input taking this long is reported as a hang (a crash here).
    cargo fuzz run --debug-assertions --target-dir "$target_dir" "$t" "corpus/$t" -- \
        -max_total_time="$seconds" -timeout=30 -print_final_stats=1 \
        >"$logs/$t" 2>&1 || status=$?
    took=$(($(date +%s) - start))
    execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$logs/$t" | tail -n 1)
    if [ "$status" -eq 0 ]; then
        result="no crash"
    else
        failed=1
        artifact=$(grep -o 'Test unit written to [^ ]*' "$logs/$t" | tail -n 1 | cut -d' ' -f5)
        result="CRASH (exit $status) ${artifact:-see the log below}"
        tail -n 40 "$logs/$t" >&2
    fi
    summary+=("$(printf '%-22s %6s s %14s execs  %s' "$t" "$took" "${execs:-?}" "$result")")
done

printf '%s\n' "${summary[@]}"
exit "$failed"
