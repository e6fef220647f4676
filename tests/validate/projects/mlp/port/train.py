"""Train the tiny MLP on random data: python train.py --steps N"""

from __future__ import annotations

import argparse

import torch
import torch.nn as nn

from model import Net


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--amp", action="store_true")
    args = p.parse_args()
    device = "neuron" if torch.neuron.is_available() else "cpu"
    torch.manual_seed(0)
    torch.neuron.manual_seed_all(0)
    model = Net().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("neuron", enabled=args.amp)
    loss_fn = nn.CrossEntropyLoss()
    data = torch.randn(64, 8)
    labels = (data.sum(1) > 0).long() + (data[:, 0] > 0).long()
    for step in range(args.steps):
        x = data[step * 8:(step + 1) * 8].to(device, non_blocking=True)
        y = labels[step * 8:(step + 1) * 8].to(device)
        with torch.autocast("neuron", dtype=torch.bfloat16, enabled=args.amp):
            loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        torch.neuron.synchronize()
        print(f"step {step} loss {loss.item():.4f}")
    model.eval()
    with torch.no_grad():
        print("eval", model(data[:8].to(device)).argmax(1).tolist())


if __name__ == "__main__":
    main()
