#!/usr/bin/env bash
# A throwaway single-node Slurm cluster for the tests (Debian 12's Slurm 22.05): its own munge key
# and munged socket, its own slurm.conf, slurmctld and slurmd on free TCP ports, state, spool and
# logs all inside one folder. Nothing is written to /etc, nothing listens beyond this machine's
# loopback and the ports it picked, and `stop` cancels every job, stops the three daemons by the
# process ids they wrote and deletes the folder.
#   scripts/slurm-throwaway.sh start DIR   creates DIR (must not exist), starts munged, slurmctld and
#                                          slurmd, waits until `sinfo` says the node is idle, and prints
#                                          the SLURM_CONF to use as its last line
#   scripts/slurm-throwaway.sh stop DIR    cancels the cluster's jobs, stops its daemons, removes DIR
#   scripts/slurm-throwaway.sh env DIR     prints `export SLURM_CONF=...` for a shell to eval
# The node is `localhost` with EXPCTL_SLURM_CPUS CPUs (default 4: SlurmdParameters=config_overrides
# lets a 2-core machine declare more without the node draining), one partition `debug`, requeue
# allowed. EXPCTL_SLURM_NODES=N (N > 1) declares nodes n1..nN instead, each with those CPUs, all on
# this host (NodeHostname=localhost, a slurmd of its own on its own port, `slurmd -N nI`): jobs of
# several nodes then run for real (srun -N2 starts a task on n1 and one on n2, SLURM_NODEID 0 and
# 1), though every "node" is this machine and the names n1..nN resolve nowhere (give ranks
# MASTER_ADDR=127.0.0.1). proctrack/linuxproc and task/none: no cgroups, no systemd. No accounting (no slurmdbd):
# follow jobs with `squeue` and `scontrol show job`. Slurm 22.05 holds a requeued job for 120 s
# before it may start again (BeginTime), so tests that requeue lift it (scontrol update StartTime=now,
# said again while the job is pending: Slurm sets BeginTime a second time when the job's first run
# has finished completing).
# SchedulerParameters=batch_sched_delay=0: Slurm's default lets a batch job's start wait up to 3 s
# (for high submission rates); measured here, a bare `sbatch --wrap=date` then took 2.95 s from
# submission to its first command, 0.98 s without the delay (bench/slurm.sh, docs/slurm.md).
# Needs root (slurmd starts jobs as their users) and the packages slurmctld slurmd slurm-client
# munge (scripts/install-deps.sh installs them). Exit codes: 0 started/stopped, 1 a daemon failed
# (its log is printed), 2 a usage error or something missing.
set -euo pipefail

usage() { echo "usage: slurm-throwaway.sh start|stop|env DIR" >&2; exit 2; }
command="${1:-}"
dir="${2:-}"
[[ -n "$command" && -n "$dir" ]] || usage

missing=()
for program in /usr/sbin/munged /usr/sbin/slurmctld /usr/sbin/slurmd sinfo scontrol scancel squeue; do
  command -v "$program" >/dev/null || missing+=("$program")
done

# A TCP port nothing listens on now (the kernel picks it).
free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Stops the process whose id FILE holds, if it is still the program NAME: SIGTERM, then SIGKILL
# after 10 s. Never by name alone.
stop_pid_file() {
  local file="$1" name="$2" pid
  [[ -f "$file" ]] || return 0
  pid="$(cat "$file")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == "$name" ]] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

show_log() {
  local log="$1"
  [[ -f "$log" ]] && { echo "--- $log (last lines)" >&2; tail -n 20 "$log" >&2; }
  return 0
}

case "$command" in
  start)
    ((${#missing[@]} == 0)) ||
      { echo "slurm-throwaway.sh: missing ${missing[*]} (apt-get install slurmctld slurmd slurm-client munge)" >&2; exit 2; }
    [[ $(id -u) -eq 0 ]] || { echo "slurm-throwaway.sh: slurmd must run as root (it starts jobs as their users)" >&2; exit 2; }
    [[ ! -e "$dir" ]] || { echo "slurm-throwaway.sh: $dir exists already" >&2; exit 2; }
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    # munged checks that its key, socket folder and log folder are not writable by others.
    chmod 755 "$dir"
    mkdir -m 755 "$dir/munge" "$dir/ctld" "$dir/spool" "$dir/log"
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$dir/munge/munge.key"
    /usr/sbin/munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
      --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed" \
      >/dev/null 2>&1 || { show_log "$dir/log/munged.log"; echo "slurm-throwaway.sh: munged did not start" >&2; exit 1; }
    ctld_port="$(free_port)"
    slurmd_port="$(free_port)"
    while [[ "$slurmd_port" == "$ctld_port" ]]; do slurmd_port="$(free_port)"; done
    cpus="${EXPCTL_SLURM_CPUS:-4}"
    nodes="${EXPCTL_SLURM_NODES:-1}"
    [[ "$nodes" =~ ^[1-9][0-9]?$ ]] || { echo "slurm-throwaway.sh: EXPCTL_SLURM_NODES=$nodes: give a number of nodes from 1 to 99" >&2; exit 2; }
    if [[ "$nodes" -eq 1 ]]; then
      node_lines="NodeName=localhost CPUs=$cpus RealMemory=2000 State=UNKNOWN"
      node_names=localhost
    else
      node_lines=""
      node_names=""
      for i in $(seq "$nodes"); do
        port="$(free_port)"
        node_lines+="NodeName=n$i NodeHostname=localhost Port=$port CPUs=$cpus RealMemory=2000 State=UNKNOWN"$'\n'
        node_names+="${node_names:+,}n$i"
        mkdir -p "$dir/spool-n$i"
      done
    fi
    # One key per line: Slurm expands no variables.
    cat >"$dir/slurm.conf" <<CONF
ClusterName=expctl-throwaway
SlurmctldHost=localhost
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/spool$([[ "$nodes" -gt 1 ]] && echo -%n)
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd$([[ "$nodes" -gt 1 ]] && echo -%n).pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd$([[ "$nodes" -gt 1 ]] && echo -%n).log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.log
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
ReturnToService=2
JobRequeue=1
KillWait=5
MinJobAge=600
MpiDefault=none
SlurmctldTimeout=30
SlurmdTimeout=60
$node_lines
PartitionName=debug Nodes=$node_names Default=YES MaxTime=60 State=UP
CONF
    export SLURM_CONF="$dir/slurm.conf"
    /usr/sbin/slurmctld -f "$SLURM_CONF" ||
      { show_log "$dir/log/slurmctld.log"; echo "slurm-throwaway.sh: slurmctld did not start" >&2; exit 1; }
    if [[ "$nodes" -eq 1 ]]; then
      /usr/sbin/slurmd -f "$SLURM_CONF" ||
        { show_log "$dir/log/slurmd.log"; echo "slurm-throwaway.sh: slurmd did not start" >&2; exit 1; }
    else
      for i in $(seq "$nodes"); do
        /usr/sbin/slurmd -f "$SLURM_CONF" -N "n$i" ||
          { show_log "$dir/log/slurmd-n$i.log"; echo "slurm-throwaway.sh: slurmd of n$i did not start" >&2; exit 1; }
      done
    fi
    for _ in $(seq 300); do
      state="$(sinfo -h -o %T 2>/dev/null | sort -u | tr '\n' ' ' | sed 's/ $//' || true)"
      [[ "$state" == "idle" ]] && { echo "$SLURM_CONF"; exit 0; }
      sleep 0.1
    done
    show_log "$dir/log/slurmctld.log"
    show_log "$dir/log/slurmd.log"
    echo "slurm-throwaway.sh: the node is not idle after 30 s (sinfo: ${state:-no answer})" >&2
    exit 1
    ;;
  stop)
    [[ -d "$dir" ]] || exit 0
    dir="$(cd "$dir" && pwd)"
    if [[ -f "$dir/slurm.conf" && -f "$dir/slurmctld.pid" ]]; then
      export SLURM_CONF="$dir/slurm.conf"
      # Every job of this cluster, so that no slurmstepd or job step outlives it.
      scancel --quiet --full --user=root 2>/dev/null || true
      for user in $(squeue -h -o %u 2>/dev/null | sort -u); do scancel --quiet --full --user="$user" 2>/dev/null || true; done
      for _ in $(seq 150); do
        [[ -z "$(squeue -h -o %i 2>/dev/null)" ]] && break
        sleep 0.1
      done
    fi
    for pid_file in "$dir"/slurmd.pid "$dir"/slurmd-n*.pid; do
      [[ -f "$pid_file" ]] && stop_pid_file "$pid_file" slurmd
    done
    stop_pid_file "$dir/slurmctld.pid" slurmctld
    stop_pid_file "$dir/munge/munged.pid" munged
    rm -rf "$dir"
    ;;
  env)
    [[ -f "$dir/slurm.conf" ]] || { echo "slurm-throwaway.sh: no cluster in $dir (start one first)" >&2; exit 2; }
    echo "export SLURM_CONF=$(cd "$dir" && pwd)/slurm.conf"
    ;;
  *) usage ;;
esac
