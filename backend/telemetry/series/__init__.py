"""Series: reading stored telemetry back as curves, rollups, comparisons and CSV."""

from backend.telemetry.series.reads import metric_names, recent_logs, series

__all__ = ["metric_names", "recent_logs", "series"]
