"""The run table: jobs as rows of settings and metric summaries (issue #18)."""
