"""Trainboard's control plane: REST API, scheduler, telemetry ingest and websocket hub."""
