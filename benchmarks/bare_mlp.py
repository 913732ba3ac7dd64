"""The bare torchrun training loop the engine is measured against (`benchmarks.engine_ddp`,
`benchmarks.acceptance_overhead`): the template's mlp and data, AdamW, no Trainboard.

    torchrun [...] -m benchmarks.bare_mlp STEPS BATCH HIDDEN LAYERS FEATURES CLASSES COUNT SEED
        LR WEIGHT_DECAY

On cuda:LOCAL_RANK under NCCL where a GPU is visible, else on the CPU under gloo. Rank 0 prints
`training loop S s; cpu C s; final loss L` (wall and its own CPU seconds of the loop).
"""

from __future__ import annotations

import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn

from workers.rank.engine.templates.mlp import make_data, make_model  # not the engine's loop


def main(argv: list[str]) -> None:
    steps, batch, hidden, layers, features, classes, count, seed = map(int, argv[:8])
    lr, weight_decay = map(float, argv[8:10])
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo")
    torch.manual_seed(seed)
    model: nn.Module = make_model(features, hidden, layers, classes).to(device)
    if dist.get_world_size() > 1:  # as the engine: DDP only with replicas to sync
        model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    inputs, targets = make_data(seed=seed, size=count, features=features, classes=classes)
    inputs, targets = inputs.to(device), targets.to(device)
    loss_fn = nn.CrossEntropyLoss()

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    sync()
    began, began_cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        index = torch.randint(0, count, (batch,), device=device)
        loss = loss_fn(model(inputs[index]), targets[index])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    sync()
    seconds, cpu = time.perf_counter() - began, time.process_time() - began_cpu
    if dist.get_rank() == 0:
        print(f"training loop {seconds:.4f} s; cpu {cpu:.4f} s; final loss {loss.item():.4f}")
    dist.destroy_process_group()
    # as the engine leaves (workers/rank/engine/__main__.py `_exit`): gloo's teardown in the
    # destructors aborted a rank now and then ("terminate called without an active exception")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
