#!/usr/bin/env bash
# Install (if needed) and start a real single-node Slurm cluster from Debian's packages,
# without systemd: munged, MariaDB + slurmdbd (so `sacct` works, as on real clusters),
# slurmctld and slurmd. Idempotent: running daemons are left alone; a changed
# configuration restarts them.
#
# Why accounting: snakemake-executor-plugin-slurm queries job status with `sacct`
# whenever the binary exists (it always does with slurm-client); without slurmdbd that
# query fails and Snakemake waits forever. Set SLURM_UP_ACCOUNTING=0 to skip MariaDB and
# slurmdbd; then run Snakemake with `--slurm-status-command squeue` (MinJobAge=600 here).
#
# Environment knobs (defaults in brackets):
#   SLURM_UP_CPUS       CPUs advertised by the node [16]; more than the real cores so
#                       many small jobs run at once (SlurmdParameters=config_overrides)
#   SLURM_UP_MEM_MB     memory advertised by the node, MB [32000]
#   SLURM_UP_ACCOUNTING 1 = run MariaDB + slurmdbd [1]
#   SLURM_UP_NO_INSTALL 1 = never call apt-get; fail if packages are missing [0]
#
# Usage: sudo scripts/slurm-up.sh   (stop with scripts/slurm-down.sh)
set -euo pipefail

CPUS="${SLURM_UP_CPUS:-16}"
MEM_MB="${SLURM_UP_MEM_MB:-32000}"
ACCOUNTING="${SLURM_UP_ACCOUNTING:-1}"
NO_INSTALL="${SLURM_UP_NO_INSTALL:-0}"
CLUSTER=minisandbox
NODE="$(hostname -s)"
CONF_DIR=/etc/slurm          # the executor plugin's job steps need the default path
LOG_DIR=/var/log/slurm
STATE_DIR=/var/lib/slurm
RUN_DIR=/run/slurm
DB_SOCK=/run/mysqld/mysqld.sock

log() { echo "slurm-up: $*" >&2; }
die() { echo "slurm-up: error: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (it installs packages and starts daemons)"

# ---------------------------------------------------------------- install packages
PKGS=(munge slurmctld slurmd slurm-client)
[ "$ACCOUNTING" = 1 ] && PKGS+=(slurmdbd mariadb-server)
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    [ "$NO_INSTALL" = 1 ] && die "missing Debian packages: ${missing[*]} (SLURM_UP_NO_INSTALL=1); install them with apt-get"
    command -v apt-get >/dev/null || die "missing packages ${missing[*]} and no apt-get: install Slurm by hand"
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # Services must not be started by the packages' postinst (no systemd here): we
    # start them ourselves below. Respect an existing policy-rc.d, else add ours.
    own_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
        own_policy=1
    fi
    apt_opts=(-o DPkg::Lock::Timeout=600 -q)
    apt-get "${apt_opts[@]}" update >/dev/null || die "apt-get update failed (no Debian mirror reachable?)"
    apt-get "${apt_opts[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null \
        || die "apt-get install ${missing[*]} failed"
    [ "$own_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
fi

# ---------------------------------------------------------------- helpers
# is_running PIDFILE: the pid in PIDFILE is alive
is_running() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# stop_pidfile PIDFILE: stop the daemon recorded there and wait for it to go
stop_pidfile() {
    local pf="$1" pid i
    is_running "$pf" || { rm -f "$pf"; return 0; }
    pid="$(cat "$pf")"
    kill "$pid" 2>/dev/null || true
    for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
    rm -f "$pf"
}

# write_if_changed PATH MODE: write stdin to PATH; return 0 if the content changed
write_if_changed() {
    local path="$1" mode="$2" tmp
    tmp="$(mktemp "$path.XXXXXX")"
    cat > "$tmp"
    chmod "$mode" "$tmp"
    if [ -f "$path" ] && cmp -s "$tmp" "$path"; then rm -f "$tmp"; return 1; fi
    mv -f "$tmp" "$path"
    return 0
}

wait_for() {  # wait_for SECONDS DESCRIPTION CMD...: poll CMD until it succeeds
    local secs="$1" what="$2" i; shift 2
    for i in $(seq $((secs * 10))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
    die "$what did not come up within ${secs}s; see $LOG_DIR"
}

mkdir -p "$CONF_DIR" "$LOG_DIR" "$STATE_DIR/slurmctld" "$STATE_DIR/slurmd" "$RUN_DIR"

# ---------------------------------------------------------------- munge
install -d -o munge -g munge -m 0755 /run/munge
install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge /etc/munge
if [ ! -s /etc/munge/munge.key ]; then
    log "creating /etc/munge/munge.key"
    if command -v mungekey >/dev/null; then
        runuser -u munge -- mungekey --create --keyfile=/etc/munge/munge.key
    else
        dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
    fi
fi
chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
if ! is_running /run/munge/munged.pid; then
    log "starting munged"
    runuser -u munge -- /usr/sbin/munged --force
fi
wait_for 10 munged sh -c 'munge -n | unmunge'

# ---------------------------------------------------------------- configuration
changed=0
{
cat <<EOF
# Written by minisandbox scripts/slurm-up.sh: a single-node test cluster.
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE_DIR/slurmctld
SlurmdSpoolDir=$STATE_DIR/slurmd
SlurmctldPidFile=$RUN_DIR/slurmctld.pid
SlurmdPidFile=$RUN_DIR/slurmd.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
# No cgroups/systemd in a plain root environment: track processes by parent pid.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=500
# Advertise more CPUs than cores (small build jobs are I/O bound).
SlurmdParameters=config_overrides
ReturnToService=2
# Keep finished jobs visible to squeue for 10 min (squeue status mode of the plugin).
MinJobAge=600
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
MaxJobCount=100000
JobCompType=jobcomp/filetxt
JobCompLoc=$LOG_DIR/jobcomp.log
EOF
if [ "$ACCOUNTING" = 1 ]; then
cat <<EOF
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=6819
JobAcctGatherFrequency=30
EOF
fi
cat <<EOF
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
} | write_if_changed "$CONF_DIR/slurm.conf" 0644 && changed=1

if [ "$ACCOUNTING" = 1 ]; then
    write_if_changed "$CONF_DIR/slurmdbd.conf" 0600 <<EOF && changed=1 || true
# Written by minisandbox scripts/slurm-up.sh
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=root
PidFile=$RUN_DIR/slurmdbd.pid
LogFile=$LOG_DIR/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=slurm_acct_db
StorageUser=slurm
StoragePass=minisandbox
EOF
fi

if [ "$changed" = 1 ]; then
    log "configuration changed: restarting Slurm daemons"
    stop_pidfile "$RUN_DIR/slurmd.pid"
    stop_pidfile "$RUN_DIR/slurmctld.pid"
    stop_pidfile "$RUN_DIR/slurmdbd.pid"
fi

# ---------------------------------------------------------------- MariaDB + slurmdbd
if [ "$ACCOUNTING" = 1 ]; then
    install -d -o mysql -g mysql -m 0755 /run/mysqld
    if [ ! -d /var/lib/mysql/mysql ]; then
        log "initialising MariaDB data directory"
        mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
    fi
    if ! mariadb-admin --socket="$DB_SOCK" ping >/dev/null 2>&1; then
        log "starting MariaDB"
        # setsid: the server must outlive this script and the caller's process group
        setsid /usr/sbin/mariadbd --user=mysql --datadir=/var/lib/mysql \
            --socket="$DB_SOCK" --pid-file=/run/mysqld/mysqld.pid \
            --bind-address=127.0.0.1 --skip-networking=0 \
            --innodb-buffer-pool-size=64M --innodb-lock-wait-timeout=900 \
            --log-error="$LOG_DIR/mariadb.log" </dev/null >/dev/null 2>&1 &
        wait_for 60 MariaDB mariadb-admin --socket="$DB_SOCK" ping
    fi
    mariadb --socket="$DB_SOCK" <<'SQL'
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'minisandbox';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
FLUSH PRIVILEGES;
SQL
    if ! is_running "$RUN_DIR/slurmdbd.pid"; then
        log "starting slurmdbd"
        setsid /usr/sbin/slurmdbd </dev/null >/dev/null 2>&1
    fi
    wait_for 60 slurmdbd sh -c "sacctmgr -n list cluster >/dev/null"
fi

# ---------------------------------------------------------------- slurmctld + slurmd
if ! is_running "$RUN_DIR/slurmctld.pid"; then
    log "starting slurmctld"
    setsid /usr/sbin/slurmctld -i </dev/null >/dev/null 2>&1
fi
wait_for 30 slurmctld scontrol ping
if [ "$ACCOUNTING" = 1 ]; then
    # slurmctld registers the cluster with slurmdbd on start; make sure it did.
    sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER" \
        || sacctmgr -i add cluster "$CLUSTER" >/dev/null
fi
if ! is_running "$RUN_DIR/slurmd.pid"; then
    log "starting slurmd"
    setsid /usr/sbin/slurmd </dev/null >/dev/null 2>&1
fi
wait_for 30 "slurmd (node $NODE registered)" sh -c "sinfo -h -n '$NODE' -o %t | grep -Eqv '^(unk|$)'"
# A node left DOWN/DRAINED by an earlier unclean stop: put it back in service.
state="$(sinfo -h -n "$NODE" -o %t)"
case "$state" in
    idle*|mix*|alloc*|comp*) ;;
    *) log "node $NODE is $state: resuming it"
       scontrol update NodeName="$NODE" State=RESUME || true ;;
esac
wait_for 30 "slurmd (node $NODE idle)" sh -c "sinfo -h -n '$NODE' -o %t | grep -Eq '^(idle|mix|alloc|comp)'"
log "up: cluster=$CLUSTER node=$NODE cpus=$CPUS mem=${MEM_MB}MB accounting=$ACCOUNTING ($(sinfo -h -o '%P %t %D'))"
