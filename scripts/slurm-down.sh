#!/usr/bin/env bash
# Stop the single-node Slurm started by scripts/slurm-up.sh: slurmd, slurmctld,
# slurmdbd, the MariaDB it started, and munged. Only daemons recorded in their pid files
# are stopped. Idempotent. Packages, configuration and state stay (the next
# slurm-up.sh starts in about a second). `--purge` also deletes the job state, logs and
# accounting database so the next start is clean.
set -euo pipefail

PURGE=0
[ "${1:-}" = "--purge" ] && PURGE=1
RUN_DIR=/run/slurm

log() { echo "slurm-down: $*" >&2; }

[ "$(id -u)" = 0 ] || { echo "slurm-down: error: must run as root" >&2; exit 1; }

stop_pidfile() {  # stop_pidfile NAME PIDFILE
    local name="$1" pf="$2" pid i
    if [ -s "$pf" ] && kill -0 "$(cat "$pf")" 2>/dev/null; then
        pid="$(cat "$pf")"
        log "stopping $name (pid $pid)"
        kill "$pid" 2>/dev/null || true
        for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then
            log "$name did not stop in 10s: SIGKILL"
            kill -9 "$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$pf"
}

stop_pidfile slurmd "$RUN_DIR/slurmd.pid"
stop_pidfile slurmctld "$RUN_DIR/slurmctld.pid"
stop_pidfile slurmdbd "$RUN_DIR/slurmdbd.pid"
if [ "$PURGE" = 1 ] && mariadb-admin --socket=/run/mysqld/mysqld.sock ping >/dev/null 2>&1; then
    log "dropping the accounting database"
    mariadb --socket=/run/mysqld/mysqld.sock -e "DROP DATABASE IF EXISTS slurm_acct_db"
fi
stop_pidfile mariadb /run/mysqld/mysqld.pid
stop_pidfile munged /run/munge/munged.pid

if [ "$PURGE" = 1 ]; then
    log "purging job state and logs"
    rm -rf /var/lib/slurm/slurmctld/* /var/lib/slurm/slurmd/* /var/log/slurm/*
fi
log "down"
