"""LSTM/GRU/RNN and convolutions (convolution_overrideable + backward) match CPU."""

from __future__ import annotations

import pytest
import torch

MODULES = {
    "lstm": lambda: torch.nn.LSTM(5, 7, num_layers=2, batch_first=True),
    "lstm_bidir": lambda: torch.nn.LSTM(5, 7, bidirectional=True),
    "gru": lambda: torch.nn.GRU(5, 7, batch_first=True),
    "rnn_tanh": lambda: torch.nn.RNN(5, 7),
    "lstm_cell": lambda: torch.nn.LSTMCell(5, 7),
    "gru_cell": lambda: torch.nn.GRUCell(5, 7),
    "conv1d": lambda: torch.nn.Conv1d(5, 4, 3, padding=1),
    "conv2d_groups": lambda: torch.nn.Conv2d(4, 6, 3, stride=2, groups=2),
    "conv_transpose2d": lambda: torch.nn.ConvTranspose2d(4, 3, 3, stride=2, output_padding=1),
    "conv3d_nobias": lambda: torch.nn.Conv3d(2, 2, 2, bias=False),
}
INPUTS = {
    "lstm": (3, 4, 5), "lstm_bidir": (4, 3, 5), "gru": (3, 4, 5), "rnn_tanh": (4, 3, 5), "lstm_cell": (3, 5),
    "gru_cell": (3, 5), "conv1d": (2, 5, 9), "conv2d_groups": (2, 4, 9, 9), "conv_transpose2d": (1, 4, 5, 5),
    "conv3d_nobias": (1, 2, 4, 4, 4),
}


def _first(out):
    while isinstance(out, tuple):
        out = out[0]
    return out


@pytest.mark.parametrize("name", list(MODULES))
def test_forward_and_backward_match_cpu(name):
    torch.manual_seed(0)
    ref_mod = MODULES[name]()
    dev_mod = MODULES[name]()
    dev_mod.load_state_dict(ref_mod.state_dict())
    dev_mod.to("neuron")
    x = torch.randn(*INPUTS[name])
    xr = x.clone().requires_grad_()
    xd = x.to("neuron").requires_grad_()
    out_ref = _first(ref_mod(xr))
    out_dev = _first(dev_mod(xd))
    assert out_dev.device.type == "neuron"
    torch.testing.assert_close(out_dev.detach().cpu(), out_ref.detach(), atol=1e-5, rtol=1e-4)
    out_ref.pow(2).sum().backward()
    out_dev.pow(2).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), xr.grad, atol=1e-5, rtol=1e-4)
    for (n, p_ref), p_dev in zip(ref_mod.named_parameters(), dev_mod.parameters()):
        assert p_dev.grad.device.type == "neuron", n
        torch.testing.assert_close(p_dev.grad.cpu(), p_ref.grad, atol=1e-4, rtol=1e-4)


def test_packed_sequence_lstm():
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(3, 4)
    seqs = [torch.randn(5, 3), torch.randn(2, 3)]
    packed = torch.nn.utils.rnn.pack_sequence(seqs)
    ref, _ = lstm(packed)
    lstm.to("neuron")
    out, _ = lstm(packed.to("neuron"))
    torch.testing.assert_close(out.data.cpu(), ref.data, atol=1e-5, rtol=1e-4)
