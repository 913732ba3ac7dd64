"""Who used which devices: attempt accounting, decayed usage, shares and quotas."""
