#!/usr/bin/env bash
# A real single-node SLURM cluster on 127.0.0.1 for the cluster tests (tests/cluster/), as root:
#   slurm.sh up      install slurm-wlm and munge if missing, configure, start, wait for the node
#   slurm.sh down    stop the daemons (the configuration and packages stay)
#   slurm.sh status  whether it is up, and sinfo/squeue
# Idempotent. Daemons run without systemd or cgroups (proctrack/linuxproc, task/none), so it works
# in a container. State, logs and pid files: $STUDYRUN_SLURM_DIR (default /var/lib/studyrun-slurm);
# the configuration is /etc/slurm/slurm.conf, where sbatch and squeue look for it, and is written
# only when absent or written by this script before (a site's own configuration is never replaced).
set -euo pipefail
STATE="${STUDYRUN_SLURM_DIR:-/var/lib/studyrun-slurm}"
CONF=/etc/slurm/slurm.conf
MARK="# written by studyrun tests/cluster/slurm.sh"
say() { echo "slurm.sh: $*"; }

need_root() {
  [ "$(id -u)" -eq 0 ] || { echo "slurm.sh: must run as root (it installs packages and starts daemons)" >&2; exit 1; }
}

install() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null; then
    return
  fi
  say "installing slurm-wlm and munge (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q slurm-wlm munge >/dev/null 2>&1 || {
    apt-get update -q >/dev/null
    apt-get install -y -q slurm-wlm munge >/dev/null
  }
}

configure() {
  if [ -f "$CONF" ] && ! grep -qxF "$MARK" "$CONF"; then
    echo "slurm.sh: $CONF exists and was not written by this script; leaving it alone" >&2
    exit 1
  fi
  local host cpus memory
  host="$(hostname -s)"
  cpus="$(nproc --all)"
  # leave the machine at least 2 GiB, or a quarter of its memory, besides the jobs
  memory="$(awk '/^MemTotal:/ { m = int($2 / 1024); r = m / 4; if (r < 2048) r = 2048; print int(m - r) }' /proc/meminfo)"
  [ "$memory" -ge 512 ] || memory=512
  mkdir -p "$STATE/ctld" "$STATE/d" /etc/slurm
  local text
  text="$MARK
ClusterName=studyrun
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
# no cgroups: works in a container
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# finished jobs leave squeue within seconds; a cancelled job is killed 2 s after SIGTERM
MinJobAge=2
KillWait=2
InactiveLimit=0
ReturnToService=2
SchedulerParameters=sched_interval=2
SlurmctldDebug=info
SlurmdDebug=info
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP"
  if [ ! -f "$CONF" ] || [ "$(cat "$CONF")" != "$text" ]; then
    printf '%s\n' "$text" > "$CONF"
    say "wrote $CONF (node $host, $cpus CPUs, ${memory} MB; state in $STATE)"
    restart=1
  fi
}

running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start() {
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  if [ ! -s /etc/munge/munge.key ]; then
    mkdir -p /etc/munge
    if command -v mungekey >/dev/null; then mungekey --create --keyfile /etc/munge/munge.key; else
      dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; fi
    say "created /etc/munge/munge.key"
  fi
  chown -R munge:munge /etc/munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
  chmod 0400 /etc/munge/munge.key
  if ! running /run/munge/munged.pid; then
    if id munge >/dev/null 2>&1; then su -s /bin/sh munge -c munged; else munged --force; fi
    say "started munged"
  fi
  if [ "${restart:-0}" = 1 ]; then stop_slurm; fi
  if ! running "$STATE/slurmctld.pid"; then
    slurmctld -i  # -i: ignore (not recover) the state of an earlier cluster's jobs
    say "started slurmctld"
  fi
  if ! running "$STATE/slurmd.pid"; then
    slurmd
    say "started slurmd"
  fi
}

wait_idle() {
  local deadline=$((SECONDS + 60)) state=""
  while [ $SECONDS -lt $deadline ]; do
    state="$(sinfo -h -N -o '%T' 2>/dev/null | head -n1 || true)"
    case "$state" in
      idle|mixed|allocated) say "node $(hostname -s) is $state"; sinfo; return 0 ;;
      down*|drain*) scontrol update nodename="$(hostname -s)" state=resume 2>/dev/null || true ;;
    esac
    sleep 1
  done
  echo "slurm.sh: the node did not become idle within 60 s (state: ${state:-none}); logs: $STATE/slurmctld.log $STATE/slurmd.log" >&2
  tail -n 20 "$STATE/slurmctld.log" "$STATE/slurmd.log" >&2 || true
  return 1
}

stop_slurm() {
  local name pid
  for name in slurmd slurmctld; do
    if running "$STATE/$name.pid"; then
      pid="$(cat "$STATE/$name.pid")"
      kill "$pid"
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
      kill -9 "$pid" 2>/dev/null || true
      say "stopped $name"
    fi
  done
}

case "${1:-}" in
  up)
    need_root; install; configure; start; wait_idle ;;
  down)
    need_root
    if command -v scancel >/dev/null && running "$STATE/slurmctld.pid"; then scancel --quiet --user=root 2>/dev/null || true; fi
    stop_slurm
    if running /run/munge/munged.pid; then kill "$(cat /run/munge/munged.pid)"; say "stopped munged"; fi ;;
  status)
    if running "$STATE/slurmctld.pid" && running "$STATE/slurmd.pid" && sinfo >/dev/null 2>&1; then
      echo "up"; sinfo; squeue
    else
      echo "down"; exit 1
    fi ;;
  *)
    echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
