// Op accounting: counts the outermost aten ops per thread, classified as device ops (a neuron
// tensor or device among the inputs) or CPU ops (only CPU tensors). Counting happens in a global
// RecordFunction callback that exists only while accounting or op tracking is on, so it costs
// nothing when both are off. Op tracking (torch_neuronx.get_executed_ops) counts the device ops by
// name since its last clear, apart from the accounting: validate's accounting starts at the first
// recorded step and resets then, while a port clears its tracking whenever it likes.
// Ops that kernels call internally (depth > 0) are not counted: the user-level op is the unit.
// The autograd engine wraps every backward node in a FUNCTION-scope record that is a label, not
// an op ("autograd::engine::evaluate_function: MulBackward0", no inputs): it is transparent, so
// the ops a backward node runs count as the outermost ones. Treated as an op it hid every op
// autograd ran in backward from the residency audit.
#include "runtime/accounting.h"
#include "runtime/runtime.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <string_view>

namespace neuron {

std::atomic<bool> g_accounting{false};

namespace {

constexpr int64_t kLocatedOccurrences = 16;  // capture Python frames only for the first few
constexpr size_t kMaxLocations = 4;

struct Totals {
  std::atomic<int64_t> device_ops{0}, device_elements{0}, cpu_ops{0}, cpu_elements{0}, f64{0}, complex{0};
};
Totals g_totals;
std::mutex g_mu;
std::map<std::string, CpuOpEntry> g_cpu_ops;
// Device ops on float64 / complex data, per op with their first source lines: a count alone
// ("52 float64 ops") left the user to search the whole port for a schedule array indexed on
// the device (issue 40).
std::map<std::string, CpuOpEntry> g_f64_ops;
std::map<std::string, CpuOpEntry> g_complex_ops;
// Device ops by name: `count` / `elements` for the accounting (reset with it), `since_clear` for
// the op tracking. One entry serves both, so a device op costs one lookup. std::less<> finds a
// name by string_view: no std::string is built per op (the dominant cost of a lookup).
struct DeviceOpCount {
  int64_t count = 0, elements = 0, since_clear = 0;
};
std::map<std::string, DeviceOpCount, std::less<>> g_device_ops;
std::atomic<bool> g_tracking{false};
std::optional<at::CallbackHandle> g_handle;
LocateFn g_locate = nullptr;

enum class Kind : uint8_t { None, Device, Cpu };

thread_local int t_depth = 0;
thread_local Kind t_kind = Kind::None;
thread_local int64_t t_elements = 0;
thread_local bool t_f64 = false;
thread_local bool t_complex = false;

inline bool is_engine_label(const at::RecordFunction& fn) {
  static constexpr char kPrefix[] = "autograd::engine::";
  return std::strncmp(fn.name(), kPrefix, sizeof(kPrefix) - 1) == 0;
}

inline void look(const at::Tensor& t, bool& dev, bool& cpu, int64_t& elems, bool& cplx) {
  if (!t.defined()) return;
  if (t.device().type() == kDev) {
    dev = true;
    if (c10::isComplexType(t.scalar_type())) cplx = true;
  } else if (t.is_cpu()) {
    cpu = true;
  }
  elems = std::max<int64_t>(elems, t.numel());
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (is_engine_label(fn)) return nullptr;
  if (t_depth++ > 0) return nullptr;
  bool dev = false, cpu = false, cplx = false;
  int64_t elems = 0;
  for (const c10::IValue& v : fn.inputs()) {
    if (v.isTensor()) {
      look(v.toTensor(), dev, cpu, elems, cplx);
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) look(t, dev, cpu, elems, cplx);
    } else if (v.isDevice() && v.toDevice().type() == kDev) {
      dev = true;
    }
  }
  t_kind = dev ? Kind::Device : (cpu ? Kind::Cpu : Kind::None);
  t_elements = elems;
  t_f64 = false;
  t_complex = cplx;
  return nullptr;
}

// Counts one occurrence of op `name` in `ops` (elements: this thread's current op) and takes
// the Python frame for the first few only: a frame walk on every op would slow the run down.
void tally(std::map<std::string, CpuOpEntry>& ops, const std::string& name) {
  bool want_location = false;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    auto& e = ops[name];
    e.count++;
    e.elements += t_elements;
    want_location = g_locate && e.count <= kLocatedOccurrences && e.locations.size() < kMaxLocations;
  }
  if (!want_location) return;
  std::string loc = g_locate();
  if (loc.empty()) return;
  std::lock_guard<std::mutex> lk(g_mu);
  auto& e = ops[name];
  if (e.locations.size() < kMaxLocations && std::find(e.locations.begin(), e.locations.end(), loc) == e.locations.end())
    e.locations.push_back(loc);
}

void count_device_op(const char* name, bool counting, bool tracking) {
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = g_device_ops.find(std::string_view(name));
  if (it == g_device_ops.end()) it = g_device_ops.emplace(name, DeviceOpCount{}).first;
  if (counting) {
    it->second.count++;
    it->second.elements += t_elements;
  }
  if (tracking) it->second.since_clear++;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext*) {
  if (is_engine_label(fn)) return;
  if (--t_depth > 0) return;
  // The callback runs while either user is on: each part counts only for its own.
  const bool counting = g_accounting.load(std::memory_order_relaxed);
  const bool tracking = g_tracking.load(std::memory_order_relaxed);
  if (t_kind == Kind::Device) {
    count_device_op(fn.name(), counting, tracking);
  }
  if (!counting) {
    t_kind = Kind::None;
    return;
  }
  if (t_kind == Kind::Device) {
    g_totals.device_ops++;
    g_totals.device_elements += t_elements;
    if (t_f64) {
      g_totals.f64++;
      tally(g_f64_ops, fn.name());
    }
    if (t_complex) {
      g_totals.complex++;
      tally(g_complex_ops, fn.name());
    }
  } else if (t_kind == Kind::Cpu) {
    g_totals.cpu_ops++;
    g_totals.cpu_elements += t_elements;
    tally(g_cpu_ops, fn.name());
  }
  t_kind = Kind::None;
}

}  // namespace

void note_unsupported_dtype(c10::ScalarType st) {
  if (st == at::kDouble) t_f64 = true;
  else if (c10::isComplexType(st)) t_complex = true;
}

void accounting_set_locator(LocateFn fn) { g_locate = fn; }

namespace {

// The callback exists while the accounting or the op tracking is on (caller holds g_mu).
void update_callback() {
  const bool want = g_accounting || g_tracking;
  if (want && !g_handle) {
    g_handle = at::addGlobalCallback(
        at::RecordFunctionCallback(&on_start, &on_end).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
  } else if (!want && g_handle) {
    at::removeCallback(*g_handle);
    g_handle.reset();
  }
}

}  // namespace

void accounting_start() {
  std::lock_guard<std::mutex> lk(g_mu);
  g_accounting = true;
  update_callback();
}

void accounting_stop() {
  std::lock_guard<std::mutex> lk(g_mu);
  g_accounting = false;
  update_callback();
}

bool op_tracking_set(bool on) {
  std::lock_guard<std::mutex> lk(g_mu);
  const bool was = g_tracking.exchange(on);
  update_callback();
  return was;
}

void op_tracking_clear() {
  std::lock_guard<std::mutex> lk(g_mu);
  for (auto& entry : g_device_ops) entry.second.since_clear = 0;
}

std::vector<std::pair<std::string, int64_t>> op_tracking_executed() {
  std::lock_guard<std::mutex> lk(g_mu);
  std::vector<std::pair<std::string, int64_t>> ops;
  for (const auto& [name, c] : g_device_ops)
    if (c.since_clear > 0) ops.emplace_back(name, c.since_clear);
  return ops;
}

void accounting_reset() {
  std::lock_guard<std::mutex> lk(g_mu);
  g_totals.device_ops = 0;
  g_totals.device_elements = 0;
  g_totals.cpu_ops = 0;
  g_totals.cpu_elements = 0;
  g_totals.f64 = 0;
  g_totals.complex = 0;
  g_cpu_ops.clear();
  g_f64_ops.clear();
  g_complex_ops.clear();
  for (auto& entry : g_device_ops) entry.second.count = entry.second.elements = 0;  // the tracking keeps its own
}

AccountingSnapshot accounting_snapshot() {
  AccountingSnapshot s;
  s.device_ops = g_totals.device_ops;
  s.device_elements = g_totals.device_elements;
  s.cpu_ops = g_totals.cpu_ops;
  s.cpu_elements = g_totals.cpu_elements;
  s.float64_ops = g_totals.f64;
  s.complex_ops = g_totals.complex;
  std::lock_guard<std::mutex> lk(g_mu);
  for (const auto& [k, v] : g_cpu_ops) s.cpu_ops_detail.emplace_back(k, v);
  for (const auto& [k, v] : g_f64_ops) s.float64_ops_detail.emplace_back(k, v);
  for (const auto& [k, v] : g_complex_ops) s.complex_ops_detail.emplace_back(k, v);
  for (const auto& [k, v] : g_device_ops) {
    if (v.count == 0) continue;
    CpuOpEntry e;
    e.count = v.count;
    e.elements = v.elements;
    s.device_ops_detail.emplace_back(k, std::move(e));
  }
  return s;
}

}  // namespace neuron
