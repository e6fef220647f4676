// Fused RNN cells. ATen's LSTM/GRU cells take the fused path on PrivateUse1 (as on CUDA), and
// _thnn_fused_{lstm,gru}_cell exist only as CUDA kernels: without these, every nn.LSTM/nn.GRU on
// the device fails. The math runs on CPU aliases with plain ATen ops.
#include "aten/aten.h"

#include <torch/library.h>

namespace neuron {
namespace {

at::Tensor host(const at::Tensor& t) { return t.defined() && t.device().type() == kDev ? cpu_alias(t) : t; }
at::Tensor host(const std::optional<at::Tensor>& t) { return t && t->defined() ? host(*t) : at::Tensor(); }
at::Tensor dev(const at::Tensor& t, c10::DeviceIndex idx) { return t.defined() ? to_neuron_result(t, idx) : t; }

// Workspace layout (ours; only our backward reads it): the activated gates [i, f, g, o].
std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell(const at::Tensor& input_gates,
                                                               const at::Tensor& hidden_gates, const at::Tensor& cx,
                                                               const std::optional<at::Tensor>& input_bias,
                                                               const std::optional<at::Tensor>& hidden_bias) {
  const at::Tensor* ib = input_bias && input_bias->defined() ? &*input_bias : nullptr;
  const at::Tensor* hb = hidden_bias && hidden_bias->defined() ? &*hidden_bias : nullptr;
  auto d = check_same_device({&input_gates, &hidden_gates, &cx, ib, hb}, "_thnn_fused_lstm_cell");
  at::Tensor gates = host(input_gates) + host(hidden_gates);
  if (ib) gates = gates + host(*ib);
  if (hb) gates = gates + host(*hb);
  auto chunks = gates.chunk(4, 1);
  at::Tensor i = chunks[0].sigmoid(), f = chunks[1].sigmoid(), g = chunks[2].tanh(), o = chunks[3].sigmoid();
  at::Tensor cy = f * host(cx) + i * g;
  at::Tensor hy = o * cy.tanh();
  at::Tensor workspace = at::cat({i, f, g, o}, 1);
  return {dev(hy, d.index()), dev(cy, d.index()), dev(workspace, d.index())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell_backward(
    const std::optional<at::Tensor>& grad_hy, const std::optional<at::Tensor>& grad_cy, const at::Tensor& cx,
    const at::Tensor& cy, const at::Tensor& workspace, bool has_bias) {
  const at::Tensor* ghy = grad_hy && grad_hy->defined() ? &*grad_hy : nullptr;
  const at::Tensor* gcy = grad_cy && grad_cy->defined() ? &*grad_cy : nullptr;
  auto d = check_same_device({ghy, gcy, &cx, &cy, &workspace}, "_thnn_fused_lstm_cell_backward_impl");
  auto ws = host(workspace).chunk(4, 1);
  const at::Tensor &i = ws[0], &f = ws[1], &g = ws[2], &o = ws[3];
  at::Tensor tcy = host(cy).tanh();
  at::Tensor gc = gcy ? host(*gcy).clone() : at::zeros_like(tcy);
  at::Tensor go = at::zeros_like(tcy);
  if (ghy) {
    at::Tensor gh = host(*ghy);
    gc = gc + gh * o * (1 - tcy * tcy);
    go = gh * tcy * o * (1 - o);
  }
  at::Tensor gi = gc * g * i * (1 - i);
  at::Tensor gf = gc * host(cx) * f * (1 - f);
  at::Tensor gg = gc * i * (1 - g * g);
  at::Tensor grad_gates = at::cat({gi, gf, gg, go}, 1);
  at::Tensor grad_cx = gc * f;
  at::Tensor grad_bias = has_bias ? grad_gates.sum(0) : at::Tensor();
  return {dev(grad_gates, d.index()), dev(grad_cx, d.index()), dev(grad_bias, d.index())};
}

// Workspace layout (ours): [r, z, n, hidden n-gate (before r), hx].
std::tuple<at::Tensor, at::Tensor> fused_gru_cell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                                  const at::Tensor& hx, const std::optional<at::Tensor>& input_bias,
                                                  const std::optional<at::Tensor>& hidden_bias) {
  const at::Tensor* ib = input_bias && input_bias->defined() ? &*input_bias : nullptr;
  const at::Tensor* hb = hidden_bias && hidden_bias->defined() ? &*hidden_bias : nullptr;
  auto d = check_same_device({&input_gates, &hidden_gates, &hx, ib, hb}, "_thnn_fused_gru_cell");
  at::Tensor ig = host(input_gates), hg = host(hidden_gates);
  if (ib) ig = ig + host(*ib);
  if (hb) hg = hg + host(*hb);
  auto ic = ig.chunk(3, 1);
  auto hc = hg.chunk(3, 1);
  at::Tensor r = (ic[0] + hc[0]).sigmoid();
  at::Tensor z = (ic[1] + hc[1]).sigmoid();
  at::Tensor n = (ic[2] + r * hc[2]).tanh();
  at::Tensor h = host(hx);
  at::Tensor hy = n + z * (h - n);
  at::Tensor workspace = at::cat({r, z, n, hc[2], h}, 1);
  return {dev(hy, d.index()), dev(workspace, d.index())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_gru_cell_backward(
    const at::Tensor& grad_hy, const at::Tensor& workspace, bool has_bias) {
  auto d = check_same_device({&grad_hy, &workspace}, "_thnn_fused_gru_cell_backward");
  auto ws = host(workspace).chunk(5, 1);
  const at::Tensor &r = ws[0], &z = ws[1], &n = ws[2], &hn = ws[3], &hx = ws[4];
  at::Tensor gh = host(grad_hy);
  at::Tensor gz = gh * (hx - n) * z * (1 - z);
  at::Tensor gn = gh * (1 - z) * (1 - n * n);
  at::Tensor gr = gn * hn * r * (1 - r);
  at::Tensor grad_input_gates = at::cat({gr, gz, gn}, 1);
  at::Tensor grad_hidden_gates = at::cat({gr, gz, gn * r}, 1);
  at::Tensor grad_hx = gh * z;
  at::Tensor gib = has_bias ? grad_input_gates.sum(0) : at::Tensor();
  at::Tensor ghb = has_bias ? grad_hidden_gates.sum(0) : at::Tensor();
  auto i = d.index();
  return {dev(grad_input_gates, i), dev(grad_hidden_gates, i), dev(grad_hx, i), dev(gib, i), dev(ghb, i)};
}

}  // namespace

void register_rnn(torch::Library& m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(fused_lstm_cell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(fused_lstm_cell_backward));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(fused_gru_cell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(fused_gru_cell_backward));
}

}  // namespace neuron
