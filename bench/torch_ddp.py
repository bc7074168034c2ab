#!/usr/bin/python3
"""PyTorch's own DDP on Fashion-MNIST: the reference expctl is measured against.

Same model shapes (expctl's mlp [256, 128] and cnn [32, 64]: 5x5 same-padded conv, ReLU, 2x2
max-pool, linear head), same normalisation (0.2860/0.3530), same data order
(DistributedSampler with the spec's seed: expctl's sampler reproduces it index for index), same
SGD hyper-parameters, batch per rank, Gloo, one thread per rank. Throughput is computed exactly
like expctl's summary: per step, the sum over ranks of batch / step time; the median over the
steps after warm-up (the first min(10, steps / 10)).

Gradient options, as expctl's spec spells them: --fp16 (PyTorch's fp16_compress_hook:
distributed.grad_compression=fp16), --accum K (K micro-batches per optimizer step, no_sync on the
first K-1, loss / K: train.grad_accum_steps=K), --powersgd-rank R with --powersgd-warmup W
(powerSGD_hook with PowerSGDState(matrix_approximation_rank=R, start_powerSGD_iter=W):
distributed.grad_compression=powersgd, powersgd_rank, powersgd_warmup_steps). --fp16 combines
with --accum; PowerSGD replaces the fp16 hook. --eval reports the test accuracy after the steps.

Run with Debian's interpreter (the python3 first in PATH may lack torch):
  /usr/bin/python3 bench/torch_ddp.py --model mlp --steps 300 --world 2
One rank of a job spread over hosts (no spawning; --world ranks in all):
  /usr/bin/python3 bench/torch_ddp.py --world 2 --rank 1 --master-addr 10.0.0.1 --master-port 29500
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
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD
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


def register_hook(model, args):
    if args.powersgd_rank > 0:
        state = powerSGD.PowerSGDState(process_group=None, matrix_approximation_rank=args.powersgd_rank,
                                       start_powerSGD_iter=args.powersgd_warmup)
        model.register_comm_hook(state, powerSGD.powerSGD_hook)
    elif args.fp16:
        model.register_comm_hook(None, default_hooks.fp16_compress_hook)


def train_step(model, optimizer, x, y, batch, accum, size):
    """One optimizer step over the micro-batches of `size` rows in `batch` (`accum` of them, the
    last one shorter at the end of an epoch without --drop-last); each loss is divided by `accum`,
    as expctl's trainer does. Returns the summed scaled loss."""
    optimizer.zero_grad()
    micro = [batch[i:i + size] for i in range(0, len(batch), size)]
    total = 0.0
    for i, rows in enumerate(micro):
        if i + 1 < len(micro):
            with model.no_sync():
                loss = F.cross_entropy(model(x[rows]), y[rows]) / accum
                loss.backward()
        else:
            loss = F.cross_entropy(model(x[rows]), y[rows]) / accum
            loss.backward()
        total += loss.item()
    optimizer.step()
    return total


def worker(rank, args, port):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = args.master_addr
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=args.world)
    x, y = load(args.root, "train")
    torch.manual_seed(args.seed)
    model = DistributedDataParallel(make_model(args.model))
    register_hook(model, args)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    sampler = DistributedSampler(range(len(y)), num_replicas=args.world, rank=rank, shuffle=True, seed=args.seed)
    step_batch = args.batch * args.accum  # per rank and optimizer step
    # expctl's steps_per_epoch: the epoch's micro-batches (a short last one without --drop-last),
    # grouped into whole optimizer steps; micro-batches that fill no whole step are left out.
    micro_batches = len(sampler) // args.batch if args.drop_last else -(-len(sampler) // args.batch)
    per_epoch = micro_batches // args.accum
    total = args.steps if args.epochs == 0 else args.epochs * per_epoch
    rates = []
    step = 0
    epoch = 0
    loss = 0.0
    while step < total:
        sampler.set_epoch(epoch)
        indices = torch.tensor(list(iter(sampler)))
        for begin in range(0, per_epoch * step_batch, step_batch):
            if step >= total:
                break
            start = time.perf_counter()
            batch = indices[begin:begin + step_batch]
            loss = train_step(model, optimizer, x, y, batch, args.accum, args.batch)
            rates.append(len(batch) / (time.perf_counter() - start))
            step += 1
        epoch += 1
    summed = torch.tensor(rates, dtype=torch.float64)
    dist.all_reduce(summed)
    result = {"samples_per_sec": None, "steps": total, "final_loss": loss}
    warmup = min(10, total // 10)
    result["samples_per_sec"] = statistics.median(summed.tolist()[warmup:])
    if args.epochs or args.eval:
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
    parser.add_argument("--eval", action="store_true", help="report the test accuracy after the steps")
    parser.add_argument("--fp16", action="store_true", help="fp16_compress_hook on the gradient buckets")
    parser.add_argument("--accum", type=int, default=1, help="micro-batches of --batch per optimizer step")
    parser.add_argument("--powersgd-rank", type=int, default=0, help="powerSGD_hook of this rank (0: off)")
    parser.add_argument("--powersgd-warmup", type=int, default=10, help="its start_powerSGD_iter")
    parser.add_argument("--rank", type=int, default=-1, help="run only this rank (of --world), for several hosts")
    parser.add_argument("--master-addr", default="127.0.0.1")
    parser.add_argument("--master-port", type=int, default=0, help="0: a free port (single host only)")
    args = parser.parse_args()
    port = args.master_port or free_port()
    if args.rank >= 0:
        worker(args.rank, args, port)
    else:
        mp.spawn(worker, args=(args, port), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()
