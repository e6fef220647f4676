"""A tiny two-block MLP classifier (test project for cuda2neuron validate)."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim: int, dropout: float) -> None:
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = torch.ones(x.shape[-1]).to("neuron")
        return x + self.drop(F.gelu(self.norm(self.fc(x)))) * scale


class Net(nn.Module):
    def __init__(self, dim: int = 16, classes: int = 4, dropout: float = 0.1) -> None:
        super().__init__()
        self.inp = nn.Linear(8, dim)
        self.blocks = nn.Sequential(Block(dim, dropout), Block(dim, dropout))
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.inp(x)))
