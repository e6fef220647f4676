// Every PrivateUse1 registration of the emulated neuron device, in one place (AutocastPrivateUse1
// is autocast.cpp's). Each unit lists its own ops next to its kernels in a register_* function;
// this file only says which dispatch key they go to. An op with no kernel of ours runs the CPU
// kernel through the boxed fallback.
#include "aten/aten.h"

#include <torch/library.h>

namespace neuron {
namespace {

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&neuron_fallback>());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_kernels(m);               // kernels.cpp: factories, views, copies, set_, convolution
  register_rnn(m);                   // rnn.cpp: fused LSTM/GRU cells
  register_structured_fallbacks(m);  // fallback.cpp: structured ops sent straight to the fallback
}

}  // namespace
}  // namespace neuron
