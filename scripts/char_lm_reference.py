#!/usr/bin/env python3
"""PyTorch reference for bench/char_lm: the tiny-Shakespeare character-level recipe.

The same recipe as configs/models/char-gpt-4x128.yaml and configs/jobs/tinyshakespeare-char.yaml,
written plainly in PyTorch: a GPT-2-style decoder (LayerNorm without bias, learned positions,
GELU MLP, no biases, head tied to the embedding, no dropout), 4 blocks of hidden 128 with 4
heads, context 64, batch 12; AdamW (betas 0.9/0.99, weight decay 0.1 on matrices only), learning
rate 1e-3 with 100 warm-up iterations and cosine decay to 1e-4 at 2000, clipping at 1.0; the
first 90% of the text to train and the last 10% to validate; the validation loss averaged over
100 batches every 250 iterations. It prints lines in bench/char_lm's format, then
`wall time S s`, so that the bench can run it beside Sailor's layouts and print the ratio.

Run with Debian's /usr/bin/python3 (python3-torch).
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden, elementwise_affine=True)
        self.ln1.bias = None
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.proj = nn.Linear(hidden, hidden, bias=False)
        self.ln2 = nn.LayerNorm(hidden)
        self.ln2.bias = None
        self.fc = nn.Linear(hidden, 4 * hidden, bias=False)
        self.fc_out = nn.Linear(4 * hidden, hidden, bias=False)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=2)
        q, k, v = (t.view(b, s, self.heads, h // self.heads).transpose(1, 2) for t in (q, k, v))
        ctx = F.scaled_dot_product_attention(q, k, v, is_causal=True) if hasattr(
            F, "scaled_dot_product_attention") else self._attention(q, k, v)
        x = x + self.proj(ctx.transpose(1, 2).reshape(b, s, h))
        return x + self.fc_out(F.gelu(self.fc(self.ln2(x))))

    @staticmethod
    def _attention(q, k, v):
        s = q.shape[2]
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
        return scores.softmax(-1) @ v


class CharGPT(nn.Module):
    def __init__(self, vocabulary, layers=4, hidden=128, heads=4, sequence=64):
        super().__init__()
        self.word = nn.Embedding(vocabulary, hidden)
        self.position = nn.Embedding(sequence, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(hidden)
        self.ln.bias = None
        self.apply(self._init)
        for name, p in self.named_parameters():
            if name.endswith("proj.weight") or name.endswith("fc_out.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * layers))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, 0.02)

    def forward(self, tokens, targets):
        x = self.word(tokens) + self.position(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x)
        logits = self.ln(x) @ self.word.weight.t()  # the tied head
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def learning_rate(it, args):
    if it < args.warmup:
        return args.lr * (it + 1) / args.warmup
    if it >= args.decay:
        return args.min_lr
    ratio = (it - args.warmup) / (args.decay - args.warmup)
    return args.min_lr + 0.5 * (1 + math.cos(math.pi * ratio)) * (args.lr - args.min_lr)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="../shared/data/text/tinyshakespeare.txt")
    p.add_argument("--iterations", type=int, default=2000)
    p.add_argument("--threads", type=int, default=2, help="torch threads")
    p.add_argument("--batch", type=int, default=12)
    p.add_argument("--sequence", type=int, default=64)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--eval-batches", type=int, default=100)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--min-lr", type=float, default=1e-4)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--decay", type=int, default=2000)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1337)
    start = time.monotonic()
    text = open(args.data, encoding="utf-8").read()
    symbols = sorted(set(text))
    index = {c: i for i, c in enumerate(symbols)}
    data = torch.tensor([index[c] for c in text], dtype=torch.long)
    split = int(0.9 * len(data))
    train, val = data[:split], data[split:]

    def batch(source):
        at = torch.randint(len(source) - args.sequence - 1, (args.batch,))
        x = torch.stack([source[i:i + args.sequence] for i in at])
        y = torch.stack([source[i + 1:i + 1 + args.sequence] for i in at])
        return x, y

    model = CharGPT(len(symbols), sequence=args.sequence)
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    others = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": matrices, "weight_decay": 0.1},
                             {"params": others, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.99))
    print(f"char_lm_reference: {sum(p.numel() for p in model.parameters())} parameters, "
          f"{len(symbols)} symbols, {args.threads} torch threads", flush=True)
    for it in range(1, args.iterations + 1):
        for group in opt.param_groups:
            group["lr"] = learning_rate(it - 1, args)
        x, y = batch(train)
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if it % args.eval_every == 0 or it == args.iterations:
            with torch.no_grad():
                v = sum(model(*batch(val)).item() for _ in range(args.eval_batches)) / args.eval_batches
            print(f"iteration {it:5d}  train loss {loss.item():.4f}  validation loss {v:.4f}  "
                  f"{time.monotonic() - start:.1f} s", flush=True)
    print(f"wall time {time.monotonic() - start:.1f} s", flush=True)


if __name__ == "__main__":
    main()
