"""Trainboard nodes domain."""
