// Op accounting interface shared by accounting.cpp and the Python binding.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace neuron {

struct CpuOpEntry {
  int64_t count = 0;
  int64_t elements = 0;
  std::vector<std::string> locations;
};

struct AccountingSnapshot {
  int64_t device_ops = 0, device_elements = 0, cpu_ops = 0, cpu_elements = 0, float64_ops = 0, complex_ops = 0;
  std::vector<std::pair<std::string, CpuOpEntry>> cpu_ops_detail;
  // Device ops on float64 / complex data (elements: the largest input's, summed), with their lines.
  std::vector<std::pair<std::string, CpuOpEntry>> float64_ops_detail, complex_ops_detail;
  // Device ops by name (count; elements: the largest input's, summed; no lines).
  std::vector<std::pair<std::string, CpuOpEntry>> device_ops_detail;
};

using LocateFn = std::string (*)();

void note_unsupported_dtype(c10::ScalarType st);
void accounting_set_locator(LocateFn fn);
void accounting_start();
void accounting_stop();
void accounting_reset();
AccountingSnapshot accounting_snapshot();

// torch_neuronx's op tracking (get_executed_ops / clear_op_tracking): device ops by name since the
// last clear, counted while tracking is on, whether or not the accounting is. Returns the old state.
bool op_tracking_set(bool on);
void op_tracking_clear();
std::vector<std::pair<std::string, int64_t>> op_tracking_executed();

}  // namespace neuron
