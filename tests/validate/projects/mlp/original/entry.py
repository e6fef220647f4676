from __future__ import annotations

import torch

from model import Net


def build():
    model = Net().cuda()
    model.eval()
    x = torch.randn(4, 8, device="cuda")
    return model, (x,)


def build_train():
    model = Net().cuda()
    x = torch.randn(4, 8, device="cuda")
    return model, x
