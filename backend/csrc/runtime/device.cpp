// Devices, streams, events, generators and the PrivateUse1 hooks of the emulated neuron device.
// Execution is synchronous: streams are bookkeeping, events record host time.
#include "runtime/runtime.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <chrono>
#include <cstdlib>
#include <deque>
#include <mutex>

namespace neuron {

namespace {

c10::DeviceIndex read_device_count() {
  const char* env = std::getenv("CUDA2NEURON_DEVICE_COUNT");
  if (!env || !*env) return 2;
  char* end = nullptr;
  long v = std::strtol(env, &end, 10);
  // A bad value must not silently become 0 devices: fall back to the default and say so.
  if (end == env || *end != '\0' || v < 1 || v > 64) {
    TORCH_WARN("CUDA2NEURON_DEVICE_COUNT=", env, " is not an integer in 1..64; using 2 devices");
    return 2;
  }
  return static_cast<c10::DeviceIndex>(v);
}

thread_local c10::DeviceIndex t_current = 0;

// Current stream id per device, per thread (like CUDA's thread-local current stream).
thread_local std::vector<c10::StreamId> t_streams;
std::atomic<c10::StreamId> g_next_stream{1};

struct EventRecord {
  std::chrono::steady_clock::time_point when;
};

struct GuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kDev; }
  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = getDevice();
    if (d.index() != old.index()) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kDev, t_current); }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kDev, "expected a neuron device, got ", d);
    if (d.index() >= 0) set_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) t_current = d.index();
  }
  c10::Stream getStream(c10::Device d) const override {
    auto idx = d.index() < 0 ? t_current : d.index();
    if (static_cast<size_t>(idx) < t_streams.size())
      return c10::Stream(c10::Stream::UNSAFE, c10::Device(kDev, idx), t_streams[idx]);
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(kDev, idx));
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(kDev, d.index() < 0 ? t_current : d.index()));
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override { return getNewStream(d, 0); }
  c10::Stream getNewStream(c10::Device d, int) const override {
    auto idx = d.index() < 0 ? t_current : d.index();
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kDev, idx), g_next_stream++);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    auto old = getStream(s.device());
    auto idx = s.device_index();
    if (t_streams.size() < static_cast<size_t>(device_count())) t_streams.resize(device_count(), 0);
    t_streams[idx] = s.id();
    return old;
  }
  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }
  void record(void** event, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {
    if (!*event) *event = new EventRecord();
    static_cast<EventRecord*>(*event)->when = std::chrono::steady_clock::now();
  }
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<EventRecord*>(event);
  }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  void synchronizeEvent(void*) const override {}
  void synchronizeDevice(const c10::DeviceIndex) const override {}
  double elapsedTime(void* e1, void* e2, const c10::DeviceIndex) const override {
    TORCH_CHECK(e1 && e2, "Both events must be recorded before calculating elapsed time.");
    auto d = static_cast<EventRecord*>(e2)->when - static_cast<EventRecord*>(e1)->when;
    return std::chrono::duration<double, std::milli>(d).count();
  }
};

// The neuron generator IS a CPU (mt19937) generator with a neuron device tag, so that the same
// seed gives the same stream of numbers as the CPU. CPU kernels refuse it (device check), so the
// fallback hands them a CPU twin and copies the state back (see fallback.cpp).
struct NeuronGenerator final : at::CPUGeneratorImpl {
  explicit NeuronGenerator(c10::DeviceIndex idx) : at::CPUGeneratorImpl(c10::default_rng_seed_val) {
    device_ = c10::Device(kDev, idx);
    key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
  }
  NeuronGenerator* clone_impl() const override {
    auto* g = new NeuronGenerator(device_.index());
    g->set_engine(const_cast<NeuronGenerator*>(this)->engine());
    g->set_next_float_normal_sample(const_cast<NeuronGenerator*>(this)->next_float_normal_sample());
    g->set_next_double_normal_sample(const_cast<NeuronGenerator*>(this)->next_double_normal_sample());
    return g;
  }
};

std::once_flag g_gen_once;
std::deque<at::Generator> g_default_gens;

struct Hooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex idx) const override {
    return default_generator(idx);
  }
  at::Generator getNewGenerator(c10::DeviceIndex idx) const override { return new_generator(idx); }
  c10::Device getDeviceFromPtr(void*) const override { return c10::Device(kDev, t_current); }
  bool isPinnedPtr(const void* data) const override { return is_pinned_ptr(data); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return pinned_allocator(); }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(c10::DeviceIndex d) const override { set_device(d); }
  c10::DeviceIndex getCurrentDevice() const override { return t_current; }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    auto old = t_current;
    set_device(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override { return exchangeDevice(d); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    auto* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
    c10::DataPtr fresh = impl->allocator()->allocate(newsize);
    size_t keep = std::min(newsize, impl->nbytes());
    if (keep && impl->data()) std::memcpy(fresh.get(), impl->data(), keep);
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(newsize);
  }
};

Hooks g_hooks;

}  // namespace

c10::DeviceIndex device_count() {
  static c10::DeviceIndex n = read_device_count();
  return n;
}

void check_index(c10::DeviceIndex idx) {
  TORCH_CHECK(idx >= 0 && idx < device_count(), "Invalid device index ", static_cast<int>(idx),
              ": the neuron emulator has ", static_cast<int>(device_count()),
              " devices (set CUDA2NEURON_DEVICE_COUNT to change)");
}

c10::DeviceIndex current_device() { return t_current; }

void set_device(c10::DeviceIndex idx) {
  check_index(idx);
  t_current = idx;
}

const at::Generator& default_generator(c10::DeviceIndex idx) {
  std::call_once(g_gen_once, [] {
    for (c10::DeviceIndex i = 0; i < device_count(); ++i)
      g_default_gens.emplace_back(at::make_generator<NeuronGenerator>(i));
  });
  if (idx < 0) idx = t_current;
  check_index(idx);
  return g_default_gens[idx];
}

at::Generator new_generator(c10::DeviceIndex idx) {
  if (idx < 0) idx = t_current;
  check_index(idx);
  return at::make_generator<NeuronGenerator>(idx);
}

void register_device_runtime() {
  static bool done = [] {
    at::RegisterPrivateUse1HooksInterface(&g_hooks);
    return true;
  }();
  (void)done;
}

C10_REGISTER_GUARD_IMPL(PrivateUse1, GuardImpl);

}  // namespace neuron
