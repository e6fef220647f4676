# README: this script is a test fixture for cuda2neuron (the bundled example that the README's
# first command migrates and validates). It is ordinary single-GPU CUDA training code on purpose.
"""Train a small CNN image classifier on synthetic data, single GPU, with mixed precision.

    python train.py --steps 3
    python train.py --epochs 2 --batch-size 64 --no-amp
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import torch
import torch.nn as nn

from data import make_loader
from model import build_model

DEFAULT_CKPT_DIR = os.path.join(tempfile.gettempdir(), "cnn_cuda_example")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--steps", type=int, default=0, help="stop after this many optimizer steps (0 = full epochs)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--no-amp", dest="amp", action="store_false", help="disable fp16 autocast + loss scaling")
    p.add_argument("--ckpt-dir", default=DEFAULT_CKPT_DIR)
    p.add_argument("--log-every", type=int, default=1)
    return p.parse_args(argv)


def evaluate(model: nn.Module, loader, device: str) -> tuple[float, float]:
    model.eval()
    criterion = nn.CrossEntropyLoss(reduction="sum")
    total_loss, correct, seen = 0.0, 0, 0
    with torch.no_grad():
        for images, labels in loader:
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            with torch.cuda.amp.autocast():
                logits = model(images)
            total_loss += criterion(logits.float(), labels).item()
            correct += (logits.argmax(dim=1) == labels).sum().item()
            seen += labels.numel()
    model.train()
    return total_loss / seen, correct / seen


def save_checkpoint(path: str, model: nn.Module, optimizer, scaler, step: int) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.save(
        {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scaler": scaler.state_dict(),
            "step": step,
        },
        path,
    )


def main(argv=None) -> None:
    args = parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    use_cuda = device == "cuda"

    # Let cuDNN pick the fastest convolution algorithms for our fixed input size.
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(args.seed)
    torch.cuda.manual_seed_all(args.seed)

    cfg = {"num_classes": 10, "width": args.width, "dropout": 0.25}
    model = build_model(cfg)
    if use_cuda:
        model.cuda()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    scaler = torch.cuda.amp.GradScaler(enabled=args.amp)

    train_loader = make_loader(args.batch_size, train=True, num_workers=args.workers, seed=args.seed)
    val_loader = make_loader(args.batch_size, train=False, num_workers=args.workers, seed=args.seed)

    step = 0
    model.train()
    t0 = time.time()
    for epoch in range(args.epochs):
        for images, labels in train_loader:
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)

            with torch.cuda.amp.autocast(enabled=args.amp):
                logits = model(images)
                loss = criterion(logits, labels)

            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            step += 1

            if step % args.log_every == 0:
                # synchronize so the wall-clock number covers the kernels, not just their launch
                torch.cuda.synchronize()
                dt = (time.time() - t0) / args.log_every
                t0 = time.time()
                print(f"epoch {epoch} step {step} loss {loss.item():.4f} {dt * 1000:.1f} ms/step")
            if args.steps and step >= args.steps:
                break
        if args.steps and step >= args.steps:
            break

    val_loss, val_acc = evaluate(model, val_loader, device)
    print(f"val loss {val_loss:.4f} acc {val_acc:.3f}")
    if use_cuda:
        print(f"peak GPU memory {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB")

    ckpt_path = os.path.join(args.ckpt_dir, "last.pt")
    save_checkpoint(ckpt_path, model, optimizer, scaler, step)
    # Reload the checkpoint straight onto the GPU, as a resume would.
    state = torch.load(ckpt_path, map_location="cuda:0")
    model.load_state_dict(state["model"])
    print(f"saved and reloaded {ckpt_path} at step {state['step']}")


if __name__ == "__main__":
    main()
