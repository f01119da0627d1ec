#!/usr/bin/env bash
# A one-node Slurm cluster on loopback for the cluster tests
# (crates/serl/tests/cluster.rs), in a directory of its own:
#   slurm.sh up DIR     installs slurm-wlm and munge if missing (as root,
#                       with apt-get), starts munged, slurmctld and slurmd,
#                       waits for the node, and prints DIR/slurm.conf
#   slurm.sh down DIR   stops them
# Exit code 3 with a line "skipped: WHY" when it cannot run here.
set -uo pipefail
cmd=${1:?up or down}; dir=$(realpath -m "${2:?a directory}")
conf="$dir/slurm.conf"
stop() {
    [ -f "$conf" ] && SLURM_CONF="$conf" scontrol shutdown >/dev/null 2>&1
    for pid in "$dir"/slurmctld.pid "$dir"/slurmd.pid; do
        [ -f "$pid" ] && kill "$(cat "$pid")" 2>/dev/null
    done
    # munged only if this script started it.
    if [ -f "$dir/munged.started" ]; then
        pkill -x munged 2>/dev/null
        rm -f "$dir/munged.started"
    fi
}
# A skip after a daemon started stops what it started.
skip() { echo "skipped: $*"; stop; exit 3; }
if [ "$cmd" = down ]; then stop; exit 0; fi

if ! command -v sbatch >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
    [ "$(id -u)" = 0 ] || skip "Slurm is not installed and installing it needs root"
    command -v apt-get >/dev/null || skip "Slurm is not installed and there is no apt-get to install it"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge >"$dir.apt.log" 2>&1 \
        || skip "apt-get install slurm-wlm munge failed (see $dir.apt.log)"
fi
[ "$(id -u)" = 0 ] || skip "starting slurmd needs root"

mkdir -p "$dir"/{state,spool,log}
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    mkdir -p /etc/munge /run/munge /var/log/munge /var/lib/munge
    [ -f /etc/munge/munge.key ] || dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=128 2>/dev/null
    if id munge >/dev/null 2>&1; then
        chown -R munge:munge /etc/munge /run/munge /var/log/munge /var/lib/munge
        chmod 0400 /etc/munge/munge.key
        su -s /bin/sh munge -c /usr/sbin/munged || /usr/sbin/munged --force
    else
        chmod 0400 /etc/munge/munge.key
        /usr/sbin/munged --force
    fi
    mkdir -p "$dir" && touch "$dir/munged.started"
    sleep 1
    munge -n | unmunge >/dev/null 2>&1 || skip "munged did not start"
fi

host=$(hostname -s)
# Ports of its own, so that it runs beside another cluster on the machine.
port=${SERL_TEST_SLURM_PORT:-26817}
cat >"$conf" <<CONF
ClusterName=serltest
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldPort=$port
SlurmdPort=$((port + 1))
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$conf"
slurmctld || skip "slurmctld did not start (see $dir/log/slurmctld.log)"
slurmd || skip "slurmd did not start (see $dir/log/slurmd.log)"
for _ in $(seq 60); do
    state=$(sinfo -h -o %t 2>/dev/null)
    case "$state" in idle*|mix*|alloc*) echo "$conf"; exit 0 ;; esac
    sleep 0.5
done
skip "the node never became idle (sinfo: ${state:-nothing}; see $dir/log)"
