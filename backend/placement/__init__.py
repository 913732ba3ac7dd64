"""Placement policy, pure: queue and capacity in, placements, preemptions and reasons out.

Nothing here does I/O (no database, Redis or clock): the scheduler loop gathers the
inputs, an executor (backend.executors) applies the result. tests/backend/test_domain_imports.py
holds that this package imports nothing outside itself but the standard library.
"""
