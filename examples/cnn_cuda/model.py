"""Small convolutional image classifier used by the cnn_cuda example trainer."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["ConvBlock", "SmallConvNet", "build_model"]


class ConvBlock(nn.Module):
    """conv -> batchnorm -> relu, optionally followed by 2x2 max pooling."""

    def __init__(self, in_ch: int, out_ch: int, pool: bool = True) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_ch, out_ch, kernel_size=3, padding=1, bias=False)
        # BatchNorm keeps running statistics that differ between train() and eval(),
        # so a port that forgets model.eval() produces different logits.
        self.bn = nn.BatchNorm2d(out_ch)
        self.pool = nn.MaxPool2d(2) if pool else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(F.relu(self.bn(self.conv(x))))


class SmallConvNet(nn.Module):
    def __init__(self, num_classes: int = 10, width: int = 16, dropout: float = 0.25) -> None:
        super().__init__()
        self.features = nn.Sequential(
            ConvBlock(3, width),
            ConvBlock(width, width * 2),
            ConvBlock(width * 2, width * 2, pool=False),
        )
        self.head = nn.Sequential(
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Dropout(dropout),
            nn.Linear(width * 2, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def build_model(cfg: dict) -> SmallConvNet:
    return SmallConvNet(
        num_classes=cfg.get("num_classes", 10),
        width=cfg.get("width", 16),
        dropout=cfg.get("dropout", 0.25),
    )
