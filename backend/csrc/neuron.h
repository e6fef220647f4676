// Shared declarations of the emulated neuron device (PrivateUse1 on host memory).
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace neuron {

constexpr c10::DeviceType kDev = c10::DeviceType::PrivateUse1;

// ---- devices (device.cpp) ----
c10::DeviceIndex device_count();
c10::DeviceIndex current_device();
void set_device(c10::DeviceIndex idx);
void check_index(c10::DeviceIndex idx);

// ---- allocator (allocator.cpp) ----
c10::DeviceAllocator* device_allocator();
c10::Allocator* pinned_allocator();
bool is_pinned_ptr(const void* p);
// Adopts host memory allocated by the CPU allocator (a CPU kernel's fresh output) as neuron memory
// of device `idx`: relabels the DataPtr and wraps its deleter so byte counts stay true.
void adopt_cpu_storage(c10::StorageImpl* storage, c10::DeviceIndex idx);

// ---- generators (device.cpp) ----
const at::Generator& default_generator(c10::DeviceIndex idx);
at::Generator new_generator(c10::DeviceIndex idx);

// ---- tensors (fallback.cpp) ----
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

// ---- accounting (accounting.cpp) ----
extern std::atomic<bool> g_accounting;

}  // namespace neuron
