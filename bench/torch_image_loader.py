#!/usr/bin/python3
"""PyTorch's side of bench/image_pipeline.sh: ImageFolder + DataLoader(num_workers=N) with the
transforms expctl applies (Resize + CenterCrop, [RandomCrop(padding=4) + RandomHorizontalFlip],
ToTensor, Normalize), one rank's half of a seeded permutation per epoch, one thread of torch.
Prints one JSON line like expctl_image_loader_bench: images/s after the first epoch, and overall.
  torch_image_loader.py DIR SIZE WORKERS BATCH EPOCHS AUGMENT(0|1) RANKS RANK"""
import json
import sys
import time

import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

folder, size, workers, batch, epochs, augment, ranks, rank = sys.argv[1], *map(int, sys.argv[2:9])
torch.set_num_threads(1)
steps = [transforms.Resize(size), transforms.CenterCrop(size)]
if augment:
    steps += [transforms.RandomCrop(size, padding=4), transforms.RandomHorizontalFlip()]
steps += [transforms.ToTensor(), transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]
dataset = datasets.ImageFolder(folder, transform=transforms.Compose(steps))


class Shard(torch.utils.data.Sampler):
    """This rank's half of a seeded permutation, new each epoch (DistributedSampler's contract)."""

    def __init__(self):
        self.epoch = 0

    def __iter__(self):
        order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(self.epoch)).tolist()
        return iter(order[rank::ranks])

    def __len__(self):
        return len(range(rank, len(dataset), ranks))


sampler = Shard()
# Persistent workers with 4 batches of prefetch each: PyTorch at its best, not re-forked per epoch.
loader = DataLoader(dataset, batch_size=batch, sampler=sampler, num_workers=workers, drop_last=True,
                    persistent_workers=workers > 0, prefetch_factor=4 if workers else 2)
images = images_after_first = 0
checksum = 0.0
start = time.perf_counter()
after_first = start
for epoch in range(epochs):
    sampler.epoch = epoch
    for inputs, targets in loader:
        checksum += float(inputs[0, 0, 0, 0]) + int(targets[0])
        images += inputs.shape[0]
        if epoch > 0:
            images_after_first += inputs.shape[0]
    if epoch == 0:
        after_first = time.perf_counter()
end = time.perf_counter()
print(json.dumps({"images_per_s": images_after_first / (end - after_first) if epochs > 1 else images / (end - start),
                  "images_per_s_all_epochs": images / (end - start), "images": images, "checksum": checksum}))
