#!/usr/bin/python3
"""Models a team brings that were never built for expctl (issue 51), scripted from torch.nn with
Debian's python3-torch, and the arrays they train on.

    model_zoo.py OUT_DIR

writes, into OUT_DIR (created; existing files are replaced):
  raises_at_step.pt   a scripted MLP whose forward raises its own RuntimeError at its 3rd training
                      forward (step 3): a model's failure in the middle of training
  mlp.pt              the same MLP, which never raises
  raises_in_eval.pt   the same MLP whose forward raises in eval mode once it has trained (the check
                      before the first step runs it in eval mode, untrained: it passes)
  transformer.pt      nn.TransformerEncoder classifier: 2 layers, d=64, 4 heads, batch_first; in
                      eval mode PyTorch 1.13 takes its fast path, which fails under CPU autocast
  lstm.pt             an nn.LSTM classifier over the same sequences (its last step's state)
  bn_conv.pt          a Conv1d + BatchNorm1d classifier over the same sequences (running statistics)
  seq-{train,eval}-{x,y}.npy   float32 sequences [N, 16, 8] and int64 classes [N] (2 classes: the
                      sign of the mean of feature 0) for the transformer
  feat-{train,eval}-{x,y}.npy  float32 [N, 8] and int64 classes [N] (3 classes) for the MLPs
  token_lm.pt         embedding (1000 ids) + GRU + linear head: logits [B, T, 1000]; raises when its
                      inputs are not int64 (they must reach it as ids, never scaled or cast)
  token_lm_loss.pt    the same network whose forward(ids, targets) returns its own loss over [B, T]
                      targets (train.loss: model)
  tok-{train,eval}-x-{i8,i4,u2}.npy   token ids [N, 12] as int64, int32 and uint16 (ids up to 999,
                      above uint8's range): the same values
  tok-{train,eval}-y.npy              int64 next-token targets [N, 12]
  stream-{train,eval}.npy    a token stream (data.dataset tokens): 1-d uint16 ids, runs of the same
                      next-id rule restarted every 40 tokens
  stream-{train,eval}.bin    the same ids as raw uint16 (nanoGPT's format)
Deterministic: the same files (bit for bit) on every call with the same torch and numpy.
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 1000
T_TOKENS = 12


class RaisesAtStep(nn.Module):
    """Counts its training forwards; the 3rd one raises (an error of the model's own code)."""

    def __init__(self, fail_at: int, in_eval: bool):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))
        self.calls = 0
        self.fail_at = fail_at
        self.in_eval = in_eval

    def forward(self, x):
        if self.training:
            self.calls += 1
            if not self.in_eval and self.calls == self.fail_at:
                raise RuntimeError("the model's own check failed at training forward " + str(self.calls))
        elif self.in_eval and self.calls > 0:
            raise RuntimeError("this test model raises in evaluation on purpose")
        return self.body(x)


class TransformerClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 64)
        layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(64, 2)

    def forward(self, x):
        return self.head(self.encoder(self.inp(x)).mean(1))


class LstmClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 32, batch_first=True)
        self.head = nn.Linear(32, 2)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


class BnConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(8, 16, 3, padding=1)
        self.bn = nn.BatchNorm1d(16)
        self.head = nn.Linear(16, 2)

    def forward(self, x):
        h = F.relu(self.bn(self.conv(x.transpose(1, 2))))
        return self.head(h.mean(2))


class TokenLm(nn.Module):
    def __init__(self, own_loss: bool):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.gru = nn.GRU(32, 64, batch_first=True)
        self.head = nn.Linear(64, VOCAB)
        self.own_loss = own_loss

    def logits(self, ids):
        if ids.dtype != torch.int64:
            raise ValueError("token ids must be int64")
        out, _ = self.gru(self.embed(ids))
        return self.head(out)

    def forward(self, ids):
        return self.logits(ids)


class TokenLmLoss(TokenLm):
    def __init__(self):
        super().__init__(True)

    def forward(self, ids, targets):
        logits = self.logits(ids)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


def save_npy(out, name, array):
    np.save(os.path.join(out, name), np.ascontiguousarray(array))


def main(out):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(51)
    for split, n in (("train", 1024), ("eval", 256)):
        x = rng.standard_normal((n, 16, 8)).astype(np.float32)
        save_npy(out, f"seq-{split}-x.npy", x)
        save_npy(out, f"seq-{split}-y.npy", (x[:, :, 0].mean(1) > 0).astype(np.int64))
        f = rng.standard_normal((n, 8)).astype(np.float32)
        save_npy(out, f"feat-{split}-x.npy", f)
        save_npy(out, f"feat-{split}-y.npy", (np.argmax(f[:, :3], 1)).astype(np.int64))
        # A learnable stream: each next id is a fixed function of the current one.
        start = rng.integers(0, VOCAB, size=(n, 1))
        ids = [start]
        for _ in range(T_TOKENS):
            ids.append((ids[-1] * 7 + 13) % VOCAB)
        ids = np.concatenate(ids, 1).astype(np.int64)
        save_npy(out, f"tok-{split}-x-i8.npy", ids[:, :T_TOKENS])
        save_npy(out, f"tok-{split}-x-i4.npy", ids[:, :T_TOKENS].astype(np.int32))
        save_npy(out, f"tok-{split}-x-u2.npy", ids[:, :T_TOKENS].astype(np.uint16))
        save_npy(out, f"tok-{split}-y.npy", ids[:, 1:])

    for split, runs in (("train", 200), ("eval", 40)):
        starts = rng.integers(0, VOCAB, size=(runs, 1))
        ids = [starts]
        for _ in range(39):
            ids.append((ids[-1] * 7 + 13) % VOCAB)
        stream = np.concatenate(ids, 1).reshape(-1).astype(np.uint16)
        save_npy(out, f"stream-{split}.npy", stream)
        stream.tofile(os.path.join(out, f"stream-{split}.bin"))

    torch.manual_seed(11)
    torch.jit.script(RaisesAtStep(3, False)).save(os.path.join(out, "raises_at_step.pt"))
    torch.manual_seed(11)
    torch.jit.script(RaisesAtStep(0, False)).save(os.path.join(out, "mlp.pt"))
    torch.manual_seed(11)
    torch.jit.script(RaisesAtStep(0, True)).save(os.path.join(out, "raises_in_eval.pt"))
    torch.manual_seed(12)
    torch.jit.script(TransformerClassifier()).save(os.path.join(out, "transformer.pt"))
    torch.manual_seed(14)
    torch.jit.script(LstmClassifier()).save(os.path.join(out, "lstm.pt"))
    torch.manual_seed(15)
    torch.jit.script(BnConv()).save(os.path.join(out, "bn_conv.pt"))
    torch.manual_seed(13)
    torch.jit.script(TokenLm(False)).save(os.path.join(out, "token_lm.pt"))
    torch.manual_seed(13)
    torch.jit.script(TokenLmLoss()).save(os.path.join(out, "token_lm_loss.pt"))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
