"""Export: telemetry for outside scrapers (Prometheus)."""
