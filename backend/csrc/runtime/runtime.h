// The runtime of the emulated neuron device (PrivateUse1 on host memory): devices, streams and
// generators (device.cpp), the device and pinned allocators with their memory statistics
// (allocator.cpp) and op accounting (accounting.cpp). No op is registered here: see aten/.
#pragma once

#include <ATen/ATen.h>
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
// The emulated memory size of one device (bytes).
size_t device_total_memory();
// Poison (CUDA2NEURON_POISON): every new host allocation of the process — device memory and the
// CPU kernels' fresh results, which become device memory — is filled with NaN bytes (c10's junk
// fill), so a result that reads memory nobody wrote is NaN on every run instead of varying.
// Returns an error message, empty on success.
std::string set_poison(bool on);
bool poison();

// ---- generators (device.cpp) ----
const at::Generator& default_generator(c10::DeviceIndex idx);
at::Generator new_generator(c10::DeviceIndex idx);
// Registers the PrivateUse1 hooks (generators, pinned memory, storage resize) once.
void register_device_runtime();

// ---- accounting (accounting.cpp) ----
extern std::atomic<bool> g_accounting;

}  // namespace neuron
