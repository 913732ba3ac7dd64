"""Executors: how an attempt runs (the node pool of `trainboard worker`s, Slurm)."""
