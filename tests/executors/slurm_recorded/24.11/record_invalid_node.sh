#!/bin/sh
# The node registering with less than slurm.conf says (INVAL): recorded after record.sh on the
# same cluster. slurm.conf is given CPUs=4 for a 2-CPU machine, slurmctld re-reads it and
# slurmd is restarted so that it registers again; then the file is put back.
set -eu
OUT=${OUT:-/cluster/out}
node=$(hostname -s)
cp /cluster/slurm.conf /cluster/slurm.conf.orig
sed -i "s/^NodeName=$node CPUs=2 /NodeName=$node CPUs=4 /" /cluster/slurm.conf
kill -TERM "$(cat "/cluster/slurmd-$node.pid")" 2>/dev/null || true  # this cluster's slurmd (record.sh left it dead)
sleep 2
scontrol reconfigure
setsid slurmd -D -f /cluster/slurm.conf >> /cluster/log/slurmd.out 2>&1 &
sleep 8
scontrol show node --oneliner > "$OUT/scontrol_nodes_invalid.txt"
cp /cluster/slurm.conf.orig /cluster/slurm.conf
kill -TERM "$(cat "/cluster/slurmd-$node.pid")"
sleep 2
scontrol reconfigure
setsid slurmd -D -f /cluster/slurm.conf >> /cluster/log/slurmd.out 2>&1 &
echo recorded
