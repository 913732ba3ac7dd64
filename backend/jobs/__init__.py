"""Trainboard jobs domain."""
