"""Synthetic image data so the example runs anywhere without downloads."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, Dataset

__all__ = ["SyntheticImages", "make_loader"]


class SyntheticImages(Dataset):
    """Random 3x32x32 images whose label depends on the mean of one colour channel.

    The labels are a (noisy) function of the pixels, so the loss actually goes down
    during the few steps the example trains for.
    """

    def __init__(self, n: int = 256, num_classes: int = 10, image_size: int = 32, seed: int = 0) -> None:
        gen = torch.Generator().manual_seed(seed)
        self.images = torch.randn(n, 3, image_size, image_size, generator=gen)
        score = self.images[:, 0].mean(dim=(1, 2))
        bins = torch.quantile(score, torch.linspace(0, 1, num_classes + 1)[1:-1])
        self.labels = torch.bucketize(score, bins)

    def __len__(self) -> int:
        return self.images.shape[0]

    def __getitem__(self, idx: int):
        return self.images[idx], self.labels[idx]


def make_loader(batch_size: int, train: bool = True, num_workers: int = 0, seed: int = 0) -> DataLoader:
    ds = SyntheticImages(n=256 if train else 64, seed=seed if train else seed + 1)
    # pin_memory=True so that .to(device, non_blocking=True) can overlap the copy with compute.
    return DataLoader(
        ds,
        batch_size=batch_size,
        shuffle=train,
        num_workers=num_workers,
        pin_memory=True,
        drop_last=train,
        generator=torch.Generator().manual_seed(seed) if train else None,
    )
