"""The Slurm executor's parts: its command-line driver and its state mapping."""
