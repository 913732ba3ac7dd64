"""Trainboard's data plane: node agent, attempt supervisor, training engine and SDK."""
