#!/usr/bin/python3
"""Writes tests/data/train/sampler_fixture.json: the indices PyTorch's own DistributedSampler
yields for a set of (size, world, rank, seed, epoch, shuffle, drop_last) combinations.

Run once with Debian's python3-torch (the same LibTorch 1.13 as the C++ build) and commit the
output; expctl's sampler test compares against it. Lists longer than LONG are stored as head,
tail, length and a position-weighted sum to keep the file small.

    /usr/bin/python3 tools/make_sampler_fixture.py
"""
import json
import pathlib

import torch
from torch.utils.data.distributed import DistributedSampler

LONG = 2000
OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "train" / "sampler_fixture.json"

# (size, world, seed, epoch, shuffle, drop_last); every rank of each world is written.
COMBOS = [
    (10, 1, 0, 0, True, False),
    (10, 2, 0, 0, True, False),
    (10, 3, 0, 0, True, False),   # padding: 10 -> 12
    (10, 3, 0, 0, True, True),    # drop_last: 10 -> 9
    (10, 3, 0, 0, False, False),  # no shuffle, padding from the front
    (10, 3, 0, 0, False, True),
    (7, 4, 1, 2, True, False),
    (3, 8, 5, 0, True, False),    # padding larger than the dataset: the list repeats
    (3, 8, 5, 0, False, False),
    (17, 4, 42, 1, True, True),
    (100, 2, 1234, 7, True, False),
    (1000, 3, 7, 0, True, False),
    (1000, 3, 7, 1, True, False),  # a new epoch reshuffles
    (60000, 2, 0, 0, True, False),  # Fashion-MNIST's training set
    (60000, 2, 42, 3, True, False),
    (10000, 4, 0, 0, False, True),
]


def record(size, world, rank, seed, epoch, shuffle, drop_last):
    dataset = list(range(size))
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=shuffle, seed=seed,
                                 drop_last=drop_last)
    sampler.set_epoch(epoch)
    indices = list(iter(sampler))
    assert len(indices) == len(sampler)
    case = dict(size=size, world=world, rank=rank, seed=seed, epoch=epoch, shuffle=shuffle,
                drop_last=drop_last, length=len(indices))
    if len(indices) <= LONG:
        case["indices"] = indices
    else:
        case["head"] = indices[:50]
        case["tail"] = indices[-50:]
        case["weighted_sum"] = sum((i + 1) * v for i, v in enumerate(indices))
    return case


def main():
    cases = [record(size, world, rank, seed, epoch, shuffle, drop_last)
             for size, world, seed, epoch, shuffle, drop_last in COMBOS
             for rank in range(world)]
    fixture = dict(generator="tools/make_sampler_fixture.py", torch_version=torch.__version__, cases=cases)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(fixture, separators=(",", ":")) + "\n")
    print(f"{OUT}: {len(cases)} cases")


if __name__ == "__main__":
    main()
