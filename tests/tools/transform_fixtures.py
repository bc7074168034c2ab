#!/usr/bin/python3
"""Writes what torchvision makes of test images, for tests/unit/run/test_image_transform.cpp:
for each case NAME, NAME.rgb (the input: height x width x 3 bytes) and NAME.out (the expected
output: bytes for a resize, float32 for a transform), and manifest.json describing each case.
Needs Debian's python3-torchvision, python3-pil and python3-numpy."""
import json
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torchvision import transforms

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(11)
manifest = {}
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def picture(h, w):
    y, x = np.mgrid[0:h, 0:w]
    rgb = np.stack([x * 255 / w, y * 255 / h, (x * y) % 256], axis=-1) + rng.normal(0, 25, (h, w, 3))
    return np.clip(rgb, 0, 255).astype(np.uint8)


def save_input(name, pixels):
    (out / (name + ".rgb")).write_bytes(pixels.tobytes())
    return {"width": pixels.shape[1], "height": pixels.shape[0]}


# PIL's bilinear resize, down, up and mixed (what torchvision's Resize calls).
for h, w, th, tw in [(37, 53, 32, 32), (100, 80, 28, 31), (10, 12, 32, 40), (64, 64, 7, 64), (5, 300, 50, 17),
                     (33, 33, 33, 20)]:
    name = f"resize-{h}x{w}-to-{th}x{tw}"
    pixels = picture(h, w)
    case = save_input(name, pixels)
    resized = np.asarray(Image.fromarray(pixels).resize((tw, th), Image.BILINEAR))
    (out / (name + ".out")).write_bytes(resized.tobytes())
    manifest[name] = dict(case, kind="resize", to_height=th, to_width=tw)


def cover_short_side(h, w, th, tw):
    """expctl's choice of Resize(s): the smallest shorter side whose image covers th x tw."""
    width_short = w <= h
    shorter, longer = (w, h) if width_short else (h, w)
    need_short, need_long = (tw, th) if width_short else (th, tw)
    s = need_short
    while int(s * longer / shorter) < need_long:
        s += 1
    return s


# Evaluation: Resize + CenterCrop + ToTensor + Normalize, as a model sees it.
for h, w, th, tw in [(37, 53, 32, 32), (53, 37, 32, 32), (28, 28, 28, 28), (10, 10, 32, 32), (90, 70, 24, 40),
                     (41, 41, 32, 32), (120, 96, 64, 48)]:
    name = f"eval-{h}x{w}-to-{th}x{tw}"
    pixels = picture(h, w)
    case = save_input(name, pixels)
    s = cover_short_side(h, w, th, tw)
    pipeline = transforms.Compose([transforms.Resize(s), transforms.CenterCrop((th, tw)), transforms.ToTensor(),
                                   transforms.Normalize(MEAN, STD)])
    tensor = pipeline(Image.fromarray(pixels))
    assert tensor.dtype == torch.float32 and tuple(tensor.shape) == (3, th, tw)
    (out / (name + ".out")).write_bytes(tensor.numpy().tobytes())
    manifest[name] = dict(case, kind="eval", to_height=th, to_width=tw)

(out / "manifest.json").write_text(json.dumps(manifest, indent=1))
