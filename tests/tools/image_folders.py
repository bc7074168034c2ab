#!/usr/bin/python3
"""Fashion-MNIST as image folders (data.dataset imagefolder, docs/data.md), from Debian's
dataset-fashion-mnist, into OUT:
  fmnist-png/{train,eval}/<class>/<n>.png     grey 28x28, 600 + 200 images
  fmnist-jpeg/{train,eval}/<class>/<n>.jpg    the same as JPEG (quality 90)
  rgb32/{train,eval}/<class>/<n>.png          32x32 RGB (resized, tinted per image), 600 + 200,
                                              one grey PNG and one 10x10 JPEG among them
  bad-<kind>/train/...                        rgb32's training set with one bad file: corrupt,
                                              truncated, notimage (text named .png)
  expected-<set>-x.npy / -y.npy               torchvision's ImageFolder + Resize + CenterCrop +
                                              ToTensor + Normalize of the first 48 evaluation
                                              samples of fmnist-png (28) and rgb32 (24: a downscale)
Needs Debian's python3-torchvision, python3-pil and python3-numpy; the benchmarks
(bench/image_pipeline.sh) call it with --train N --eval M --out-sets SETS for larger folders."""
import argparse
import gzip
import io
import shutil
from pathlib import Path

import numpy as np
from PIL import Image

CLASSES = ["T-shirt_top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle_boot"]
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
ROOT = Path("/usr/share/datasets/fashion-mnist")


def idx(name):
    path = ROOT / name
    data = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
    if data[2] == 8 and data[3] == 3:
        n, h, w = np.frombuffer(data[4:16], ">u4")
        return np.frombuffer(data[16:], np.uint8).reshape(n, h, w)
    return np.frombuffer(data[8:], np.uint8)


def split(prefix, count):
    for suffix in (".gz", ""):
        if (ROOT / f"{prefix}-images-idx3-ubyte{suffix}").exists():
            images = idx(f"{prefix}-images-idx3-ubyte{suffix}")
            labels = idx(f"{prefix}-labels-idx1-ubyte{suffix}")
            return images[:count], labels[:count]
    raise SystemExit(f"image_folders.py: no Fashion-MNIST under {ROOT}: apt-get install dataset-fashion-mnist")


def write_set(folder, images, labels, kind, rng):
    for n, (image, label) in enumerate(zip(images, labels)):
        target = folder / CLASSES[label]
        target.mkdir(parents=True, exist_ok=True)
        if kind == "png":
            Image.fromarray(image).save(target / f"{n:05d}.png")
        elif kind == "jpeg":
            Image.fromarray(image).save(target / f"{n:05d}.jpg", quality=90)
        else:  # rgb32: resized to 32x32 and tinted, a CIFAR-like shape
            grey = np.asarray(Image.fromarray(image).resize((32, 32), Image.BILINEAR), np.float32)
            tint = rng.uniform(0.4, 1.0, 3)
            rgb = np.clip(grey[..., None] * tint + rng.normal(0, 6, (32, 32, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(rgb).save(target / f"{n:05d}.png")


def expected(folder, size, out, name, count=48):
    import torch
    from torchvision import datasets, transforms
    pipeline = transforms.Compose([transforms.Resize(size), transforms.CenterCrop(size), transforms.ToTensor(),
                                   transforms.Normalize(MEAN, STD)])
    dataset = datasets.ImageFolder(str(folder), transform=pipeline)
    xs = torch.stack([dataset[i][0] for i in range(count)]).numpy()
    ys = np.array([dataset[i][1] for i in range(count)], np.int64)
    np.save(out / f"expected-{name}-x.npy", xs)
    np.save(out / f"expected-{name}-y.npy", ys)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--train", type=int, default=600)
    parser.add_argument("--eval", type=int, default=200)
    parser.add_argument("--sets", default="fmnist-png,fmnist-jpeg,rgb32,bad,expected")
    args = parser.parse_args()
    sets = args.sets.split(",")
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    train = split("train", args.train)
    test = split("t10k", args.eval)
    for name, kind in (("fmnist-png", "png"), ("fmnist-jpeg", "jpeg"), ("rgb32", "rgb32")):
        if name not in sets:
            continue
        rng = np.random.default_rng(5)
        write_set(out / name / "train", *train, kind, rng)
        write_set(out / name / "eval", *test, kind, rng)
    if "rgb32" in sets:
        # A grey image among colour ones, and one smaller than the crop: both train (as torchvision's
        # loader converts to RGB and Resize scales up).
        Image.fromarray(train[0][1]).save(out / "rgb32/train" / CLASSES[train[1][1]] / "grey.png")
        small = Image.fromarray(train[0][2]).resize((10, 10), Image.BILINEAR).convert("RGB")
        small.save(out / "rgb32/train" / CLASSES[train[1][2]] / "small.jpg", quality=95)
    if "bad" in sets and "rgb32" in sets:
        for kind in ("corrupt", "truncated", "notimage"):
            target = out / f"bad-{kind}" / "train"
            shutil.copytree(out / "rgb32/train", target)
            victim = target / CLASSES[train[1][3]] / "00003.png"
            data = bytearray(victim.read_bytes())
            if kind == "corrupt":
                data[40:len(data) - 20] = bytes(len(data) - 60)  # the compressed pixels zeroed
            elif kind == "truncated":
                data = data[:len(data) // 2]
            else:
                data = bytearray(b"this is a text file, named as if it were a PNG\n")
            victim.write_bytes(bytes(data))
    if "expected" in sets:
        expected(out / "fmnist-png" / "eval", 28, out, "fmnist-png")
        expected(out / "rgb32" / "eval", 24, out, "rgb32-24")


if __name__ == "__main__":
    main()
