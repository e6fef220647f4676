"""Real-world-shaped models train on the device like on CPU (five steps), and checkpoints round-trip."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn


class TinyCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(0.1), nn.Linear(16, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, dropout=0.1, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim), nn.Dropout(0.1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.shape[1]
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), diagonal=1)
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int = 50, dim: int = 32, heads: int = 4, layers: int = 2, ctx: int = 16) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(ctx, dim)
        self.blocks = nn.Sequential(*[Block(dim, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.tok.weight  # weight tying, as in GPT-2

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        return self.head(self.ln(self.blocks(self.tok(idx) + self.pos(pos))))


class LSTMTagger(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(30, 12)
        self.lstm = nn.LSTM(12, 16, num_layers=2, batch_first=True, dropout=0.1)
        self.out = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.lstm(self.emb(x))[0])


# Data comes from its own generator: the default generator must be left to dropout, so that the
# device's dropout (neuron generator) and the CPU's (CPU generator) draw the same masks.
def _cnn_batch(g: torch.Generator):
    return torch.randn(4, 3, 16, 16, generator=g), torch.randint(0, 10, (4,), generator=g)


def _seq_batch(vocab: int, classes: int):
    return lambda g: (torch.randint(0, vocab, (3, 12), generator=g), torch.randint(0, classes, (3, 12), generator=g))


MODELS = {
    "cnn": (TinyCNN, _cnn_batch, lambda out, y: nn.functional.cross_entropy(out, y)),
    "transformer_encoder_layer": (
        lambda: nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True),
        lambda g: (torch.randn(3, 7, 16, generator=g), torch.randn(3, 7, 16, generator=g)),
        lambda out, y: nn.functional.mse_loss(out, y)),
    "lstm": (LSTMTagger, _seq_batch(30, 5), lambda out, y: nn.functional.cross_entropy(out.flatten(0, 1), y.flatten())),
    "gpt": (TinyGPT, _seq_batch(50, 50), lambda out, y: nn.functional.cross_entropy(out.flatten(0, 1), y.flatten())),
}


def _train(name: str, device: str, steps: int = 5) -> tuple[list[float], dict[str, torch.Tensor]]:
    make, batch, loss_fn = MODELS[name]
    torch.manual_seed(0)
    model = make().to(device)
    # SGD with momentum: Adam divides by sqrt(v), which turns last-bit differences of near-zero
    # gradients (kernels may sum in another order on the device) into visible parameter changes.
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    torch.manual_seed(1)  # the same dropout masks on both sides
    g = torch.Generator().manual_seed(2)
    losses = []
    for _ in range(steps):
        x, y = batch(g)
        loss = loss_fn(model(x.to(device)), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.detach().cpu() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("name", list(MODELS))
def test_five_training_steps_match_cpu(name):
    dev_losses, dev_state = _train(name, "neuron")
    cpu_losses, cpu_state = _train(name, "cpu")
    torch.testing.assert_close(torch.tensor(dev_losses), torch.tensor(cpu_losses), atol=1e-4, rtol=1e-4)
    for key, ref in cpu_state.items():
        torch.testing.assert_close(dev_state[key], ref, atol=1e-4, rtol=1e-4, msg=key)


@pytest.mark.parametrize("name", ["cnn", "gpt"])
def test_checkpoint_round_trip_resumes_identically(name, tmp_path: Path):
    make, batch, loss_fn = MODELS[name]
    torch.manual_seed(0)
    model = make().to("neuron")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)

    g = torch.Generator().manual_seed(2)

    def step(m, o):
        x, y = batch(g)
        loss = loss_fn(m(x.to("neuron")), y.to("neuron"))
        o.zero_grad()
        loss.backward()
        o.step()
        return loss.item()

    torch.manual_seed(1)
    step(model, opt)
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "rng": torch.neuron.get_rng_state(),
                "data_rng": g.get_state()}, tmp_path / "ck.pt")
    expected = step(model, opt)
    ck = torch.load(tmp_path / "ck.pt", map_location="neuron", weights_only=True)
    model2 = make().to("neuron")
    model2.load_state_dict(ck["model"])
    opt2 = torch.optim.AdamW(model2.parameters(), lr=1e-2)
    opt2.load_state_dict(ck["opt"])
    torch.neuron.set_rng_state(ck["rng"])
    g.set_state(ck["data_rng"].cpu())  # map_location moved it to the device, as it would on CUDA
    assert step(model2, opt2) == pytest.approx(expected, rel=1e-6, abs=1e-6)
