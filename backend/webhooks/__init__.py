"""Webhooks: signed JSON POSTs on job events, per user or admin-wide, each delivery recorded."""
