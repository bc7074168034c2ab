#!/usr/bin/python3
"""PyTorch's own DDP training a TorchScript model on .npy arrays or on a token stream: the reference
bench/transformers.sh holds expctl to (issue 51). What expctl's trainer does per step, in Python:
the batch gathered from the arrays (a token stream: windows k of T + 1 tokens, inputs
tokens[k*T : k*T+T], targets shifted by one, widened to int64), zero_grad, forward and
cross-entropy (under torch.autocast("cpu", torch.bfloat16) with --amp bf16, as expctl's
train.amp), backward through DDP (Gloo, default buckets), SGD with momentum. Data order: PyTorch's
DistributedSampler with the seed (expctl's sampler reproduces it). One thread per rank.

    torch_scripted_ddp.py --model M.pt (--inputs X.npy --targets Y.npy | --stream S.npy --block T)
                          --world 2 --batch 32 --steps 60 --seed 1 --lr 0.01 --momentum 0.9 [--amp bf16]

Prints a JSON list of rank 0's step times in seconds, timed like expctl's step_time_ms: from before
the batch is gathered to after optimizer.step(), every step.
"""
import argparse
import json
import os
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DistributedSampler


def rank_main(rank, args, port, results):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=args.world)
    model = torch.jit.load(args.model)
    model.train()
    ddp = DDP(model)
    if args.stream:
        tokens = torch.from_numpy(np.load(args.stream).view(np.int16))  # uint16 ids as int16
        count = (tokens.size(0) - 1) // args.block
        offsets = torch.arange(args.block + 1)

        def batch(index):
            w = tokens.index_select(0, ((index * args.block).unsqueeze(1) + offsets).reshape(-1))
            w = w.to(torch.int64).bitwise_and_(0xFFFF).view(-1, args.block + 1)
            return w[:, :-1], w[:, 1:]
    else:
        inputs = torch.from_numpy(np.load(args.inputs))
        targets = torch.from_numpy(np.load(args.targets))
        count = inputs.size(0)

        def batch(index):
            return inputs.index_select(0, index), targets.index_select(0, index)

    sampler = DistributedSampler(range(count), num_replicas=args.world, rank=rank, shuffle=True, seed=args.seed)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=args.momentum)
    amp = args.amp == "bf16"
    times = []
    epoch = 0
    while len(times) < args.steps:
        sampler.set_epoch(epoch)
        order = torch.tensor(list(iter(sampler)))
        for begin in range(0, len(order) - args.batch + 1, args.batch):
            start = time.perf_counter()
            x, y = batch(order[begin:begin + args.batch])
            optimizer.zero_grad()
            with torch.autocast("cpu", torch.bfloat16, enabled=amp):
                out = ddp(x)
                loss = F.cross_entropy(out.reshape(-1, out.size(-1)), y.reshape(-1))
            loss.item()
            loss.backward()
            optimizer.step()
            times.append(time.perf_counter() - start)
            if len(times) == args.steps:
                break
        epoch += 1
    if rank == 0:
        results[0] = times
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--inputs")
    parser.add_argument("--targets")
    parser.add_argument("--stream")
    parser.add_argument("--block", type=int, default=0)
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--amp", choices=["none", "bf16"], default="none")
    args = parser.parse_args()
    with mp.Manager() as manager:
        results = manager.dict()
        mp.start_processes(rank_main, args=(args, free_port(), results), nprocs=args.world, start_method="fork")
        print(json.dumps(results[0]))


if __name__ == "__main__":
    sys.exit(main())
