// The zero-copy boxed fallback: an op on neuron tensors runs the CPU kernel on CPU aliases of the
// very same memory. Aliases share the neuron StorageImpl (so a kernel that resizes an out= tensor
// reallocates through the neuron allocator), fresh CPU results are adopted as neuron memory.
#include "aten/aten.h"
#include "runtime/accounting.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

namespace neuron {

std::atomic<bool> g_strict{false};

namespace {

// The context of an alias storage's DataPtr: it keeps the neuron StorageImpl (and so its memory)
// alive while CPU views of it exist, and lets results that are views be mapped back to it.
struct AliasCtx {
  c10::intrusive_ptr<c10::StorageImpl> target;
};

void delete_alias_ctx(void* ctx) { delete static_cast<AliasCtx*>(ctx); }

// Allocator of alias storages: host memory, marked so that sync_back recognises a resized alias.
struct AliasAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override { return c10::GetAllocator(c10::kCPU)->allocate(n); }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};
AliasAllocator g_alias_allocator;

// The neuron StorageImpl a CPU storage aliases, or nullptr.
c10::StorageImpl* alias_target(const c10::StorageImpl* s) {
  if (s->data_ptr().get_deleter() != &delete_alias_ctx) return nullptr;
  return static_cast<AliasCtx*>(s->data_ptr().get_context())->target.get();
}

// A CPU StorageImpl over a neuron storage's memory. Trap: sharing the neuron StorageImpl itself
// would not do — a CPU kernel's internal views (as_strided, view) take their device from the
// storage and would come out as neuron tensors mixed with CPU ones.
c10::Storage alias_storage(const c10::Storage& neuron_storage) {
  auto* impl = neuron_storage.unsafeGetStorageImpl();
  auto* ctx = new AliasCtx{c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(impl)};
  c10::DataPtr ptr(const_cast<void*>(impl->data()), ctx, &delete_alias_ctx, c10::Device(c10::kCPU));
  // Resizable through the CPU allocator: a kernel resizing an out= alias gets fresh host memory,
  // which sync_back then moves into the neuron storage (as a device resize would).
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), impl->nbytes(),
                                                            std::move(ptr), &g_alias_allocator, true));
}

// The dispatch keys of a tensor on `backend` that carries `like`'s ZeroTensor marker. Trap: an
// efficient zero tensor (autograd's zero gradients) has storage without memory; dropping the
// marker on the way between CPU and neuron makes a tensor whose data pointer is null (a segfault).
c10::DispatchKeySet keys_like(c10::DispatchKey backend, const at::Tensor& like) {
  c10::DispatchKeySet ks(backend);
  if (like._is_zerotensor()) ks = ks | c10::DispatchKeySet(c10::DispatchKey::ZeroTensor);
  return ks;
}

at::Tensor neuron_tensor_on(c10::Storage storage, const at::Tensor& like) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(storage), keys_like(c10::DispatchKey::PrivateUse1, like),
                                                   like.dtype());
  impl->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  if (like.is_conj()) impl->_set_conj(true);
  if (like.is_neg()) impl->_set_neg(true);
  return at::Tensor(std::move(impl));
}

struct DeviceScope {
  c10::DeviceIndex prev;
  explicit DeviceScope(c10::DeviceIndex d) : prev(current_device()) {
    if (d != prev) set_device(d);
  }
  ~DeviceScope() {
    if (current_device() != prev) set_device(prev);
  }
};

bool is_index_op(const c10::OperatorHandle& op) {
  const auto& n = op.schema().name();
  return n == "aten::index" || n == "aten::index_put_" || n == "aten::index_put" ||
         n == "aten::_index_put_impl_" || n == "aten::_unsafe_index" || n == "aten::_unsafe_index_put";
}

bool is_generator_type(const c10::TypePtr& t) {
  if (t->kind() == c10::TypeKind::GeneratorType) return true;
  if (auto o = t->cast<c10::OptionalType>()) return o->getElementType()->kind() == c10::TypeKind::GeneratorType;
  return false;
}

// Copies an mt19937 generator's full state (engine + cached normal samples).
void copy_gen_state(at::CPUGeneratorImpl* dst, at::CPUGeneratorImpl* src) {
  dst->set_engine(src->engine());
  dst->set_next_float_normal_sample(src->next_float_normal_sample());
  dst->set_next_double_normal_sample(src->next_double_normal_sample());
}

struct GenSwap {
  at::Generator neuron_gen;
  at::Generator twin;
};

struct Scan {
  std::optional<c10::Device> dev;
  std::optional<c10::Device> other;  // first non-scalar tensor on another device
};

inline void scan_tensor(const at::Tensor& t, Scan& s) {
  if (!t.defined()) return;
  auto d = t.device();
  if (d.type() == kDev) {
    if (!s.dev) s.dev = d;
    else if (*s.dev != d && !s.other) s.other = d;
  } else if (d.is_cpu() && t.dim() == 0) {
    // 0-dim CPU tensors are scalars, allowed next to device tensors as on CUDA.
  } else if (!s.other) {
    s.other = d;
  }
}

}  // namespace

void neuron_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const auto& args = schema.arguments();
  const size_t nargs = args.size();
  const size_t base = stack->size() - nargs;
  Scan scan;
  bool has_gen = false;
  int device_arg = -1;
  for (size_t i = 0; i < nargs; ++i) {
    auto& v = (*stack)[base + i];
    if (v.isTensor()) {
      scan_tensor(v.toTensor(), scan);
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) scan_tensor(t, scan);
    } else if (v.isOptionalTensorList()) {
      if (is_index_op(op)) continue;  // CPU index tensors are accepted on devices, as on CUDA
      for (const auto& ot : v.toOptionalTensorList()) {
        std::optional<at::Tensor> t = ot;
        if (t) scan_tensor(*t, scan);
      }
    } else if (v.isGenerator()) {
      has_gen = true;
    } else if (v.isDevice() && v.toDevice().type() == kDev) {
      device_arg = static_cast<int>(i);
    }
  }
  if (!scan.dev) {
    if (device_arg >= 0) {
      auto d = (*stack)[base + device_arg].toDevice();
      scan.dev = c10::Device(kDev, d.has_index() ? d.index() : current_device());
    } else if (has_gen) {
      TORCH_CHECK(false, op.schema().name(), ": expected a 'cpu' device type for generator but found 'neuron'");
    } else {
      TORCH_CHECK(false, op.schema().name(), " reached the neuron backend without a neuron tensor");
    }
  }
  if (scan.other) raise_device_mismatch(*scan.dev, *scan.other);
  const c10::Device dev = *scan.dev;
  DeviceScope scope(dev.index());

  // Replace neuron tensors by CPU aliases; remember which alias belongs to which original.
  // The aliases are kept alive here: the kernel pops its arguments off the stack.
  c10::SmallVector<std::pair<at::Tensor, at::Tensor>, 8> originals;
  auto alias_of = [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined() || t.device().type() != kDev) return t;
    for (auto& p : originals)  // the same tensor twice (mm(a, a), out=self) gets the same alias
      if (p.second.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return p.first;
    if (g_strict.load(std::memory_order_relaxed)) check_dtype(t.scalar_type(), op.schema().name().c_str());
    at::Tensor a = cpu_alias(t);
    originals.emplace_back(a, t);
    return a;
  };
  c10::SmallVector<GenSwap, 2> gens;
  const bool seeded = op.hasTag(at::Tag::nondeterministic_seeded);
  bool saw_gen_param = false;
  for (size_t i = 0; i < nargs; ++i) {
    auto& v = (*stack)[base + i];
    if (v.isTensor()) {
      v = alias_of(v.toTensor());
    } else if (v.isTensorList()) {
      auto list = v.toTensorList();
      c10::List<at::Tensor> out;
      out.reserve(list.size());
      for (const at::Tensor& t : list) out.push_back(alias_of(t));
      v = out;
    } else if (v.isOptionalTensorList()) {
      auto list = v.toOptionalTensorList();
      c10::List<std::optional<at::Tensor>> out;
      out.reserve(list.size());
      for (const auto& ot : list) {
        std::optional<at::Tensor> t = ot;
        out.push_back(t ? std::optional<at::Tensor>(alias_of(*t)) : std::nullopt);
      }
      v = out;
    } else if (device_arg == static_cast<int>(i)) {
      v = c10::IValue(c10::Device(c10::kCPU));
    } else if (seeded && (v.isGenerator() || v.isNone()) && is_generator_type(args[i].type())) {
      saw_gen_param = true;
      at::Generator g = v.isGenerator() ? v.toGenerator() : default_generator(dev.index());
      if (g.device().type() != kDev) continue;  // a CPU generator: the CPU kernel takes it as is
      at::Generator twin = at::make_generator<at::CPUGeneratorImpl>();
      {
        std::lock_guard<std::mutex> lk(g.mutex());
        copy_gen_state(twin.get<at::CPUGeneratorImpl>(), g.get<at::CPUGeneratorImpl>());
      }
      v = c10::IValue(twin);
      gens.push_back({g, twin});
    } else if (v.isGenerator() && v.toGenerator().device().type() == kDev) {
      at::Generator g = v.toGenerator();
      at::Generator twin = at::make_generator<at::CPUGeneratorImpl>();
      {
        std::lock_guard<std::mutex> lk(g.mutex());
        copy_gen_state(twin.get<at::CPUGeneratorImpl>(), g.get<at::CPUGeneratorImpl>());
      }
      v = c10::IValue(twin);
      gens.push_back({g, twin});
    }
  }

  // Seeded ops without a generator parameter (native_dropout, ...) draw from the CPU default
  // generator: lend it the neuron generator's state for the call. Trap: another thread drawing
  // from the CPU default generator at the same moment would see the neuron state.
  std::optional<GenSwap> global_swap;
  if (seeded && !saw_gen_param) {
    at::Generator cpu_default = at::detail::getDefaultCPUGenerator();
    at::Generator saved = at::make_generator<at::CPUGeneratorImpl>();
    at::Generator ng = default_generator(dev.index());
    {
      std::lock_guard<std::mutex> lk(cpu_default.mutex());
      copy_gen_state(saved.get<at::CPUGeneratorImpl>(), cpu_default.get<at::CPUGeneratorImpl>());
      std::lock_guard<std::mutex> lk2(ng.mutex());
      copy_gen_state(cpu_default.get<at::CPUGeneratorImpl>(), ng.get<at::CPUGeneratorImpl>());
    }
    global_swap = GenSwap{ng, saved};
  }

  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  } catch (...) {
    if (global_swap) {
      at::Generator cpu_default = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lk(cpu_default.mutex());
      copy_gen_state(cpu_default.get<at::CPUGeneratorImpl>(), global_swap->twin.get<at::CPUGeneratorImpl>());
    }
    throw;
  }

  for (auto& gs : gens) {
    std::lock_guard<std::mutex> lk(gs.neuron_gen.mutex());
    copy_gen_state(gs.neuron_gen.get<at::CPUGeneratorImpl>(), gs.twin.get<at::CPUGeneratorImpl>());
  }
  if (global_swap) {
    at::Generator cpu_default = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lk(cpu_default.mutex());
    {
      std::lock_guard<std::mutex> lk2(global_swap->neuron_gen.mutex());
      copy_gen_state(global_swap->neuron_gen.get<at::CPUGeneratorImpl>(), cpu_default.get<at::CPUGeneratorImpl>());
    }
    copy_gen_state(cpu_default.get<at::CPUGeneratorImpl>(), global_swap->twin.get<at::CPUGeneratorImpl>());
  }

  // Mutated arguments: a kernel may have changed their metadata (resize_, as_strided_, out=).
  bool any_write = false;
  for (const auto& a : args) {
    if (a.alias_info() && a.alias_info()->isWrite()) { any_write = true; break; }
  }
  auto find_orig = [&](const at::Tensor& t) -> const at::Tensor* {
    for (auto& p : originals)
      if (p.first.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return &p.second;
    return nullptr;
  };
  if (any_write) {
    for (auto& p : originals) sync_back(p.second, p.first);
  }

  const size_t nret = schema.returns().size();
  const size_t rbase = stack->size() - nret;
  auto convert = [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined()) return t;
    if (const at::Tensor* o = find_orig(t)) return *o;
    if (t.device().type() == kDev) return t;
    return to_neuron_result(t, dev.index());
  };
  for (size_t i = 0; i < nret; ++i) {
    auto& v = (*stack)[rbase + i];
    if (v.isTensor()) {
      v = convert(v.toTensor());
    } else if (v.isTensorList()) {
      auto list = v.toTensorList();
      c10::List<at::Tensor> out;
      out.reserve(list.size());
      for (const at::Tensor& t : list) out.push_back(convert(t));
      v = out;
    }
  }
}

at::Tensor cpu_alias(const at::Tensor& t) {
  TORCH_CHECK(t.device().type() == kDev, "cpu_alias expects a neuron tensor, got ", t.device());
  auto impl = c10::make_intrusive<c10::TensorImpl>(alias_storage(t.storage()), keys_like(c10::DispatchKey::CPU, t),
                                                   t.dtype());
  impl->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  if (t.is_conj()) impl->_set_conj(true);
  if (t.is_neg()) impl->_set_neg(true);
  return at::Tensor(std::move(impl));
}

at::Tensor to_neuron_result(const at::Tensor& cpu_in, c10::DeviceIndex idx) {
  at::Tensor cpu = cpu_in;
  // First: a sparse result (x.to_sparse() of a neuron tensor) has no storage to look at.
  TORCH_CHECK_NOT_IMPLEMENTED(cpu.layout() == c10::kStrided, "neuron: ", cpu.layout(),
                              " tensors are not supported on the device (only strided tensors); keep sparse "
                              "tensors on the CPU or call .to_dense() before moving them");
  if (auto* target = alias_target(cpu.storage().unsafeGetStorageImpl())) {
    // A view of a neuron tensor (a CPU kernel returned a view of its input).
    return neuron_tensor_on(c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(target)), cpu);
  }
  if (cpu.storage().device().type() == kDev) return neuron_tensor_on(cpu.storage(), cpu);
  if (cpu._is_zerotensor()) return efficient_zero_tensor(cpu.sizes(), cpu.scalar_type(), idx);
  if (cpu.scalar_type() == at::kDouble) {
    check_dtype(at::kDouble, "result");
    cpu = cpu.to(at::kFloat);
  }
  c10::Storage storage = cpu.storage();
  // Adopt only memory nobody else sees: `storage` (local) + the tensor's own reference.
  if (storage.use_count() != 2) {
    cpu = cpu.clone();
    storage = cpu.storage();
  }
  adopt_cpu_storage(storage.unsafeGetStorageImpl(), idx);
  return neuron_tensor_on(std::move(storage), cpu);
}

void sync_back(const at::Tensor& neuron_t, const at::Tensor& alias) {
  auto* n = neuron_t.unsafeGetTensorImpl();
  auto* a = alias.unsafeGetTensorImpl();
  c10::StorageImpl* as = a->storage().unsafeGetStorageImpl();
  c10::StorageImpl* ns = n->storage().unsafeGetStorageImpl();
  if (c10::StorageImpl* target = alias_target(as)) {
    if (target != ns) n->set_storage_keep_dtype(c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(target)));
  } else if (as->allocator() == &g_alias_allocator) {
    // The kernel resized the alias (fresh host memory from the alias allocator): move the memory
    // into the neuron storage in place, so every view of it sees the resize (as on a device).
    size_t nbytes = as->nbytes();
    adopt_cpu_storage(as, neuron_t.device().index());
    ns->set_data_ptr_noswap(as->set_data_ptr(c10::DataPtr()));
    ns->set_nbytes(nbytes);
  } else {
    // The kernel set_ the alias to another CPU storage: the neuron tensor gets device memory of its own.
    at::Tensor moved = to_neuron_result(alias, neuron_t.device().index());
    n->set_storage_keep_dtype(moved.storage());
  }
  if (n->sizes() != a->sizes() || n->strides() != a->strides() || n->storage_offset() != a->storage_offset()) {
    n->set_sizes_and_strides(a->sizes(), a->strides(), a->storage_offset());
  }
}

// Sparse layouts have no neuron storage: every op on them (sparse_coo_tensor(device="neuron"),
// .to("neuron") of a sparse tensor, empty(layout=sparse)) ends here with a clear error instead of
// PyTorch's "Could not run ... with arguments from the 'Sparseneuron' backend".
void sparse_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack*) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "neuron: sparse tensors are not supported on the device (", op.schema().name(),
                              "); keep them on the CPU or call .to_dense() before moving them");
}

void raise_device_mismatch(const c10::Device& a, const c10::Device& b) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ",
              a, " and ", b, "!");
}

c10::Device check_same_device(std::initializer_list<const at::Tensor*> ts, const char* op) {
  Scan s;
  for (const at::Tensor* t : ts)
    if (t) scan_tensor(*t, s);
  TORCH_CHECK(s.dev.has_value(), op, ": expected a neuron tensor");
  if (s.other) raise_device_mismatch(*s.dev, *s.other);
  return *s.dev;
}

void check_dtype(c10::ScalarType st, const char* op) {
  if (g_accounting.load(std::memory_order_relaxed)) note_unsupported_dtype(st);
  if (st == at::kDouble) {
    TORCH_CHECK(!g_strict.load(), "neuron (strict mode): ", op,
                " needs float64, which the device does not support; use float32");
    TORCH_WARN_ONCE("neuron: float64 is not supported on the device; it is stored and computed as "
                    "float32 (set CUDA2NEURON_STRICT=1 to make this an error)");
  } else if (c10::isComplexType(st)) {
    TORCH_CHECK(!g_strict.load(), "neuron (strict mode): ", op, " uses ", st,
                "; complex dtypes are not supported on the device");
  }
}

// An op with both a CPU kernel and a CompositeExplicitAutograd(NonFunctional) kernel reaches
// PrivateUse1 through the composite, not through the fallback: a device without its own kernel gets
// the composite. Trap: the composite is not the CPU kernel — native_layer_norm / native_group_norm
// compute their statistics in float32 and return float32 mean/rstd for bfloat16 input, where CPU
// returns bfloat16 and other values; structured ops (add, mul, ...) allocate on the device and call
// the out= variant, one dispatch more and e.g. a float64 output the device cannot store. Every such
// op is sent to the fallback instead, so it runs the very CPU kernel (CPU's values, dtypes, strides).
// The same holds for a CPU kernel next to a CompositeImplicitAutograd one (mish_backward,
// silu_backward, native_channel_shuffle): the device got math_mish_backward, which rounds otherwise
// than CPU's fused kernel (OpInfo's nn.functional.mish float32 backward). With a kernel of its own
// the op's autograd key on the device is then what it is on CPU (the CPU one has a kernel too).
// The list is computed from the dispatcher (ops registered by libtorch when this library loads);
// ops that already have a neuron kernel (kernels.cpp, rnn.cpp) keep it.
int register_cpu_kernels_over_composites(torch::Library& m) {
  auto& dispatcher = c10::Dispatcher::singleton();
  int n = 0;
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto op = dispatcher.findOp(name);
    if (!op || !op->hasKernelForDispatchKey(c10::DispatchKey::CPU)) continue;
    if (op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) continue;
    if (!op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) &&
        !op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional) &&
        !op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd))
      continue;
    std::string full = name.name.substr(6);
    if (!name.overload_name.empty()) full += "." + name.overload_name;
    m.impl(full.c_str(), torch::CppFunction::makeFromBoxedFunction<&neuron_fallback>());
    ++n;
  }
  return n;
}

}  // namespace neuron
