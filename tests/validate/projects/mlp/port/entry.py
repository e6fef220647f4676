from __future__ import annotations

import torch

from model import Net


def build():
    model = Net().to("neuron")
    model.eval()
    x = torch.randn(4, 8, device="neuron")
    return model, (x,)


def build_train():
    model = Net().to("neuron")
    x = torch.randn(4, 8, device="neuron")
    return model, x
