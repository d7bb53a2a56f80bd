#!/usr/bin/env bash
# A SLURM cluster on this machine, for rehearsing the cluster path (scripts/rehearse.sh): partition
# `local` is one node; partition `two` adds a second node served by a second slurmd on the same host
# (another port), for multi-node jobs (tests/test_multinode.py). Both nodes are the same 2 cores.
#   bash scripts/local-slurm.sh start    install Debian's slurm-wlm + munge if missing (root), start them
#   bash scripts/local-slurm.sh stop     stop the daemons this script started (by their pid files)
#   bash scripts/local-slurm.sh status   exit 0 when the cluster answers (sinfo shows an idle node)
# No systemd and no accounting database: the Snakemake SLURM executor is told to ask squeue for job
# states and to send no account (workflow/profiles/slurm-local/). State lives under $SLURM_LOCAL_DIR.
set -euo pipefail

STATE=${SLURM_LOCAL_DIR:-/var/lib/grpo-lambda-slurm}
HOST=$(hostname -s)
CONF=/etc/slurm/slurm.conf

answers() {
    command -v sinfo >/dev/null 2>&1 && timeout 10 sinfo -h -o '%t' 2>/dev/null | grep -Eq 'idle|mix|alloc'
}

need_root() {
    if [ "$(id -u)" != 0 ]; then
        echo "local-slurm: $1 needs root (no cluster answers and this user cannot start one)" >&2
        exit 1
    fi
}

install_packages() {
    command -v slurmctld >/dev/null 2>&1 && command -v munged >/dev/null 2>&1 && return
    need_root "installing slurm-wlm and munge"
    echo "local-slurm: installing Debian's slurm-wlm and munge" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
}

start_munge() {
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        return
    fi
    install -d -o munge -g munge -m 0700 /etc/munge /var/log/munge /var/lib/munge
    install -d -o munge -g munge -m 0755 /run/munge
    if [ ! -s /etc/munge/munge.key ]; then
        mungekey -c -f -k /etc/munge/munge.key
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
    su -s /bin/sh munge -c /usr/sbin/munged
    for _ in $(seq 20); do
        munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return
        sleep 0.5
    done
    echo "local-slurm: munged did not answer (see /var/log/munge/munged.log)" >&2
    exit 1
}

write_conf() {
    local cpus mem_mb
    # Not nproc: it honours OMP_NUM_THREADS, which callers set to 1 for their jobs.
    cpus=$(getconf _NPROCESSORS_ONLN)
    # Leave about 2 GB of the machine to the controller and everything else.
    mem_mb=$(awk '/MemTotal/ {printf "%d", $2 / 1024 - 2048}' /proc/meminfo)
    install -d "$STATE/spool-$HOST" "$STATE/spool-$HOST-2" "$STATE/state" "$STATE/log" /etc/slurm
    cat > "$CONF" <<EOF
# Written by grpo-lambda's scripts/local-slurm.sh: two nodes on this host, no accounting.
ClusterName=grpo-lambda-local
SlurmctldHost=$HOST
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$STATE/state
SlurmdSpoolDir=$STATE/spool-%n
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd-%n.log
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd-%n.pid
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
MinJobAge=600
NodeName=$HOST CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
NodeName=$HOST-2 NodeHostname=$HOST Port=6819 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=local Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
PartitionName=two Nodes=$HOST,$HOST-2 MaxTime=INFINITE State=UP
EOF
}

start() {
    if answers; then
        echo "local-slurm: a cluster already answers"
        return
    fi
    install_packages
    need_root "starting slurmctld and slurmd"
    start_munge
    write_conf
    stop_daemons
    /usr/sbin/slurmctld -c
    /usr/sbin/slurmd -N "$HOST"
    /usr/sbin/slurmd -N "$HOST-2"
    for _ in $(seq 60); do
        if answers; then
            echo "local-slurm: cluster up ($HOST, partition local)"
            return
        fi
        scontrol update nodename="$HOST,$HOST-2" state=resume >/dev/null 2>&1 || true
        sleep 1
    done
    echo "local-slurm: the node did not become idle; see $STATE/log/" >&2
    sinfo >&2 || true
    exit 1
}

stop_daemons() {
    local file
    for file in "$STATE"/slurmd*.pid "$STATE/slurmctld.pid"; do
        [ -f "$file" ] || continue
        kill "$(cat "$file")" 2>/dev/null || true
        rm -f "$file"
    done
}
stop() {
    stop_daemons
    # Without a controller, `scontrol show config` waits its 10 s message timeout, and Snakemake's SLURM
    # plugin runs it whenever Snakemake starts, even for a local run: remove the config this script
    # wrote (start writes it again), so that the query fails at once.
    if grep -q "Written by grpo-lambda's scripts/local-slurm.sh" "$CONF" 2>/dev/null; then
        rm -f "$CONF"
    fi
    echo "local-slurm: stopped"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status)
        if answers; then sinfo; else echo "local-slurm: no cluster answers"; exit 1; fi ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
