#!/usr/bin/python3
"""PyTorch's own DDP on Fashion-MNIST: the reference expctl is measured against.

Same model shapes (expctl's mlp [256, 128] and cnn [32, 64]: 5x5 same-padded conv, ReLU, 2x2
max-pool, linear head), same normalisation (0.2860/0.3530), same data order
(DistributedSampler with the spec's seed: expctl's sampler reproduces it index for index), same
SGD hyper-parameters, batch per rank, Gloo, one thread per rank. Throughput is computed exactly
like expctl's summary: per step, the sum over ranks of batch / step time; the median over the
steps after warm-up (the first min(10, steps / 10)).

Run with Debian's interpreter (the python3 first in PATH may lack torch):
  /usr/bin/python3 bench/torch_ddp.py --model mlp --steps 300 --world 2
Prints one JSON line from rank 0.
"""
import argparse
import gzip
import json
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data.distributed import DistributedSampler


def load(root, split):
    prefix = "train" if split == "train" else "t10k"
    with gzip.open(os.path.join(root, f"{prefix}-images-idx3-ubyte.gz"), "rb") as f:
        images = torch.frombuffer(bytearray(f.read()[16:]), dtype=torch.uint8)
    with gzip.open(os.path.join(root, f"{prefix}-labels-idx1-ubyte.gz"), "rb") as f:
        labels = torch.frombuffer(bytearray(f.read()[8:]), dtype=torch.uint8)
    x = images.view(-1, 1, 28, 28).float().div_(255.0).sub_(0.2860).div_(0.3530)
    return x, labels.long()


def make_model(kind):
    if kind == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                             nn.Linear(128, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 7 * 7, 10))


def worker(rank, args, port):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=args.world)
    x, y = load(args.root, "train")
    torch.manual_seed(args.seed)
    model = DistributedDataParallel(make_model(args.model))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    sampler = DistributedSampler(range(len(y)), num_replicas=args.world, rank=rank, shuffle=True, seed=args.seed)
    per_epoch = len(sampler) // args.batch if args.drop_last else -(-len(sampler) // args.batch)
    total = args.steps if args.epochs == 0 else args.epochs * per_epoch
    rates = []
    step = 0
    epoch = 0
    loss = torch.tensor(0.0)
    while step < total:
        sampler.set_epoch(epoch)
        indices = torch.tensor(list(iter(sampler)))
        for begin in range(0, len(indices), args.batch):
            if step >= total:
                break
            start = time.perf_counter()
            batch = indices[begin:begin + args.batch]
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x[batch]), y[batch])
            loss.backward()
            optimizer.step()
            rates.append(len(batch) / (time.perf_counter() - start))
            step += 1
        epoch += 1
    summed = torch.tensor(rates, dtype=torch.float64)
    dist.all_reduce(summed)
    result = {"samples_per_sec": None, "steps": total, "final_loss": loss.item()}
    warmup = min(10, total // 10)
    result["samples_per_sec"] = statistics.median(summed.tolist()[warmup:])
    if args.epochs:
        tx, ty = load(args.root, "test")
        model.eval()
        with torch.no_grad():
            shard = torch.arange(rank, len(ty), args.world)
            correct = torch.tensor([(model(tx[shard]).argmax(1) == ty[shard]).sum().item()], dtype=torch.float64)
        dist.all_reduce(correct)
        result["accuracy"] = correct.item() / len(ty)
    if rank == 0:
        print(json.dumps(result), flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--epochs", type=int, default=0, help="train this many epochs and report test accuracy")
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--drop-last", action="store_true")
    parser.add_argument("--root", default="/usr/share/datasets/fashion-mnist")
    args = parser.parse_args()
    mp.spawn(worker, args=(args, free_port()), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()
