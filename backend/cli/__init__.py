"""Trainboard cli domain."""
