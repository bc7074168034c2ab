#!/usr/bin/python3
"""Writes JPEG and PNG test images into DIR, each valid one with the pixels torchvision's default
loader gives it (PIL.Image.open(f).convert("RGB")) as NAME.rgb (height x width x 3 bytes), and
a manifest.json: {name: {"width", "height"} or {"error": true}}. Used by
tests/unit/run/test_image_file.cpp; needs only Debian's python3-pil and python3-numpy."""
import io
import json
import sys
import zlib
from pathlib import Path

import numpy as np
from PIL import Image

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(7)
manifest = {}


def photo(h, w):
    """Smooth colour gradients plus noise: chroma detail that 4:2:0 subsampling and fancy
    upsampling change, so a decoder with other flags gives other bytes."""
    y, x = np.mgrid[0:h, 0:w]
    rgb = np.stack([x * 255 / w, y * 255 / h, (x + y) * 127 / (w + h) + 64], axis=-1)
    rgb += rng.normal(0, 18, rgb.shape)
    return np.clip(rgb, 0, 255).astype(np.uint8)


def keep(name, data):
    (out / name).write_bytes(data)
    with Image.open(io.BytesIO(data)) as image:
        rgb = np.asarray(image.convert("RGB"))
    (out / (name + ".rgb")).write_bytes(rgb.tobytes())
    manifest[name] = {"width": rgb.shape[1], "height": rgb.shape[0]}


def bad(name, data):
    (out / name).write_bytes(data)
    manifest[name] = {"error": True}


def encoded(image, fmt, **options):
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


colour = Image.fromarray(photo(37, 53))
keep("photo420.jpg", encoded(colour, "JPEG", quality=90))  # 4:2:0, PIL's default
keep("photo444.jpg", encoded(colour, "JPEG", quality=95, subsampling=0))
keep("progressive.jpg", encoded(colour, "JPEG", quality=85, progressive=True))
keep("grey.jpg", encoded(colour.convert("L"), "JPEG", quality=90))
keep("rgb.png", encoded(colour, "PNG"))
keep("grey.png", encoded(colour.convert("L"), "PNG"))
rgba = colour.convert("RGBA")
rgba.putalpha(128)  # semi-transparent: libpng's simplified API would blend it, PIL drops it
keep("rgba.png", encoded(rgba, "PNG"))
keep("grey_alpha.png", encoded(colour.convert("LA"), "PNG"))
palette = colour.convert("P", palette=Image.ADAPTIVE, colors=16)
keep("palette.png", encoded(palette, "PNG", transparency=3))

jpeg = encoded(colour, "JPEG", quality=90)
bad("truncated.jpg", jpeg[: len(jpeg) // 2])
png = encoded(colour, "PNG")
bad("truncated.png", png[: len(png) // 2])
bad("cmyk.jpg", encoded(colour.convert("CMYK"), "JPEG"))
bad("sixteen.png", encoded(Image.fromarray((photo(8, 8)[..., 0].astype(np.uint16) * 257)), "PNG"))
bad("text.png", b"this is not an image, only named like one\n")
flipped = bytearray(png)
flipped[40] ^= 0xFF  # inside IDAT: a CRC mismatch
bad("crc.png", bytes(flipped))
# A valid PNG header (CRC and all) that claims 60 000 x 60 000 pixels, and then ends.
ihdr = b"IHDR" + (60000).to_bytes(4, "big") * 2 + bytes([8, 2, 0, 0, 0])
bad("huge.png", png[:8] + (13).to_bytes(4, "big") + ihdr + zlib.crc32(ihdr).to_bytes(4, "big"))

(out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))
