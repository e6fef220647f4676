"""Entry point for `cuda2neuron validate --entry validate_entry:build` on the cnn_cuda example.

build() returns the model already on the GPU and a batch of example inputs, also on the GPU;
train_step() is what one optimizer step of train.py does, without the data loader.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from model import build_model

__all__ = ["build", "build_train_step", "example_batch", "train_step"]

device = torch.device("cuda")


def build():
    torch.manual_seed(0)
    model = build_model({"num_classes": 10, "width": 8, "dropout": 0.25}).cuda()
    images = torch.randn(4, 3, 32, 32, device=device)
    return model, (images,)


def train_step(model: nn.Module, batch) -> torch.Tensor:
    images, labels = batch
    images = images.to(device, non_blocking=True)
    labels = labels.cuda(non_blocking=True)
    with torch.cuda.amp.autocast():
        logits = model(images)
        loss = nn.functional.cross_entropy(logits, labels)
    return loss


def example_batch():
    """A labelled batch for train_step(), created on the GPU like the training data."""
    torch.manual_seed(1)
    images = torch.randn(4, 3, 32, 32).cuda()
    labels = torch.randint(0, 10, (4,), device="cuda")
    return images, labels


def build_train_step():
    """For `--entry validate_entry:build_train_step`: returns step(), which does one optimizer
    step per call exactly as train.py does (fp16 autocast + GradScaler + SGD with momentum)."""
    model, _ = build()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.cuda.amp.GradScaler()
    batch = example_batch()

    def step() -> torch.Tensor:
        loss = train_step(model, batch)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    return step
