#!/usr/bin/python3
"""Test material for "bring your own model and data" (docs/models.md), made from what Debian installs:
scripted models (python3-torch, python3-torchvision) and Fashion-MNIST (dataset-fashion-mnist) as .npy.

    byo_fixtures.py OUT_DIR
    byo_fixtures.py --bench OUT_DIR    (what bench/byo_models.sh needs: see bench())

writes, into OUT_DIR (created; existing files are replaced):
  cnn.pt          a scripted Fashion-MNIST CNN without BatchNorm or dropout (the DDP equivalences)
  cnn_dropout.pt  the same with dropout (rank-dependent randomness)
  bn_cnn.pt       a scripted CNN with BatchNorm (buffers follow rank 0)
  lossy.pt        a scripted model whose forward(x, y) returns its own loss
  regressor.pt    a scripted MLP for a regression (8 features -> 1 value)
  shufflenet.pt   torchvision's shufflenet_v2_x0_5(num_classes=10), scripted, random init
  traced.pt       a *traced* model with dropout (refused: its mode is baked in)
  frozen.pt       torch.jit.freeze of cnn (refused: no parameters)
  pickle.pt       torch.save(model) (refused: not TorchScript)
  newer.pt        cnn.pt with a format version of 11 (refused: written by a newer PyTorch)
  newer_op.pt     cnn.pt calling aten::scaled_dot_product_attention (refused: unknown operator)
  fmnist-train-y-bad.npy, -x-fortran.npy, -x-i16.npy   bad arrays: a class beyond the outputs,
                  Fortran order, an unsupported dtype
  fmnist-{train,eval}-{x,y}.npy   Fashion-MNIST, float32 [N,1,28,28] normalised, int64 labels
  fmnist-train-u8.npy             the training images as uint8 [N,1,28,28]
  rgb32-{train,eval}-{x,y}.npy    Fashion-MNIST resized to 32x32 and repeated to 3 channels (CIFAR-like)
  reg-{train,eval}-{x,y}.npy      a linear regression with noise, float32
Deterministic: the same files (bit for bit) on every call with the same torch and numpy.
"""
import gzip
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

FMNIST = "/usr/share/datasets/fashion-mnist"
N_TRAIN = int(os.environ.get("BYO_TRAIN", "2048"))
N_EVAL = int(os.environ.get("BYO_EVAL", "512"))


def idx(name, offset):
    with gzip.open(os.path.join(FMNIST, name), "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


class Cnn(nn.Module):
    def __init__(self, dropout: float = 0.0):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 5, padding=2)
        self.conv2 = nn.Conv2d(8, 16, 5, padding=2)
        self.fc = nn.Linear(16 * 7 * 7, 10)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(self.dropout(torch.flatten(x, 1)))


class BnCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 14 * 14, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return self.fc(torch.flatten(x, 1))


class Lossy(nn.Module):
    """Computes its own loss: label smoothing, which expctl's built-in losses do not have."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x, y):
        return F.cross_entropy(self.body(x), y, label_smoothing=0.1)


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, x):
        return self.body(x)


def save_npy(out, name, array):
    np.save(os.path.join(out, name), np.ascontiguousarray(array))


def main(out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    images = idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28)
    labels = idx("train-labels-idx1-ubyte.gz", 8).astype(np.int64)
    test_images = idx("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28)
    test_labels = idx("t10k-labels-idx1-ubyte.gz", 8).astype(np.int64)
    norm = lambda u8: ((u8.astype(np.float32) / 255.0) - np.float32(0.2860)) / np.float32(0.3530)
    save_npy(out, "fmnist-train-x.npy", norm(images[:N_TRAIN]))
    save_npy(out, "fmnist-train-y.npy", labels[:N_TRAIN])
    save_npy(out, "fmnist-eval-x.npy", norm(test_images[:N_EVAL]))
    save_npy(out, "fmnist-eval-y.npy", test_labels[:N_EVAL])
    save_npy(out, "fmnist-train-u8.npy", images[:N_TRAIN])
    bad = labels[:N_TRAIN].copy()
    bad[7] = 11
    save_npy(out, "fmnist-train-y-bad.npy", bad)
    np.save(os.path.join(out, "fmnist-train-x-fortran.npy"), np.asfortranarray(norm(images[:N_TRAIN]).reshape(N_TRAIN, 784)))
    save_npy(out, "fmnist-train-x-i16.npy", images[:N_TRAIN].astype(np.int16))
    for split, x, y in (("train", images[:N_TRAIN], labels[:N_TRAIN]), ("eval", test_images[:N_EVAL], test_labels[:N_EVAL])):
        t = torch.from_numpy(norm(x))
        rgb = F.interpolate(t, size=(32, 32), mode="bilinear", align_corners=False).repeat(1, 3, 1, 1)
        save_npy(out, f"rgb32-{split}-x.npy", rgb.numpy())
        save_npy(out, f"rgb32-{split}-y.npy", y)
    rng = np.random.default_rng(0)
    w = rng.standard_normal(8).astype(np.float32)
    for split, n in (("train", 1024), ("eval", 256)):
        x = rng.standard_normal((n, 8)).astype(np.float32)
        save_npy(out, f"reg-{split}-x.npy", x)
        save_npy(out, f"reg-{split}-y.npy", (x @ w + 0.1 * rng.standard_normal(n)).astype(np.float32))

    torch.manual_seed(1)
    cnn = Cnn()
    torch.jit.script(cnn).save(os.path.join(out, "cnn.pt"))
    torch.manual_seed(1)
    torch.jit.script(Cnn(dropout=0.3)).save(os.path.join(out, "cnn_dropout.pt"))
    torch.manual_seed(2)
    torch.jit.script(BnCnn()).save(os.path.join(out, "bn_cnn.pt"))
    torch.manual_seed(3)
    torch.jit.script(Lossy()).save(os.path.join(out, "lossy.pt"))
    torch.manual_seed(4)
    torch.jit.script(Regressor()).save(os.path.join(out, "regressor.pt"))
    import torchvision
    torch.manual_seed(5)
    torch.jit.script(torchvision.models.shufflenet_v2_x0_5(num_classes=10)).save(os.path.join(out, "shufflenet.pt"))
    torch.manual_seed(1)
    traced = Cnn(dropout=0.5).train()
    torch.jit.trace(traced, torch.zeros(2, 1, 28, 28), check_trace=False).save(os.path.join(out, "traced.pt"))
    torch.jit.freeze(torch.jit.script(Cnn()).eval()).save(os.path.join(out, "frozen.pt"))
    torch.save(Cnn(), os.path.join(out, "pickle.pt"))
    rewrite(os.path.join(out, "cnn.pt"), os.path.join(out, "newer.pt"),
            lambda name, data: b"11\n" if name.endswith("/version") else data)
    rewrite(os.path.join(out, "cnn.pt"), os.path.join(out, "newer_op.pt"),
            lambda name, data: data.replace(b"torch.flatten(", b"torch.scaled_dot_product_attention(")
            if name.endswith(".py") else data)


def rewrite(source, target, change):
    """A copy of a TorchScript archive with some records changed: what a newer PyTorch writes
    (a higher format version; an operator LibTorch 1.13 does not know), simulated."""
    import zipfile
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as new:
        for item in old.infolist():
            new.writestr(item, change(item.filename, old.read(item.filename)))


class BuiltinCnn(nn.Module):
    """expctl's built-in `cnn` (channels [32, 64], no dense layer) written in PyTorch."""

    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(64 * 7 * 7, 10))

    def forward(self, x):
        return self.layers(x)


def bench(out):
    """What bench/byo_models.sh needs beyond the test material: resnet18 and the built-in cnn as
    TorchScript, and arrays of 10 MiB and 1 GiB for the memory figure."""
    import torchvision
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(6)
    torch.jit.script(torchvision.models.resnet18(num_classes=10)).save(os.path.join(out, "resnet18.pt"))
    torch.manual_seed(7)
    torch.jit.script(BuiltinCnn()).save(os.path.join(out, "cnn_builtin.pt"))
    for name, rows in (("small", 2560), ("large", 262144)):   # x 1024 float32: 10 MiB, 1 GiB
        x = np.lib.format.open_memmap(os.path.join(out, f"mem-{name}-x.npy"), mode="w+", dtype=np.float32,
                                      shape=(rows, 1024))
        rng = np.random.default_rng(rows)
        for begin in range(0, rows, 16384):
            x[begin:begin + 16384] = rng.standard_normal((min(16384, rows - begin), 1024), dtype=np.float32)
        x.flush()
        del x
        np.save(os.path.join(out, f"mem-{name}-y.npy"), (np.arange(rows) % 10).astype(np.int64))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--bench":
        bench(sys.argv[2])
    elif len(sys.argv) == 2:
        main(sys.argv[1])
    else:
        sys.exit(__doc__)
