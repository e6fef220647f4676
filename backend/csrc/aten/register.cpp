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

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_fallback>());
}
TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_fallback>());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_kernels(m);               // kernels.cpp: factories, views, copies, set_, convolution
  register_rnn(m);                   // rnn.cpp: fused LSTM/GRU cells
  // Last: it skips the ops registered above.
  register_cpu_kernels_over_composites(m);  // fallback.cpp: CPU kernels instead of composites
}

// Copies between devices carry conjugate / negative views as they are: the copy kernel (the CPU
// one, on host aliases) resolves the bits itself. Trap: without these fallthroughs the Conjugate
// fallback resolves the source first, and resolving is itself a copy — endless recursion (a stack
// overflow, i.e. a segfault, in fft.ifft and every other op whose result is a conjugate view).
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace
}  // namespace neuron
