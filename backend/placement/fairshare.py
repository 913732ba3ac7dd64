"""Slurm-style fair share as a pure function: factor 2^(-usage/share), both normalised."""

from __future__ import annotations

from collections.abc import Mapping


def fair_share_factors(
    *, usage: Mapping[int, float], shares: Mapping[int, float]
) -> dict[int, float]:
    """Each user's factor in (0, 1]: 1 for no recent usage, halved per share's worth used.

    `usage` is decayed device-seconds per user, `shares` the admin's weights (default 1);
    both are normalised over the users named in either, as Slurm normalises over its
    associations.
    """
    users = set(usage) | set(shares)
    total_usage = sum(max(0.0, usage.get(u, 0.0)) for u in users)
    total_shares = sum(shares.get(u, 1.0) for u in users)
    factors = {}
    for user in users:
        share = shares.get(user, 1.0) / total_shares if total_shares > 0 else 0.0
        used = max(0.0, usage.get(user, 0.0)) / total_usage if total_usage > 0 else 0.0
        factors[user] = 2 ** (-used / share) if share > 0 else 0.0
    return factors
