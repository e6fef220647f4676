// The aten side of the emulated neuron device: every op that runs on neuron tensors.
//
//   fallback.cpp  the zero-copy boxed fallback (a CPU kernel on CPU aliases of the same memory)
//                 and the alias helpers below, which hand-written kernels use too
//   kernels.cpp   hand-written kernels: factories, views, copies, set_, convolution
//   rnn.cpp       fused LSTM/GRU cells (CUDA-only kernels in ATen)
//   autocast.cpp  the AutocastPrivateUse1 policy (CUDA's op lists)
//   register.cpp  every PrivateUse1 registration: the fallback and each unit's op list
//
// To add a device op: write the kernel in the unit it belongs to (or a new .cpp here) and add its
// m.impl(...) line to that unit's register_* function; register.cpp calls each of them once.
// The build compiles all of aten/ as one translation unit: names in the files' anonymous
// namespaces must not collide.
#pragma once

#include "runtime/runtime.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <initializer_list>

namespace torch {
class Library;
}  // namespace torch

namespace neuron {

// ---- tensors on host aliases (fallback.cpp) ----
// A CPU tensor sharing `t`'s StorageImpl (same sizes/strides/offset): the zero-copy view a CPU
// kernel runs on. Resizing it reallocates through the neuron allocator, so the memory stays neuron's.
at::Tensor cpu_alias(const at::Tensor& t);
// A neuron tensor over `cpu`'s memory (adopting it when the CPU kernel allocated it fresh).
at::Tensor to_neuron_result(const at::Tensor& cpu, c10::DeviceIndex idx);
// Copies sizes/strides/offset (and storage when a kernel swapped it) from alias back to the neuron tensor.
void sync_back(const at::Tensor& neuron_t, const at::Tensor& alias);
[[noreturn]] void raise_device_mismatch(const c10::Device& a, const c10::Device& b);
// Same-device check for hand-written kernels: returns the common neuron device.
c10::Device check_same_device(std::initializer_list<const at::Tensor*> ts, const char* op);

// ---- float64 / strict (fallback.cpp) ----
extern std::atomic<bool> g_strict;
void check_dtype(c10::ScalarType st, const char* op);

// ---- registrations (one per unit; called from register.cpp's TORCH_LIBRARY_IMPL blocks) ----
// The boxed fallback itself (for `_`), and the structured ops that run through it directly.
void neuron_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack);
// Sends every op with a CPU kernel and a composite-explicit kernel to the fallback; returns how many.
int register_cpu_kernels_over_composites(torch::Library& m);
// An efficient zero tensor (no memory, ZeroTensor key) on neuron device `idx` (kernels.cpp).
at::Tensor efficient_zero_tensor(c10::IntArrayRef size, c10::ScalarType dtype, c10::DeviceIndex idx);
void sparse_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack);
void register_kernels(torch::Library& m);
void register_rnn(torch::Library& m);

}  // namespace neuron
