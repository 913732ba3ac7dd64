"""Sweeps: a search over settings run as trial jobs, with early stopping."""
