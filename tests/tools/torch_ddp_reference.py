#!/usr/bin/python3
"""PyTorch's own DDP on a TorchScript model and .npy arrays: the reference expctl's DDP is held to
(tests/cli/test_cli_models.cpp). Same initial weights (the file), same data order (DistributedSampler
with the seed), same hyper-parameters (SGD with momentum), Gloo on CPU, one process per rank.
Prints a JSON list per rank of its per-step training losses.

    torch_ddp_reference.py --model M.pt --inputs X.npy --targets Y.npy --world 2 --batch 16 --steps 20
                           --seed 3 --lr 0.05 --momentum 0.9 --store PATH [--timing]

--timing prints, per rank, the wall time of every step in seconds instead (bench/byo_models.sh
takes the same statistic over them as over expctl's stored step times).
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def rank_main(rank, args, results):
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    dist.init_process_group("gloo", init_method="file://" + args.store, rank=rank, world_size=args.world)
    model = torch.jit.load(args.model)
    model.train()
    ddp = DDP(model)
    inputs = torch.from_numpy(np.load(args.inputs))
    targets = torch.from_numpy(np.load(args.targets))
    data = TensorDataset(inputs, targets)
    sampler = DistributedSampler(data, num_replicas=args.world, rank=rank, shuffle=True, seed=args.seed)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=args.momentum)
    losses = []
    times = []
    step = 0
    epoch = 0
    while step < args.steps:
        sampler.set_epoch(epoch)
        for x, y in DataLoader(data, batch_size=args.batch, sampler=sampler):
            start = time.perf_counter()
            optimizer.zero_grad()
            loss = F.cross_entropy(ddp(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            times.append(time.perf_counter() - start)
            step += 1
            if step == args.steps:
                break
        epoch += 1
    results[rank] = {"losses": losses, "times": times}
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    for name in ("model", "inputs", "targets", "store"):
        parser.add_argument("--" + name, required=True)
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--timing", action="store_true")
    args = parser.parse_args()
    if os.path.exists(args.store):
        os.remove(args.store)
    with mp.Manager() as manager:
        results = manager.dict()
        mp.start_processes(rank_main, args=(args, results), nprocs=args.world, start_method="fork")
        ordered = [results[rank] for rank in range(args.world)]
    if args.timing:
        print(json.dumps([r["times"] for r in ordered]))
    else:
        print(json.dumps([r["losses"] for r in ordered]))


if __name__ == "__main__":
    sys.exit(main())
