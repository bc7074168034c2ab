#!/usr/bin/python3
"""The material of bench/transformers.sh (issue 51's benchmarks), made from what is installed:
models scripted from torch.nn with Debian's python3-torch 1.13, random arrays, a synthetic token
stream. No downloads.

    transformer_fixtures.py OUT_DIR [--seq 16] [--vocab 512] [--block 64]

writes, into OUT_DIR:
  transformer.pt   issue 51's nn.TransformerEncoder classifier (tests/tools/model_zoo.py's): input
                   projection 8 -> 64, 2 layers, d=64, 4 heads, feed-forward 128, batch_first,
                   dropout 0, mean over the sequence, 2 classes
  seq-x.npy        float32 [4096, SEQ, 8] sequences;  seq-y.npy  int64 [4096] classes (the sign of
                   feature 0's mean); seq-eval-{x,y}.npy: the first 256 (the final evaluation)
  gpt.pt           a small GPT: token + position embeddings (VOCAB ids, BLOCK positions), 2 pre-norm
                   causal self-attention layers (nn.TransformerEncoderLayer, d=64, 4 heads, ff 256,
                   GELU, dropout 0), final LayerNorm, linear head -> logits [B, T, VOCAB]
  stream.npy       a 1-d uint16 token stream (262144 ids below VOCAB): runs of a next-id rule with
                   noise, so the model has something to learn; stream-eval.npy: its first 64 windows
Deterministic for a given torch and numpy.
"""
import argparse
import os

import numpy as np
import torch
import torch.nn as nn


class TransformerClassifier(nn.Module):
    def __init__(self, features: int, classes: int):
        super().__init__()
        self.inp = nn.Linear(features, 64)
        layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(64, classes)

    def forward(self, x):
        return self.head(self.encoder(self.inp(x)).mean(1))


class Gpt(nn.Module):
    def __init__(self, vocab: int, block: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, 64)
        self.pos = nn.Embedding(block, 64)
        layer = nn.TransformerEncoderLayer(64, 4, 256, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, 2)
        self.norm = nn.LayerNorm(64)
        self.head = nn.Linear(64, vocab)
        self.register_buffer("causal", torch.triu(torch.full((block, block), float("-inf")), diagonal=1))
        self.register_buffer("positions", torch.arange(block))

    def forward(self, ids):
        t = ids.size(1)
        h = self.tok(ids) + self.pos(self.positions[:t])
        h = self.blocks(h, mask=self.causal[:t, :t])
        return self.head(self.norm(h))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--seq", type=int, default=16)
    parser.add_argument("--vocab", type=int, default=512)
    parser.add_argument("--block", type=int, default=64)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(51)
    x = rng.standard_normal((4096, args.seq, 8)).astype(np.float32)
    np.save(os.path.join(args.out, "seq-x.npy"), x)
    np.save(os.path.join(args.out, "seq-y.npy"), (x[:, :, 0].mean(1) > 0).astype(np.int64))
    np.save(os.path.join(args.out, "seq-eval-x.npy"), x[:256])
    np.save(os.path.join(args.out, "seq-eval-y.npy"), (x[:256, :, 0].mean(1) > 0).astype(np.int64))
    n = 262144
    ids = np.empty(n, dtype=np.int64)
    ids[0] = 0
    jumps = rng.random(n) < 0.1
    noise = rng.integers(0, args.vocab, n)
    for i in range(1, n):
        ids[i] = noise[i] if jumps[i] else (ids[i - 1] * 7 + 13) % args.vocab
    np.save(os.path.join(args.out, "stream.npy"), ids.astype(np.uint16))
    np.save(os.path.join(args.out, "stream-eval.npy"), ids[: 64 * args.block + 1].astype(np.uint16))
    torch.manual_seed(12)
    torch.jit.script(TransformerClassifier(8, 2)).save(os.path.join(args.out, "transformer.pt"))
    torch.manual_seed(13)
    torch.jit.script(Gpt(args.vocab, args.block)).save(os.path.join(args.out, "gpt.pt"))


if __name__ == "__main__":
    main()
