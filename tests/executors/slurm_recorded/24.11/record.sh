#!/bin/sh
# How the files in this folder were recorded: run inside a Debian 13 (trixie) chroot whose
# Slurm is 24.11.5 (slurmctld, slurmd, slurmdbd, munge from Debian's archive), on a one-host
# cluster made as tests/slurm_cluster.py makes it (slurm.conf in README.md), with
# SLURM_CONF=/cluster/slurm.conf. Each command is the one Trainboard's driver runs
# (backend/executors/slurm/cli.py); outputs are written as the commands print them.
set -eu
OUT=${OUT:-/cluster/out}
mkdir -p "$OUT"
SQ='JobID:|,Name:|,State:|,Reason:|,NodeList:|,NumNodes:|,RestartCnt:|,Partition:|,tres-alloc:|,StartTime:|'
SA='JobIDRaw,JobName,State,ExitCode,Reason,ElapsedRaw,AllocTRES,NodeList,Partition'
squeue_epoch() { env SLURM_TIME_FORMAT=%s squeue --noheader --all --Format="$SQ"; }
squeue_local() { squeue --noheader --all --Format="$SQ"; }
nodes() { scontrol show node --oneliner; }
sub() { sbatch --parsable --no-requeue --output=/dev/null "$@"; }
wait_state() {  # job state...: until squeue/scontrol shows one of the states
  job=$1; shift
  for _ in $(seq 1 240); do
    s=$(scontrol show job --oneliner "$job" | sed 's/.*JobState=\([A-Z_]*\).*/\1/')
    for want in "$@"; do [ "$s" = "$want" ] && return 0; done
    sleep 1
  done
  echo "job $job never reached $*" >&2; return 1
}

# 1. the queue: a 2-CPU job running (the node is full), one pending for Resources, one held
run=$(sub --job-name=tb-dep1-1-1 --nodes=1 --ntasks-per-node=1 --cpus-per-task=2 --wrap='srun sleep 600')
wait_state "$run" RUNNING
pend=$(sub --job-name=tb-dep1-2-1 --nodes=1 --ntasks-per-node=1 --cpus-per-task=2 --wrap='sleep 5')
held=$(sub --hold --job-name='other team job' --cpus-per-task=1 --wrap='sleep 5')
sleep 4  # a scheduler pass gives the pending job its reason and expected start
squeue_epoch > "$OUT/squeue.txt"
squeue_local > "$OUT/squeue_local_time.txt"
nodes > "$OUT/scontrol_nodes_allocated.txt"
for j in "$run" "$pend" "$held"; do scontrol show job --oneliner "$j"; done > "$OUT/scontrol_jobs_queue.txt"
# an operator drains the node under its running job
scontrol update NodeName="$(hostname -s)" State=DRAIN Reason="bad fan [rec]"
sleep 1
nodes > "$OUT/scontrol_nodes_draining.txt"
scontrol update NodeName="$(hostname -s)" State=RESUME
scancel "$run" "$pend" "$held"
sleep 8

# 2. backfill plans a pending 2-CPU job on the node that a 1-CPU job holds: +PLANNED
one=$(sub --job-name=tb-dep1-3-1 --cpus-per-task=1 --time=5 --wrap='srun sleep 600')
wait_state "$one" RUNNING
two=$(sub --job-name=tb-dep1-4-1 --cpus-per-task=2 --wrap='sleep 5')
sleep 6  # bf_interval=2
nodes > "$OUT/scontrol_nodes_planned.txt"
squeue_epoch > "$OUT/squeue_planned.txt"
scancel "$one" "$two"
sleep 8

# 3. GPUs (GRES, typed a100 x2 + v100 x2): asked as --gres=gpu:2, --gpus-per-node=v100:1 by type
g1=$(sub --job-name=tb-dep1-5-1 --cpus-per-task=1 --gres=gpu:2 --wrap='srun sleep 600')
g2=$(sub --job-name=tb-dep1-6-1 --cpus-per-task=1 --gpus-per-node=v100:1 --wrap='srun sleep 600')
wait_state "$g1" RUNNING
wait_state "$g2" RUNNING
sleep 2
squeue_epoch > "$OUT/squeue_gpus.txt"
nodes > "$OUT/scontrol_nodes_gpus_typed.txt"
scontrol show job --oneliner "$g1" > "$OUT/scontrol_jobs_gpus.txt"
scontrol show job --oneliner "$g2" >> "$OUT/scontrol_jobs_gpus.txt"
scancel "$g1" "$g2"
sleep 8

# 4. how jobs end: COMPLETED, FAILED (exit 3), CANCELLED, TIMEOUT, requeued then COMPLETED
ok=$(sub --job-name=tb-dep1-7-1 --cpus-per-task=1 --wrap='srun sleep 2')
bad=$(sub --job-name=tb-dep1-8-1 --cpus-per-task=1 --wrap='exit 3')
wait_state "$ok" COMPLETED
wait_state "$bad" FAILED
can=$(sub --job-name=tb-dep1-9-1 --cpus-per-task=2 --wrap='srun sleep 600')
wait_state "$can" RUNNING
sleep 2
scancel "$can"
wait_state "$can" CANCELLED
late=$(sub --job-name=tb-dep1-10-1 --cpus-per-task=1 --time=0:10 --wrap='srun sleep 600')
req=$(sbatch --parsable --requeue --output=/dev/null --job-name=tb-dep1-11-1 --cpus-per-task=1 \
  --wrap='srun sleep 20')
wait_state "$req" RUNNING
sleep 3
scontrol requeue "$req"
sleep 2  # back in the queue, restart count 1, held until its BeginTime (2 minutes on)
squeue_epoch > "$OUT/squeue_requeued.txt"
wait_state "$late" TIMEOUT
wait_state "$req" COMPLETED
sleep 3
scontrol show job --oneliner "$ok" > "$OUT/scontrol_jobs_ended.txt"
for j in "$bad" "$can" "$late" "$req"; do scontrol show job --oneliner "$j" >> "$OUT/scontrol_jobs_ended.txt"; done
ids="$ok,$bad,$can,$late,$req,$g1,$g2"
sleep 5  # slurmdbd has the ends
sacct --parsable2 --noheader --allocations --duplicates --jobs="$ids" --format="$SA" > "$OUT/sacct.txt"
sacct --parsable2 --noheader --duplicates --jobs="$ids" --format="$SA" > "$OUT/sacct_with_steps.txt"

# 5. a node lost under a running job: slurmd killed (SlurmdTimeout=10): NODE_FAIL, DOWN*
lost=$(sub --job-name=tb-dep1-12-1 --cpus-per-task=1 --wrap='srun sleep 600')
wait_state "$lost" RUNNING
sleep 2
kill -KILL "$(cat "/cluster/slurmd-$(hostname -s).pid")"  # this cluster's slurmd only
wait_state "$lost" NODE_FAIL
sleep 2
nodes > "$OUT/scontrol_nodes_down.txt"
scontrol show job --oneliner "$lost" > "$OUT/scontrol_jobs_node_fail.txt"
sleep 5
sacct --parsable2 --noheader --allocations --duplicates --jobs="$lost" --format="$SA" > "$OUT/sacct_node_fail.txt"
echo recorded
