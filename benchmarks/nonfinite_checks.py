"""What a complete NaN/Inf check of every gradient (or weight) costs on CPU, against the norm.

    python -m benchmarks.nonfinite_checks [--width 256 --batch 64 --rounds 15]

The engine's gradient-norm pass (`optim.total_norm`) reads every gradient once; it was 2% of
the benchmark mlp's CPU step. A per-step NaN check would have to read every gradient too:
this times the candidates on the same gradients (the template mlp, 4 blocks, after one
backward), in alternating rounds (each candidate in turn, `--rounds` times), one thread, CPU
µs a call (`time.process_time`), with the load average at start and end. The weights'
check (`optim.finite_probe`) is timed on the weights.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import torch

from workers.rank.engine.optim import finite_probe, total_norm
from workers.rank.engine.templates.mlp import make_model


def candidates(tensors: list[torch.Tensor]) -> dict[str, Callable[[], object]]:
    """Each complete check of `tensors` (a 0-d result whose finiteness answers), by name."""
    found, one = torch.zeros(()), torch.ones(())

    def amp_check() -> torch.Tensor:  # also multiplies every element by 1 (writes them)
        torch._amp_foreach_non_finite_check_and_unscale_(tensors, found, one)
        return found

    return {
        "total_norm (the engine's norm pass)": lambda: total_norm(tensors, mixed=False),
        "finite_probe (a sum per tensor, summed)": lambda: finite_probe(tensors, mixed=False),
        "_amp_foreach_non_finite_check_and_unscale_": amp_check,
        "_foreach_norm ord 1, summed": lambda: torch.stack(torch._foreach_norm(tensors, 1.0)).sum(),
        "isfinite(t).all() per tensor": lambda: torch.stack(
            [torch.isfinite(t).all() for t in tensors]
        ).all(),
        "dot(t, t) per tensor, summed": lambda: torch.stack(
            [torch.dot(t.view(-1), t.view(-1)) for t in tensors]
        ).sum(),
    }


def timed(
    checks: dict[str, Callable[[], object]], *, rounds: int, calls: int
) -> dict[str, list[float]]:
    """CPU µs a call of each check, one list entry per round; rounds alternate the checks."""
    out: dict[str, list[float]] = {name: [] for name in checks}
    for _ in range(rounds):
        for name, check in checks.items():
            for _ in range(calls // 10):  # warm
                check()
            began = time.process_time()
            for _ in range(calls):
                check()
            out[name].append((time.process_time() - began) / calls * 1e6)
    return out


def main() -> None:
    """Print one markdown table: each check's median CPU µs a call and its ratio to the norm."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = make_model(32, args.width, 4, 10)  # the template's features and classes
    inputs, targets = torch.randn(args.batch, 32), torch.randint(0, 10, (args.batch,))
    torch.nn.functional.cross_entropy(model(inputs), targets).backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    weights = [p.detach() for p in model.parameters()]
    load = os.getloadavg()
    on_grads = timed(candidates(grads), rounds=args.rounds, calls=args.calls)
    on_weights = timed(
        {"finite_probe on the weights": lambda: finite_probe(weights, mixed=False)},
        rounds=args.rounds,
        calls=args.calls,
    )
    norm = statistics.median(on_grads["total_norm (the engine's norm pass)"])
    count = sum(g.numel() for g in grads)
    print(
        f"| {len(grads)} gradients, {count:,} elements | CPU µs a call, median (min – max) "
        "| / norm |"
    )
    print("|---|---|---|")
    for name, values in {**on_grads, **on_weights}.items():
        median = statistics.median(values)
        print(
            f"| {name} | {median:.1f} ({min(values):.1f} – {max(values):.1f}) "
            f"| {median / norm:.2f} |"
        )
    loads = ", ".join(f"{a:.1f} → {b:.1f}" for a, b in zip(load, os.getloadavg(), strict=True))
    print(f"\nload average (1, 5, 15 min) start → end: {loads}")


if __name__ == "__main__":
    main()
