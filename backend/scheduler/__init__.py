"""Trainboard scheduler domain."""
