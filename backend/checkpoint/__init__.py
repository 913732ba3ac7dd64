"""A job's checkpoints as users see them: listed, downloaded as one state dict, cloned from."""
