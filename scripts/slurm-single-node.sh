#!/usr/bin/env bash
# A single-node Slurm for the launcher tests: munged, slurmctld and slurmd as root, with a
# generated slurm.conf under DIR (nothing under /etc/slurm is read or written).
#
#   bash scripts/slurm-single-node.sh start DIR   # prints the SLURM_CONF to export on success
#   bash scripts/slurm-single-node.sh stop DIR
#
# Needs Debian's slurm-wlm and munge packages. On failure, start says why (the daemon logs'
# tails) and exits 1, leaving nothing running.
set -euo pipefail

cmd=${1:?usage: slurm-single-node.sh start|stop DIR}
dir=${2:?usage: slurm-single-node.sh start|stop DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
conf=$dir/slurm.conf

stop() {
  for pid_file in "$dir/slurmd.pid" "$dir/slurmctld.pid"; do
    if [ -s "$pid_file" ]; then
      kill "$(cat "$pid_file")" 2>/dev/null || true
      rm -f "$pid_file"
    fi
  done
}

fail() {
  echo "slurm-single-node: $*" >&2
  for log in "$dir"/log/*.log; do
    [ -f "$log" ] && { echo "--- tail of $log" >&2; tail -5 "$log" >&2; }
  done
  stop
  exit 1
}

start_munge() {
  # A 1024-byte random key owned by munge, mode 400; munged runs as the munge user.
  if [ ! -s /etc/munge/munge.key ]; then
    mkdir -p /etc/munge
    head -c 1024 /dev/urandom >/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
  fi
  for d in /run/munge /var/lib/munge /var/log/munge; do
    mkdir -p "$d"
    chown munge:munge "$d"
  done
  if ! munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
    runuser -u munge -- /usr/sbin/munged || fail "munged did not start"
  fi
  for _ in $(seq 50); do
    munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  fail "munge does not answer (munge -n | unmunge fails)"
}

write_conf() {
  local node cpus
  node=$(hostname -s)
  # The node's CPUs must be what slurmd detects, or the node goes INVAL.
  cpus=$(slurmd -C | sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' | head -1)
  [ -n "$cpus" ] || fail "slurmd -C did not report the node's CPUs"
  mkdir -p "$dir/state" "$dir/spool" "$dir/log"
  cat >"$conf" <<EOF
ClusterName=symmemtest
SlurmctldHost=$node
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
# Step ports outside Linux's ephemeral range (32768-60999): a client socket of another
# test can then never hold the port a step's rank 0 must bind.
MpiParams=ports=61000-61999
ReturnToService=2
NodeName=$node CPUs=$cpus State=UNKNOWN
PartitionName=symmem Nodes=$node Default=YES OverSubscribe=YES State=UP
EOF
}

case "$cmd" in
start)
  [ "$(id -u)" = 0 ] || fail "must run as root (slurmd runs tasks as any user)"
  for tool in munged slurmctld slurmd sinfo srun; do
    command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] \
      || fail "$tool not found (install Debian's slurm-wlm and munge)"
  done
  stop
  start_munge
  write_conf
  export SLURM_CONF=$conf
  slurmctld -f "$conf" || fail "slurmctld did not start"
  slurmd -f "$conf" || fail "slurmd did not start"
  for _ in $(seq 300); do
    if [ "$(sinfo -h -o %T 2>/dev/null | head -1)" = idle ]; then
      echo "SLURM_CONF=$conf"
      exit 0
    fi
    sleep 0.1
  done
  fail "the node is not idle after 30 s (sinfo: $(sinfo -h -o '%T %E' 2>&1 | head -1))"
  ;;
stop)
  stop
  ;;
*)
  echo "usage: slurm-single-node.sh start|stop DIR" >&2
  exit 2
  ;;
esac
