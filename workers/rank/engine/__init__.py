"""The training program that runs inside each rank (`python -m workers.rank.engine`)."""
