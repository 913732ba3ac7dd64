"""Trainboard telemetry domain."""
