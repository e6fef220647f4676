"""Inference only: no optimizer, so script mode must refuse it."""

from __future__ import annotations

import torch

from model import Net

model = Net().to("neuron").eval()
with torch.no_grad():
    print(model(torch.randn(2, 8, device="neuron")).shape)
