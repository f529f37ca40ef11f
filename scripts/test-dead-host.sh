#!/usr/bin/env bash
# A host that dies or is cut off ends in an error on every other PE, never a silent hang.
#
# Two "nodes" (network namespaces joined by a veth pair) run two PEs each of one job over
# the socket transport (symmem-test-pe's dead_host scenario: puts, quiet, get and barrier
# in a loop). Once every PE is running, node B's link is cut (`ip link set down` inside B).
# Every PE, on both sides of the cut, must then fail within the dead-peer time
# (SYMMEM_DEAD_PEER_TIMEOUT, 3 s here unless set) plus 5 s, with an error that names a PE
# on the other node and the operation it was in, and exit.
#
# Needs root and iproute2. Namespaces are named after this script's pid and deleted on
# any exit; the whole run is bounded by its own timeout (TOTAL_TIMEOUT, 180 s), so it
# cannot hang. Exits 0 when every PE failed as it should, non-zero otherwise.
#
# Usage: scripts/test-dead-host.sh            (builds symmem-test-pe with cargo)
#        TEST_PE=path/to/symmem-test-pe scripts/test-dead-host.sh
#        SYMMEM_DEAD_PEER_TIMEOUT=0 scripts/test-dead-host.sh   (detection off: must fail)
set -euo pipefail

TOTAL_TIMEOUT=${TOTAL_TIMEOUT:-180}
if [[ -z "${DEAD_HOST_UNDER_TIMEOUT:-}" ]]; then
    # SIGTERM runs the cleanup trap below; SIGKILL follows 10 s later if it did not end.
    DEAD_HOST_UNDER_TIMEOUT=1 exec timeout --kill-after=10 "$TOTAL_TIMEOUT" "$0" "$@"
fi

repo=$(cd "$(dirname "$0")/.." && pwd)
dead=${SYMMEM_DEAD_PEER_TIMEOUT:-3}
# The bound every PE must fail within, after the cut.
bound=$(awk -v d="$dead" 'BEGIN { if (d + 0 <= 0) d = 3; print d + 5 }')
# How long after the cut to wait before declaring a hang (then the test fails).
give_up=$(awk -v b="$bound" 'BEGIN { print b + 10 }')

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

[[ $(id -u) -eq 0 ]] || fail "needs root (network namespaces)"
command -v ip >/dev/null || fail "needs iproute2 (ip)"

if [[ -z "${TEST_PE:-}" ]]; then
    (cd "$repo" && cargo build --quiet -p symmem-test-pe)
    TEST_PE="${CARGO_TARGET_DIR:-$repo/target}/debug/symmem-test-pe"
fi
[[ -x "$TEST_PE" ]] || fail "no symmem-test-pe at $TEST_PE"

ns=("smdh-a$$" "smdh-b$$")
veth=("smda$$" "smdb$$")
addr=("10.79.0.1/24" "10.79.0.2/24")
work=$(mktemp -d /tmp/symmem-dead-host.XXXXXX)
pids=()

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    for p in "${pids[@]}"; do
        # Waiting reaps it quietly (no "Killed" job report).
        { kill -KILL "$p" && wait "$p"; } 2>/dev/null || true
    done
    for n in "${ns[@]}"; do
        ip netns del "$n" 2>/dev/null || true
    done
    ip link del "${veth[0]}" 2>/dev/null || true
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'echo "FAIL: interrupted (or the ${TOTAL_TIMEOUT} s overall timeout passed)" >&2; exit 124' INT TERM

ip netns add "${ns[0]}"
ip netns add "${ns[1]}"
ip link add "${veth[0]}" type veth peer name "${veth[1]}"
for i in 0 1; do
    ip link set "${veth[$i]}" netns "${ns[$i]}"
    ip -n "${ns[$i]}" addr add "${addr[$i]}" dev "${veth[$i]}"
    ip -n "${ns[$i]}" link set "${veth[$i]}" up
    ip -n "${ns[$i]}" link set lo up
done

# PE r runs on node r / 2: PEs 0 and 1 on A, PEs 2 and 3 on B.
N=4
start_pe() {
    local rank=$1 node=$(($1 / 2)) uid=${2:-}
    # The unique id is a secret: joining PEs get it in their environment, never argv.
    ip netns exec "${ns[$node]}" env \
        -u SYMMEM_LAUNCH_ADDR -u SYMMEM_LAUNCH_SECRET -u SYMMEM_LAUNCH_RANK \
        -u SYMMEM_LAUNCH_SIZE -u SYMMEM_NODE_ID -u SYMMEM_SIMULATE_NODES \
        -u SYMMEM_DISABLE_P2P -u SYMMEM_TIMEOUT \
        SYMMEM_SOCKET_IFNAME="${veth[$node]}" \
        SYMMEM_REMOTE_TRANSPORT=socket \
        SYMMEM_DEAD_PEER_TIMEOUT="$dead" \
        SYMMEM_BOOTSTRAP_TIMEOUT=60 \
        SYMMEM_TEST_UID="$uid" \
        "$TEST_PE" dead_host "$rank" "$N" \
        >"$work/out$rank" 2>"$work/err$rank" &
    pids[rank]=$!
}

# Waits until file $1 has a line matching $2, or $3 seconds pass.
wait_line() {
    local deadline=$((SECONDS + $3))
    until grep -q "$2" "$1" 2>/dev/null; do
        ((SECONDS < deadline)) || return 1
        sleep 0.1
    done
}

show() {
    for r in $(seq 0 $((N - 1))); do
        echo "--- PE $r stdout"
        cat "$work/out$r" 2>/dev/null || true
        echo "--- PE $r stderr (last 15 lines)"
        tail -n 15 "$work/err$r" 2>/dev/null || true
    done
}

start_pe 0
wait_line "$work/out0" '^UID ' 60 || { show; fail "PE 0 printed no unique id"; }
uid=$(sed -n 's/^UID //p' "$work/out0" | head -n 1)
for r in 1 2 3; do
    start_pe "$r" "$uid"
done
for r in 0 1 2 3; do
    wait_line "$work/out$r" "^PE $r: running" 90 || { show; fail "PE $r did not start its loop"; }
done
# Let the loop run a while across the pair.
wait_line "$work/out0" '^PE 0: round 200$' 60 || { show; fail "PE 0 made no progress"; }
echo "all $N PEs running; cutting node B's link (${veth[1]} in ${ns[1]}); dead-peer time ${dead} s, bound ${bound} s"

cut=$(date +%s.%N)
ip -n "${ns[1]}" link set "${veth[1]}" down

# Wait for every PE to exit, or give up.
declare -A exit_at exit_rc
while :; do
    now=$(date +%s.%N)
    left=0
    for r in 0 1 2 3; do
        [[ -n "${exit_at[$r]:-}" ]] && continue
        if kill -0 "${pids[$r]}" 2>/dev/null; then
            left=$((left + 1))
        else
            rc=0
            wait "${pids[$r]}" || rc=$?
            exit_at[$r]=$now
            exit_rc[$r]=$rc
        fi
    done
    ((left == 0)) && break
    if awk -v n="$now" -v c="$cut" -v g="$give_up" 'BEGIN { exit !(n - c > g) }'; then
        break
    fi
    sleep 0.05
done

show
echo "=== after the cut (dead-peer time ${dead} s, bound ${bound} s):"
bad=0
for r in 0 1 2 3; do
    node=$((r / 2))
    # The PEs on the other node: any of them may be named.
    if ((node == 0)); then others='[23]'; else others='[01]'; fi
    line=$(grep -m1 "^PE $r: ERROR at " "$work/out$r" || true)
    if [[ -z "${exit_at[$r]:-}" ]]; then
        if [[ -n "$line" ]]; then
            echo "PE $r: reported an error but was still running ${give_up} s after the cut (hang in teardown): $line"
        else
            echo "PE $r: HUNG: no error and still running ${give_up} s after the cut"
        fi
        bad=1
        continue
    fi
    exited=$(awk -v e="${exit_at[$r]}" -v c="$cut" 'BEGIN { printf "%.2f", e - c }')
    if [[ -z "$line" ]]; then
        echo "PE $r: exited (status ${exit_rc[$r]}) after ${exited} s without an ERROR line"
        bad=1
        continue
    fi
    at=$(sed -n 's/^PE [0-9]*: ERROR at \([0-9.]*\) .*/\1/p' <<<"$line")
    took=$(awk -v a="$at" -v c="$cut" 'BEGIN { printf "%.2f", a - c }')
    echo "PE $r: failed ${took} s after the cut, exited after ${exited} s (status ${exit_rc[$r]}): ${line#*: ERROR at * }"
    # The error names a PE of the other node and the operation it was in.
    if ! grep -Eq "PE $others failed while PE $r was in [a-z_]+|[a-z_]+ from PE $r to PE $others over socket" <<<"$line"; then
        echo "PE $r: the error does not name a PE of the other node and the operation"
        bad=1
    fi
    if ((exit_rc[$r] == 0)); then
        echo "PE $r: exited with status 0"
        bad=1
    fi
    if ! awk -v t="$exited" -v b="$bound" 'BEGIN { exit !(t <= b) }'; then
        echo "PE $r: took ${exited} s, more than the ${bound} s bound"
        bad=1
    fi
done
((bad == 0)) || fail "not every PE failed within ${bound} s naming the unreachable PE"
echo "PASS: every PE failed within ${bound} s of the cut, naming a PE on the other node"
