"""The canonical PyTorch DDP training script, as the guides write it: init_process_group from the
environment, DistributedSampler + set_epoch, a DistributedDataParallel model, launched by torchrun.
An MLP on Fashion-MNIST (Debian's dataset-fashion-mnist), Gloo on CPU, seeded and deterministic.

    torchrun --nproc_per_node 2 train.py            # as it is
    expctl run experiments/python-ddp/ddp.yaml       # the same script, supervised and recorded

`import expctl` is the only addition: its calls do nothing outside `expctl run`.
"""

import argparse
import gzip
import os
import signal

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

try:
    import expctl
except ImportError:  # run without expctl on the path
    expctl = None

MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST's training pixels


def load(root, split, samples):
    prefix = "train" if split == "train" else "t10k"
    with gzip.open(os.path.join(root, prefix + "-images-idx3-ubyte.gz")) as file:
        file.read(16)
        images = np.frombuffer(file.read(samples * 784), dtype=np.uint8).reshape(-1, 784)
    with gzip.open(os.path.join(root, prefix + "-labels-idx1-ubyte.gz")) as file:
        file.read(8)
        labels = np.frombuffer(file.read(samples), dtype=np.uint8)
    x = (torch.from_numpy(images.astype(np.float32)) / 255.0 - MEAN) / STD
    return TensorDataset(x, torch.from_numpy(labels.astype(np.int64)))


def save_checkpoint(path, model, optimizer, epoch, step):
    tmp = path + ".tmp"
    torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch,
                "step": step}, tmp)
    os.replace(tmp, path)  # a rank killed while saving leaves the previous checkpoint intact


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--samples", type=int, default=2048, help="training samples used (of 60000)")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--checkpoint-dir", default=os.environ.get("EXPCTL_CHECKPOINT_DIR", "checkpoints"))
    parser.add_argument("--kill-rank1-at-step", type=int, default=0,
                        help="fault injection for tests: rank 1 kills itself (SIGKILL) at this step, first attempt only")
    args = parser.parse_args()

    dist.init_process_group("gloo")  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from torchrun (or expctl)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)

    train = load(args.data, "train", args.samples)
    test = load(args.data, "test", 1000)
    sampler = DistributedSampler(train, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(784, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 10)))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    start_epoch, step = 0, 0
    checkpoint = os.path.join(args.checkpoint_dir, "checkpoint.pt")
    resuming = expctl is not None and expctl.resuming()
    if resuming and os.path.exists(checkpoint):
        state = torch.load(checkpoint)
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch, step = state["epoch"] + 1, state["step"]
        print("rank %d: resumed after epoch %d (step %d)" % (rank, state["epoch"], step), flush=True)

    for epoch in range(start_epoch, args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        for x, y in loader:
            step += 1
            if rank == 1 and step == args.kill_rank1_at_step and not resuming:
                os.kill(os.getpid(), signal.SIGKILL)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            if expctl:
                expctl.log(step, loss=loss.item(), samples=len(x), lr=args.lr, epoch=epoch)
        if rank == 0:
            os.makedirs(args.checkpoint_dir, exist_ok=True)
            save_checkpoint(checkpoint, model, optimizer, epoch, step)
        dist.barrier()

    model.eval()
    with torch.no_grad():
        x, y = test.tensors
        logits = model.module(x)
        eval_loss = F.cross_entropy(logits, y).item()
        accuracy = (logits.argmax(1) == y).float().mean().item()
    if rank == 0:
        print("final step %d: eval loss %.4f, accuracy %.4f" % (step, eval_loss, accuracy), flush=True)
        if expctl:
            expctl.log(step, eval_loss=eval_loss, eval_accuracy=accuracy)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
