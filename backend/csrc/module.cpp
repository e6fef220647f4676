// Python binding of the emulated neuron device (loaded as cuda2neuron.backend's _C extension).
#include "aten/aten.h"
#include "runtime/accounting.h"
#include "runtime/runtime.h"

#include <Python.h>
#include <frameobject.h>
// pybind11 with torch's casters for Tensor and Generator, not <torch/extension.h>: that one is
// all of torch's C++ frontend (nn, optim, data) as well: 42% of this file's compile (31.7 CPU-s
// with it, 18.5 without; parsing alone 24.8 and 13.4).
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

namespace neuron {

namespace {

std::vector<std::string> g_skip_prefixes;

// "file.py:LINE" of the innermost Python frame that is user code (torch's own frames and the
// backend's are skipped). Called from the accounting callback, possibly on the autograd thread.
std::string locate_python_frame() {
  if (!Py_IsInitialized()) return {};
  pybind11::gil_scoped_acquire gil;
  PyFrameObject* f = PyEval_GetFrame();
  if (!f) return "<autograd engine>";
  Py_INCREF(f);
  std::string out;
  while (f) {
    PyCodeObject* code = PyFrame_GetCode(f);
    const char* fname = PyUnicode_AsUTF8(code->co_filename);
    std::string file = fname ? fname : "?";
    Py_DECREF(code);
    bool skip = file.rfind("<frozen", 0) == 0;
    for (const auto& p : g_skip_prefixes)
      if (!p.empty() && file.rfind(p, 0) == 0) skip = true;
    if (!skip) {
      out = file + ":" + std::to_string(PyFrame_GetLineNumber(f));
      Py_DECREF(f);
      break;
    }
    PyFrameObject* back = PyFrame_GetBack(f);
    Py_DECREF(f);
    f = back;
  }
  return out;
}

pybind11::dict stat_dict(const c10::CachingAllocator::Stat& s) {
  pybind11::dict d;
  d["current"] = s.current;
  d["peak"] = s.peak;
  d["allocated"] = s.allocated;
  d["freed"] = s.freed;
  return d;
}

pybind11::dict device_stats(c10::DeviceIndex idx) {
  auto s = device_allocator()->getDeviceStats(idx);
  pybind11::dict d;
  d["allocated_bytes"] = stat_dict(s.allocated_bytes[0]);
  d["reserved_bytes"] = stat_dict(s.reserved_bytes[0]);
  d["active_bytes"] = stat_dict(s.active_bytes[0]);
  d["requested_bytes"] = stat_dict(s.requested_bytes[0]);
  d["allocation"] = stat_dict(s.allocation[0]);
  d["segment"] = stat_dict(s.segment[0]);
  d["active"] = stat_dict(s.active[0]);
  d["num_device_alloc"] = s.num_device_alloc;
  d["num_device_free"] = s.num_device_free;
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["num_ooms"] = s.num_ooms;
  return d;
}

}  // namespace
}  // namespace neuron

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using namespace neuron;
  m.doc() = "Emulated neuron device (PrivateUse1 on host memory)";
  m.def("_register_runtime", &register_device_runtime);
  m.def("device_count", [] { return static_cast<int>(device_count()); });
  m.def("current_device", [] { return static_cast<int>(current_device()); });
  m.def("set_device", [](int i) { set_device(static_cast<c10::DeviceIndex>(i)); });
  m.def("default_generator", [](int i) { return default_generator(static_cast<c10::DeviceIndex>(i)); });
  m.def("cpu_alias", &cpu_alias, "CPU tensor sharing a neuron tensor's storage (same sizes/strides/offset)");
  m.def("set_strict", [](bool on) { g_strict = on; });
  m.def("strict", [] { return g_strict.load(); });
  m.def("set_poison", &set_poison, "Fill new host allocations with NaN bytes; returns an error message or ''");
  m.def("poison", &poison);
  m.def("device_stats", [](int i) { return device_stats(static_cast<c10::DeviceIndex>(i)); });
  m.def("reset_peak_stats", [](int i) { device_allocator()->resetPeakStats(static_cast<c10::DeviceIndex>(i)); });
  m.def("reset_accumulated_stats",
        [](int i) { device_allocator()->resetAccumulatedStats(static_cast<c10::DeviceIndex>(i)); });
  m.def("total_memory", [] { return device_total_memory(); });
  m.def("accounting_start", [](std::vector<std::string> skip) {
    g_skip_prefixes = std::move(skip);
    accounting_set_locator(&locate_python_frame);
    accounting_start();
  });
  m.def("accounting_stop", &accounting_stop);
  m.def("accounting_reset", &accounting_reset);
  m.def("accounting_snapshot", [] {
    auto s = accounting_snapshot();
    auto rows = [](const std::vector<std::pair<std::string, CpuOpEntry>>& detail) {
      pybind11::list ops;
      for (const auto& [name, e] : detail) ops.append(pybind11::make_tuple(name, e.count, e.elements, e.locations));
      return ops;
    };
    return pybind11::make_tuple(s.device_ops, s.device_elements, s.cpu_ops, s.cpu_elements, s.float64_ops,
                                s.complex_ops, rows(s.cpu_ops_detail), rows(s.float64_ops_detail),
                                rows(s.complex_ops_detail), rows(s.device_ops_detail));
  });
  m.def("op_tracking_set", &op_tracking_set, "Turn torch_neuronx's op tracking on or off; returns the old state");
  m.def("op_tracking_clear", &op_tracking_clear);
  m.def("op_tracking_executed", &op_tracking_executed, "(name, count) of the device ops since the last clear");
}
