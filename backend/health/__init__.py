"""Run health the API watches: stragglers (hangs are the supervisor's, see workers/supervisor)."""
