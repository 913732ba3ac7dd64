"""Trainboard auth domain."""
