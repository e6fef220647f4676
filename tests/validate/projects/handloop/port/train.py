"""A tiny LSTM language model trained with a hand-written SGD update and no torch.optim
optimizer, the way older example trainers are written: python train.py --steps N [--accum K]"""

from __future__ import annotations

import argparse

import torch
import torch.nn as nn


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 12, width: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.rnn = nn.LSTM(width, width)
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens, hidden=None):
        out, hidden = self.rnn(self.embed(tokens), hidden)
        return self.head(self.drop(out)), hidden


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--accum", type=int, default=1, help="backward passes per update")
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--clip", type=float, default=0.25)
    args = p.parse_args()
    device = torch.device("neuron" if torch.neuron.is_available() else "cpu")
    torch.manual_seed(0)
    model = TinyLM().to(device)
    criterion = nn.CrossEntropyLoss()
    data = torch.randint(0, 12, (6 * args.steps * args.accum + 1, 2))
    for step in range(args.steps):
        model.train()
        model.zero_grad()
        for micro in range(args.accum):
            i = (step * args.accum + micro) * 6
            x, y = data[i:i + 6].to(device), data[i + 1:i + 7].to(device)
            logits, _ = model(x)
            loss = criterion(logits.view(-1, 12), y.view(-1))
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        for param in model.parameters():
            param.data.add_(param.grad, alpha=-args.lr)
        print(f"step {step} loss {loss.item():.4f}")
    model.eval()
    with torch.no_grad():
        logits, _ = model(data[:6].to(device))
        print("eval", logits.argmax(-1).tolist())


if __name__ == "__main__":
    main()
