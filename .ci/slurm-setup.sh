#!/bin/bash
# A private, real Slurm on this one machine, for the SLURM tests (test/slurm/) and for
# trying the job scripts (jobs/*.slurm) without a cluster. Root only, no systemd needed.
#
#   .ci/slurm-setup.sh install         apt-get install slurm-wlm munge (skipped when present)
#   .ci/slurm-setup.sh start [single]  one node "localhost": 16 CPUs, 8 fake GPUs
#   .ci/slurm-setup.sh start two       two emulated nodes fn1, fn2 on this box, each with
#                                      64 CPUs and 8 fake GPUs (2 nodes x 8 GPUs)
#   .ci/slurm-setup.sh stop            cancel its jobs, stop its daemons, delete its files
#   .ci/slurm-setup.sh status          sinfo and squeue of the private instance
#
# Everything lives under $FTMPI_SLURM_DIR (default /tmp/ftmpi-slurm): slurm.conf,
# gres.conf, state, spool, logs, pid files, a private munge key and socket, the fake GPU
# devices. Its TCP ports start at $FTMPI_SLURM_PORT (default 16810; slurmctld on the
# base, the slurmd ports above it), so it does not collide with a site Slurm/munge, nor
# with a second instance started with another directory and port (the tests run two in
# parallel). `start` writes $FTMPI_SLURM_DIR/env.sh; source it to use the instance:
#   . /tmp/ftmpi-slurm/env.sh && sinfo && sbatch jobs/tiny.slurm
# Exit status: 0 ok; 1 could not install or start (the reason on stderr, then the tail of
# the daemon logs).
#
# Settings that differ from a production Slurm, on purpose (see doc/slurm.md):
#   AuthInfo=cred_expire=10   a requeued job waits cred_expire + 1 s before it may start
#                             again (default 120 s, so 121 s); the tests requeue a job
#   SchedulerParameters=sched_interval=2,bf_interval=1   look at pending jobs often
#   SlurmdParameters=config_overrides   nodes may claim more CPUs/GPUs than the box has
#   ProctrackType=proctrack/linuxproc, TaskPlugin=task/none   no cgroups in a container
#   mpi.conf PMIxCollFence=ring   PMIx fences without data hold every node (the default
#                             tree did not on the two emulated nodes: MPI_Init crashed)
set -u

DIR=${FTMPI_SLURM_DIR:-/tmp/ftmpi-slurm}
PORT=${FTMPI_SLURM_PORT:-16810}
CONF=$DIR/slurm.conf

STARTING=0
die() {
    echo "slurm-setup: $*" >&2
    for f in "$DIR"/log/*.log "$DIR/munge/munged.log"; do
        [ -f "$f" ] && { echo "--- tail of $f" >&2; tail -n 15 "$f" >&2; }
    done
    # a failed start leaves nothing running
    [ "$STARTING" = 1 ] && do_stop
    exit 1
}

need_root() { [ "$(id -u)" -eq 0 ] || { echo "slurm-setup: must run as root (slurmd does)" >&2; exit 1; }; }

have_slurm() {
    for c in slurmctld slurmd sbatch srun squeue sinfo scontrol scancel munged; do
        command -v "$c" >/dev/null 2>&1 || [ -x "/usr/sbin/$c" ] || return 1
    done
}

do_install() {
    need_root
    have_slurm && return 0
    command -v apt-get >/dev/null 2>&1 || { echo "slurm-setup: slurm is not installed and there is no apt-get" >&2; exit 1; }
    echo "slurm-setup: apt-get install slurm-wlm munge" >&2
    export DEBIAN_FRONTEND=noninteractive
    { apt-get update -q && apt-get install -y -q slurm-wlm munge; } >"${TMPDIR:-/tmp}/ftmpi-slurm-apt.log" 2>&1 ||
        { tail -n 20 "${TMPDIR:-/tmp}/ftmpi-slurm-apt.log" >&2; echo "slurm-setup: apt-get failed" >&2; exit 1; }
    have_slurm || { echo "slurm-setup: slurm commands still missing after apt-get" >&2; exit 1; }
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

write_conf() {
    local mode=$1
    cat >"$CONF" <<EOF
# Private Slurm instance written by .ci/slurm-setup.sh ($mode). Testing only.
ClusterName=ftmpi${mode}
SlurmctldHost=localhost
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# private munge socket; cred_expire also sets the requeue delay (cred_expire + 1 s)
AuthInfo=socket=$DIR/munge/munge.socket,cred_expire=10
MpiDefault=pmix
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=1
ReturnToService=2
SlurmdParameters=config_overrides
JobRequeue=1
MinJobAge=600
KillWait=10
InactiveLimit=0
MailProg=/bin/true
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
# per-node tmp: two slurmstepd on one box would collide on the PMIx dirs otherwise
TmpFS=$DIR/tmp/%n
GresTypes=gpu
EOF
    # PMIx fences by ring. With Slurm 22.05's default (a tree for a fence without data)
    # such a fence holds only the ranks of one emulated node: measured, a PMIx_Fence on
    # fn2 returns at once while a rank of fn1 has not entered it. Open MPI 4's MPI_Init
    # ends with that fence, so fn2's ranks left MPI_Init and sent their first message
    # while rank 0 was still in the modex fence with no receive handler: SIGSEGV at
    # address 0 (the CI's intermittent crash, doc/slurm.md).
    cat >"$DIR/mpi.conf" <<EOF
PMIxCollFence=ring
EOF
    if [ "$mode" = two ]; then
        cat >>"$CONF" <<EOF
NodeName=fn1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((PORT + 1)) CPUs=64 Boards=1 SocketsPerBoard=1 CoresPerSocket=64 ThreadsPerCore=1 RealMemory=4000 Gres=gpu:8 State=UNKNOWN
NodeName=fn2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((PORT + 2)) CPUs=64 Boards=1 SocketsPerBoard=1 CoresPerSocket=64 ThreadsPerCore=1 RealMemory=4000 Gres=gpu:8 State=UNKNOWN
PartitionName=gpu Nodes=fn[1-2] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
        printf 'NodeName=fn[1-2] Name=gpu File=%s/dev/nvidia[0-7]\n' "$DIR" >"$DIR/gres.conf"
        NODES="fn1 fn2"
    else
        cat >>"$CONF" <<EOF
NodeName=localhost NodeAddr=127.0.0.1 Port=$((PORT + 1)) CPUs=16 Boards=1 SocketsPerBoard=1 CoresPerSocket=16 ThreadsPerCore=1 RealMemory=4000 Gres=gpu:8 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
        printf 'NodeName=localhost Name=gpu File=%s/dev/nvidia[0-7]\n' "$DIR" >"$DIR/gres.conf"
        NODES="localhost"
    fi
}

start_munge() {
    local m=$DIR/munge
    mkdir -p "$m"
    # a private key: the instance never talks to another munge
    if [ ! -f "$m/munge.key" ]; then
        dd if=/dev/urandom of="$m/munge.key" bs=1024 count=1 status=none || die "cannot write a munge key"
    fi
    local user=root
    if id munge >/dev/null 2>&1; then user=munge; fi
    chown -R "$user" "$m"
    chmod 755 "$m"; chmod 400 "$m/munge.key"   # munged: the socket dir must be searchable by all
    pid_alive "$m/munged.pid" && return 0
    local args=(--socket="$m/munge.socket" --key-file="$m/munge.key" --pid-file="$m/munged.pid"
                --log-file="$m/munged.log" --seed-file="$m/munged.seed")
    if [ "$user" = munge ] && command -v runuser >/dev/null 2>&1; then
        runuser -u munge -- munged "${args[@]}" || die "munged did not start (see $m/munged.log)"
    else
        munged --force "${args[@]}" || die "munged did not start (see $m/munged.log)"
    fi
    local i
    for i in $(seq 50); do [ -S "$m/munge.socket" ] && break; sleep 0.1; done
    munge -S "$m/munge.socket" -n | unmunge -S "$m/munge.socket" >/dev/null 2>&1 ||
        die "munge does not work on $m/munge.socket"
}

wait_idle() {
    local want=$1 i n
    for i in $(seq 60); do
        n=$(sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 == "idle"' | sort -u | wc -l)
        [ "$n" -ge "$want" ] && return 0
        sleep 1
    done
    sinfo -N -l >&2
    return 1
}

do_start() {
    local mode=${1:-single}
    case $mode in single | two) ;; *) echo "slurm-setup: mode is single or two, not '$mode'" >&2; exit 2 ;; esac
    need_root
    have_slurm || do_install
    if [ -f "$CONF" ] && pid_alive "$DIR/run/slurmctld.pid"; then
        if grep -q "^ClusterName=ftmpi${mode}\$" "$CONF"; then
            export SLURM_CONF=$CONF
            wait_idle "$( [ "$mode" = two ] && echo 2 || echo 1)" && { echo "slurm-setup: already running ($DIR)"; return 0; }
        fi
        do_stop
    fi
    # $DIR must be new, empty or a former instance: it is deleted on stop
    if [ -d "$DIR" ] && [ -n "$(ls -A "$DIR")" ]; then
        grep -q '^# Private Slurm instance written by .ci/slurm-setup.sh' "$CONF" 2>/dev/null ||
            { echo "slurm-setup: $DIR is not empty and not an instance of this script" >&2; exit 1; }
        clean_dir
    fi
    for p in "$PORT" $((PORT + 1)) $((PORT + 2)); do
        port_busy "$p" && die "port $p is in use: set FTMPI_SLURM_PORT to a free range"
    done
    mkdir -p "$DIR"/{state,spool,run,log,tmp,dev} || die "cannot create $DIR"
    chmod 755 "$DIR"
    write_conf "$mode"
    STARTING=1
    # fake GPUs: Slurm's gres plugin wants character devices; these are /dev/null's numbers
    for i in 0 1 2 3 4 5 6 7; do
        mknod "$DIR/dev/nvidia$i" c 1 3 2>/dev/null || die "mknod failed (a container without CAP_MKNOD?)"
    done
    for n in $NODES; do mkdir -p "$DIR/spool/$n" "$DIR/tmp/$n"; done
    cat >"$DIR/env.sh" <<EOF
export SLURM_CONF=$CONF
EOF
    export SLURM_CONF=$CONF
    start_munge
    slurmctld -c -f "$CONF" || die "slurmctld did not start"
    local i
    for i in $(seq 30); do scontrol ping >/dev/null 2>&1 && break; sleep 0.5; done
    scontrol ping 2>/dev/null | grep -q UP || die "slurmctld does not answer"
    for n in $NODES; do
        slurmd -f "$CONF" -N "$n" || die "slurmd $n did not start"
    done
    wait_idle "$(echo $NODES | wc -w)" || die "nodes did not become idle"
    STARTING=0
    echo "slurm-setup: $mode running in $DIR (slurmctld port $PORT); . $DIR/env.sh"
}

# delete what start made (only that: $DIR may be a directory the caller made)
clean_dir() {
    rm -rf "${DIR:?}"/{state,spool,run,log,tmp,dev,munge} "${DIR:?}"/{slurm.conf,gres.conf,mpi.conf,env.sh}
    rmdir "$DIR" 2>/dev/null
    return 0
}

do_stop() {
    grep -q '^# Private Slurm instance written by .ci/slurm-setup.sh' "$CONF" 2>/dev/null || return 0
    export SLURM_CONF=$CONF
    local jobs
    if pid_alive "$DIR/run/slurmctld.pid"; then
        jobs=$(squeue -h -o %i 2>/dev/null)
        [ -n "$jobs" ] && scancel $jobs 2>/dev/null
        for i in $(seq 20); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.5; done
        scontrol shutdown >/dev/null 2>&1
    fi
    local f i
    for f in "$DIR"/run/*.pid "$DIR/munge/munged.pid"; do
        [ -f "$f" ] || continue
        for i in $(seq 40); do pid_alive "$f" || break; [ $i -eq 10 ] && kill "$(cat "$f")" 2>/dev/null; sleep 0.25; done
        pid_alive "$f" && kill -9 "$(cat "$f")" 2>/dev/null
    done
    clean_dir
}

case ${1:-} in
install) do_install ;;
start) do_start "${2:-single}" ;;
stop) do_stop ;;
status) export SLURM_CONF=$CONF; sinfo -N -l; squeue ;;
*) sed -n '2,20p' "$0" >&2; exit 2 ;;
esac
