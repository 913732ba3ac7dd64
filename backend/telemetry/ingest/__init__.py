"""Ingest: telemetry streams → validated rounds → the database, then the live stream."""
