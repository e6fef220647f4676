// Device and pinned-host allocators. Device memory is plain host memory; what makes it "device"
// memory is the DataPtr's device and the per-device statistics that torch.neuron.memory_* and
// torch.accelerator.memory_* read (they go through c10::DeviceAllocator, hence the base class).
#include "runtime/runtime.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <dlfcn.h>

#include <mutex>
#include <unordered_set>

namespace neuron {
namespace {

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

constexpr int kMaxDevices = 64;

struct Stats {
  std::mutex mu;
  DeviceStats s;
};
Stats g_stats[kMaxDevices];

void stat_add(Stat& st, int64_t amount) {
  st.current += amount;
  st.peak = std::max(st.current, st.peak);
  if (amount > 0) st.allocated += amount; else st.freed += -amount;
}

void record_alloc(c10::DeviceIndex d, int64_t n) {
  auto& g = g_stats[d];
  std::lock_guard<std::mutex> lk(g.mu);
  auto all = static_cast<size_t>(StatType::AGGREGATE);
  stat_add(g.s.allocated_bytes[all], n);
  stat_add(g.s.reserved_bytes[all], n);
  stat_add(g.s.active_bytes[all], n);
  stat_add(g.s.requested_bytes[all], n);
  stat_add(g.s.allocation[all], 1);
  stat_add(g.s.segment[all], 1);
  stat_add(g.s.active[all], 1);
  g.s.num_device_alloc++;
}

void record_free(c10::DeviceIndex d, int64_t n) {
  auto& g = g_stats[d];
  std::lock_guard<std::mutex> lk(g.mu);
  auto all = static_cast<size_t>(StatType::AGGREGATE);
  stat_add(g.s.allocated_bytes[all], -n);
  stat_add(g.s.reserved_bytes[all], -n);
  stat_add(g.s.active_bytes[all], -n);
  stat_add(g.s.requested_bytes[all], -n);
  stat_add(g.s.allocation[all], -1);
  stat_add(g.s.segment[all], -1);
  stat_add(g.s.active[all], -1);
  g.s.num_device_free++;
}

// Context of every neuron DataPtr: the byte count and device are needed at free time.
struct Block {
  void* data;
  size_t nbytes;
  c10::DeviceIndex device;
};

void free_block(void* ctx) {
  auto* b = static_cast<Block*>(ctx);
  record_free(b->device, static_cast<int64_t>(b->nbytes));
  c10::free_cpu(b->data);
  delete b;
}

// Memory a CPU kernel allocated, adopted as neuron memory: keeps the original DataPtr (and its
// deleter) alive and only adds the accounting.
struct Adopted {
  c10::DataPtr orig;
  size_t nbytes;
  c10::DeviceIndex device;
};

void free_adopted(void* ctx) {
  auto* a = static_cast<Adopted*>(ctx);
  record_free(a->device, static_cast<int64_t>(a->nbytes));
  delete a;  // runs the CPU allocator's own deleter
}

struct NeuronAllocator final : c10::DeviceAllocator {
  c10::DataPtr allocate(size_t nbytes) override {
    c10::DeviceIndex d = current_device();
    void* data = nbytes ? c10::alloc_cpu(nbytes) : nullptr;
    auto* b = new Block{data, nbytes, d};
    record_alloc(d, static_cast<int64_t>(nbytes));
    return {data, b, &free_block, c10::Device(kDev, d)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
  bool initialized() override { return true; }
  // Nothing is cached: every free returns memory to the host at once, so reserved == allocated.
  void emptyCache(c10::MempoolId_t) override {}
  void recordStream(const c10::DataPtr&, c10::Stream) override {}
  DeviceStats getDeviceStats(c10::DeviceIndex d) override {
    check_index(d);
    std::lock_guard<std::mutex> lk(g_stats[d].mu);
    return g_stats[d].s;
  }
  void resetAccumulatedStats(c10::DeviceIndex d) override {
    check_index(d);
    auto& g = g_stats[d];
    std::lock_guard<std::mutex> lk(g.mu);
    for (auto* arr : {&g.s.allocation, &g.s.segment, &g.s.active, &g.s.inactive_split,
                      &g.s.allocated_bytes, &g.s.reserved_bytes, &g.s.active_bytes,
                      &g.s.inactive_split_bytes, &g.s.requested_bytes}) {
      for (auto& st : *arr) st.reset_accumulated();
    }
    g.s.num_alloc_retries = 0;
    g.s.num_ooms = 0;
    g.s.num_device_alloc = 0;
    g.s.num_device_free = 0;
  }
  void resetPeakStats(c10::DeviceIndex d) override {
    check_index(d);
    auto& g = g_stats[d];
    std::lock_guard<std::mutex> lk(g.mu);
    for (auto* arr : {&g.s.allocation, &g.s.segment, &g.s.active, &g.s.inactive_split,
                      &g.s.allocated_bytes, &g.s.reserved_bytes, &g.s.active_bytes,
                      &g.s.inactive_split_bytes, &g.s.requested_bytes}) {
      for (auto& st : *arr) st.reset_peak();
    }
  }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex d) override {
    check_index(d);
    size_t total = total_memory();
    size_t used;
    {
      std::lock_guard<std::mutex> lk(g_stats[d].mu);
      used = static_cast<size_t>(g_stats[d].s.reserved_bytes[0].current);
    }
    return {used < total ? total - used : 0, total};
  }
  static size_t total_memory() { return size_t(16) << 30; }  // what get_device_properties reports
};

NeuronAllocator g_allocator;

// Pinned host memory: ordinary host memory remembered in a set so is_pinned() can answer.
std::mutex g_pinned_mu;
std::unordered_set<const void*> g_pinned;

void free_pinned(void* p) {
  {
    std::lock_guard<std::mutex> lk(g_pinned_mu);
    g_pinned.erase(p);
  }
  c10::free_cpu(p);
}

struct PinnedAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    void* data = nbytes ? c10::alloc_cpu(nbytes) : nullptr;
    if (data) {
      std::lock_guard<std::mutex> lk(g_pinned_mu);
      g_pinned.insert(data);
    }
    return {data, data, &free_pinned, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

PinnedAllocator g_pinned_allocator;

}  // namespace

c10::DeviceAllocator* device_allocator() { return &g_allocator; }
c10::Allocator* pinned_allocator() { return &g_pinned_allocator; }

size_t device_total_memory() { return NeuronAllocator::total_memory(); }

bool is_pinned_ptr(const void* p) {
  if (!p) return false;
  std::lock_guard<std::mutex> lk(g_pinned_mu);
  // A view into pinned memory points inside the block: the set holds block starts only, which
  // matches how pin_memory() is used (whole tensors), and is documented.
  return g_pinned.count(p) != 0;
}

void adopt_cpu_storage(c10::StorageImpl* storage, c10::DeviceIndex idx) {
  size_t n = storage->nbytes();
  c10::DataPtr orig = storage->set_data_ptr(c10::DataPtr());
  void* data = orig.get();
  auto* a = new Adopted{std::move(orig), n, idx};
  record_alloc(idx, static_cast<int64_t>(n));
  storage->set_data_ptr_noswap(c10::DataPtr(data, a, &free_adopted, c10::Device(kDev, idx)));
  // Later resizes of this storage must allocate neuron memory too.
  storage->set_allocator(&g_allocator);
}

namespace {

// c10's allocation flags (alloc_cpu fills every new block with 0x7fedbeef when junk fill is on: NaN
// as float32, every other bfloat16/float16 element NaN). They are exported from libc10 but declared
// in no header, so they are looked up at run time: a torch without them loses only the poison.
bool* c10_flag(const char* name) {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void*>(&c10::alloc_cpu), &info) || !info.dli_fname) return nullptr;
  void* lib = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (!lib) return nullptr;
  auto* flag = static_cast<bool*>(dlsym(lib, name));
  dlclose(lib);  // drops the reference RTLD_NOLOAD took; libc10 stays loaded
  return flag;
}

std::mutex g_poison_mu;

}  // namespace

std::string set_poison(bool on) {
  std::lock_guard<std::mutex> lk(g_poison_mu);
  static bool* junk = c10_flag("FLAGS_caffe2_cpu_allocator_do_junk_fill");
  static bool* zero = c10_flag("FLAGS_caffe2_cpu_allocator_do_zero_fill");
  if (!junk) return "this torch's CPU allocator has no junk fill (FLAGS_caffe2_cpu_allocator_do_junk_fill)";
  // Trap: alloc_cpu aborts the process (a fatal CHECK) when both fills are on.
  if (on && zero && __atomic_load_n(zero, __ATOMIC_SEQ_CST))
    return "the CPU allocator's zero fill is on (caffe2_cpu_allocator_do_zero_fill); it excludes the poison";
  // Other threads read the flag unsynchronised in alloc_cpu: the store is atomic, the value a bool.
  __atomic_store_n(junk, on, __ATOMIC_SEQ_CST);
  return {};
}

bool poison() {
  static bool* junk = c10_flag("FLAGS_caffe2_cpu_allocator_do_junk_fill");
  return junk && __atomic_load_n(junk, __ATOMIC_SEQ_CST);
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

}  // namespace neuron
