// Hand-written neuron kernels: allocation, views, copies, set_, convolution. Each one repeats the
// same-device check of the fallback: a kernel that skipped it would silently compute on CPU data.
#include "aten/aten.h"

#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/convolution.h>
#include <ATen/SDPBackend.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/library.h>

namespace neuron {
namespace {

c10::DeviceIndex target_index(std::optional<c10::Device> d) {
  if (d && d->has_index()) {
    check_index(d->index());
    return d->index();
  }
  return current_device();
}

// The device stores float64 as float32 (warned once) and refuses float64/complex in strict mode.
c10::ScalarType storable(c10::ScalarType st) {
  if (st == at::kDouble || c10::isComplexType(st)) check_dtype(st, "allocation");
  return st == at::kDouble ? at::kFloat : st;
}

struct IndexScope {
  c10::DeviceIndex prev;
  explicit IndexScope(c10::DeviceIndex d) : prev(current_device()) { if (d != prev) set_device(d); }
  ~IndexScope() { if (current_device() != prev) set_device(prev); }
};

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool>, std::optional<c10::MemoryFormat> memory_format) {
  TORCH_CHECK(!layout || *layout == c10::kStrided, "neuron supports only strided tensors, got layout ", *layout);
  IndexScope scope(target_index(device));
  auto st = storable(c10::dtype_or_default(dtype));
  return at::detail::empty_generic(size, device_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   st, memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout, std::optional<c10::Device> device, std::optional<bool>) {
  TORCH_CHECK(!layout || *layout == c10::kStrided, "neuron supports only strided tensors, got layout ", *layout);
  IndexScope scope(target_index(device));
  auto st = storable(c10::dtype_or_default(dtype));
  return at::detail::empty_strided_generic(size, stride, device_allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), st);
}

at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> offset) {
  check_same_device({&self}, "as_strided");
  return at::native::as_strided_tensorimpl(self, size, stride, offset);
}

at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) {
  check_same_device({&self}, "view");
  return at::native::view(self, size);
}

at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  check_same_device({&self}, "_reshape_alias");
  return at::native::_reshape_alias(self, size, stride);
}

at::Tensor host_view(const at::Tensor& t) { return t.device().type() == kDev ? cpu_alias(t) : t; }

// Copies between neuron and host (either direction) and between neuron devices: all host memory,
// so the CPU copy kernel does the work (dtype conversion, broadcasting, strides) on aliases.
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(self.device().type() == kDev || self.is_cpu(), "neuron: cannot copy from ", self.device());
  TORCH_CHECK(dst.device().type() == kDev || dst.is_cpu(), "neuron: cannot copy to ", dst.device());
  if (dst.device().type() == kDev && dst.scalar_type() == at::kDouble) check_dtype(at::kDouble, "copy");
  at::Tensor d = host_view(dst);
  d.copy_(host_view(self), non_blocking);
  if (dst.device().type() == kDev) sync_back(dst, d);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  at::Tensor d = host_view(dst);
  d.resize_(self.sizes());
  d.copy_(host_view(self));
  if (dst.device().type() == kDev) sync_back(dst, d);
  return dst;
}

void ensure_storage(at::Tensor& self, int64_t offset, c10::IntArrayRef size, c10::IntArrayRef stride) {
  int64_t numel = 1, max_index = 0;
  for (size_t i = 0; i < size.size(); ++i) {
    numel *= size[i];
    if (size[i] > 0) max_index += (size[i] - 1) * stride[i];
  }
  if (numel == 0) return;
  size_t need = static_cast<size_t>(offset + max_index + 1) * self.dtype().itemsize();
  c10::Storage s = self.storage();
  if (need > s.nbytes()) {
    at::detail::getPrivateUse1Hooks().resizePrivateUse1Bytes(s, need);
  }
}

at::Tensor& set_storage_offset(at::Tensor& self, c10::Storage source, int64_t offset, c10::IntArrayRef size,
                               c10::IntArrayRef stride) {
  check_same_device({&self}, "set_");
  if (source.device().type() != kDev) raise_device_mismatch(self.device(), source.device());
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(source));
  std::vector<int64_t> strides;
  if (stride.empty()) {
    auto cs = c10::contiguous_strides(size);
    strides.assign(cs.begin(), cs.end());
  } else {
    TORCH_CHECK(stride.size() == size.size(), "set_: sizes and strides must have the same length");
    strides.assign(stride.begin(), stride.end());
  }
  impl->set_sizes_and_strides(size, strides, offset);
  ensure_storage(self, offset, size, strides);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source) {
  size_t n = source.nbytes() / self.dtype().itemsize();
  int64_t numel = static_cast<int64_t>(n);
  return set_storage_offset(self, std::move(source), 0, {numel}, {});
}

at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& source) {
  check_same_device({&self, &source}, "set_");
  if (self.unsafeGetTensorImpl() == source.unsafeGetTensorImpl()) return self;
  return set_storage_offset(self, source.storage(), source.storage_offset(), source.sizes(), source.strides());
}

// ---- bfloat16 convolutions whose window overhangs the input ----
// torch 2.13's CPU bfloat16 convolutions run oneDNN (3.12: jit_bf16 / brg_conv on an AVX512-BF16
// host). Where the kernel window overhangs the input — an input extent shorter than the dilated
// kernel, or a kernel tap that meets only padding (RetinaNet's P7: 3x3, stride 2, pad 1 on a 1x1
// map) — the weight gradient leaves taps unwritten (whatever the allocation held: a different
// gradient every run, up to 3e38 and NaN), or computes wrong values, or writes past its buffer
// (heap corruption), and the channels-last forward segfaults. Plain CPU does the same. Measured on
// ~4,000 random geometries (docs/backend.md): every wrong one overhangs, no fitting one is wrong,
// and float32 is right everywhere. The device computes these weight gradients (with the rest of
// that backward) and channels-last forwards in float32 and rounds once: what oneDNN's bfloat16
// kernels compute where they are right (float32 accumulation of exact products; equal bit for bit
// in ~98% of the overhanging geometries where CPU was right). Everything else keeps CPU's kernel
// and its bits (a contiguous overhanging forward was never wrong: it stays CPU's).

int64_t nth_or_only(c10::IntArrayRef a, size_t i) { return a.size() == 1 ? a[0] : a[i]; }

// `in` and `out` are the spatial sizes of the plain (not transposed) convolution's input and output.
bool window_overhangs(c10::IntArrayRef in, c10::IntArrayRef out, c10::IntArrayRef kernel, c10::IntArrayRef stride,
                      c10::IntArrayRef padding, c10::IntArrayRef dilation) {
  for (size_t j = 0; j < kernel.size(); ++j) {
    const int64_t k = kernel[j], s = nth_or_only(stride, j), p = nth_or_only(padding, j),
                  d = nth_or_only(dilation, j);
    if (in[j] < (k - 1) * d + 1) return true;
    for (int64_t t = 0; t < k; ++t) {
      // Tap t reads input o*s - p + t*d for outputs o in [0, out): it is live iff some o lands in [0, in).
      const int64_t lo = p - t * d, hi = in[j] - 1 + p - t * d;  // live iff lo <= o*s <= hi for some o
      if (hi < 0) return true;
      const int64_t first = lo <= 0 ? 0 : (lo + s - 1) / s, last = std::min(out[j] - 1, hi / s);
      if (first > last) return true;
    }
  }
  return false;
}

// As CPU's convolution decides (mkldnn_conv_use_channels_last): either tensor suggests channels-last.
bool channels_last(const at::Tensor& t) {
  auto f = t.suggest_memory_format();
  return f == at::MemoryFormat::ChannelsLast || f == at::MemoryFormat::ChannelsLast3d;
}

// All bfloat16. Trap: mixed dtypes are CPU's error to raise; cast to float32 they would run.
bool all_bf16(std::initializer_list<const at::Tensor*> ts) {
  for (const at::Tensor* t : ts)
    if (t && t->scalar_type() != at::kBFloat16) return false;
  return true;
}

// Forward: `input` is the convolution's own input (for a transposed one, the plain one's output).
bool overhanging_bf16_forward(const at::Tensor& input, const at::Tensor& weight, const at::Tensor* bias,
                              c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
                              bool transposed, c10::IntArrayRef output_padding) {
  if (!all_bf16({&input, &weight, bias})) return false;
  if (input.numel() == 0 || weight.dim() < 3 || input.dim() != weight.dim()) return false;
  // Only the channels-last forward (oneDNN's brg_conv) was measured wrong; the others keep CPU's bits.
  if (!channels_last(input) && !channels_last(weight)) return false;
  const size_t n = static_cast<size_t>(weight.dim() - 2);
  auto sp = input.sizes().slice(2), k = weight.sizes().slice(2);
  std::vector<int64_t> other(n);
  for (size_t j = 0; j < n; ++j) {
    const int64_t s = nth_or_only(stride, j), p = nth_or_only(padding, j), d = nth_or_only(dilation, j);
    other[j] = transposed ? (sp[j] - 1) * s - 2 * p + d * (k[j] - 1) + nth_or_only(output_padding, j) + 1
                          : (sp[j] + 2 * p - d * (k[j] - 1) - 1) / s + 1;
    if (other[j] < 1) return false;  // CPU raises its own error
  }
  return transposed ? window_overhangs(other, sp, k, stride, padding, dilation)
                    : window_overhangs(sp, other, k, stride, padding, dilation);
}

at::Tensor as_float32(const at::Tensor& t) { return t.scalar_type() == at::kFloat ? t : t.to(at::kFloat); }

at::Tensor rounded_to(const at::Tensor& t, c10::ScalarType st) {
  return !t.defined() || t.scalar_type() == st ? t : t.to(st);
}

// PrivateUse1 convolutions route here (ConvBackend::Overrideable); run the CPU convolution on aliases.
at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                                    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                                    c10::IntArrayRef output_padding, int64_t groups) {
  const at::Tensor* b = bias && bias->defined() ? &*bias : nullptr;
  auto dev = check_same_device({&input, &weight, b}, "convolution");
  IndexScope scope(dev.index());
  at::Tensor hi = host_view(input), hw = host_view(weight);
  std::optional<at::Tensor> hb;
  if (b) hb = host_view(*b);
  if (overhanging_bf16_forward(input, weight, b, stride, padding, dilation, transposed, output_padding)) {
    if (hb) hb = as_float32(*hb);
    at::Tensor out = at::convolution(as_float32(hi), as_float32(hw), hb, stride, padding, dilation, transposed,
                                     output_padding, groups);
    return to_neuron_result(rounded_to(out, input.scalar_type()), dev.index());
  }
  at::Tensor out = at::convolution(hi, hw, hb, stride, padding, dilation, transposed, output_padding, groups);
  return to_neuron_result(out, dev.index());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask) {
  auto dev = check_same_device({&grad_output, &input, &weight}, "convolution_backward");
  IndexScope scope(dev.index());
  std::vector<int64_t> bias_sizes{grad_output.size(1)};
  auto bias_arg = output_mask[2] ? c10::OptionalIntArrayRef(bias_sizes) : c10::OptionalIntArrayRef();
  at::Tensor hg = host_view(grad_output), hi = host_view(input), hw = host_view(weight);
  auto back = [&](const at::Tensor& t) { return t.defined() ? to_neuron_result(t, dev.index()) : t; };
  const bool overhangs =
      all_bf16({&grad_output, &input, &weight}) &&
      input.numel() > 0 && grad_output.numel() > 0 && weight.dim() >= 3 && input.dim() == weight.dim() &&
      grad_output.dim() == weight.dim() &&
      (transposed ? window_overhangs(grad_output.sizes().slice(2), input.sizes().slice(2), weight.sizes().slice(2),
                                     stride, padding, dilation)
                  : window_overhangs(input.sizes().slice(2), grad_output.sizes().slice(2), weight.sizes().slice(2),
                                     stride, padding, dilation));
  if (overhangs) {
    auto [gi, gw, gb] = at::convolution_backward(as_float32(hg), as_float32(hi), as_float32(hw), bias_arg, stride,
                                                 padding, dilation, transposed, output_padding, groups, output_mask);
    return {back(rounded_to(gi, input.scalar_type())), back(rounded_to(gw, weight.scalar_type())),
            back(rounded_to(gb, grad_output.scalar_type()))};
  }
  auto [gi, gw, gb] = at::convolution_backward(hg, hi, hw, bias_arg, stride, padding, dilation, transposed,
                                               output_padding, groups, output_mask);
  return {back(gi), back(gw), back(gb)};
}

// autograd's zero gradients (sgn, polar, ... of real input): a tensor without memory, marked
// ZeroTensor, whose ops the ZeroTensor key materialises. Trap: through the fallback the CPU
// kernel's memory-less storage was adopted as device memory and the marker dropped — a neuron
// tensor over a null pointer, and a segfault on first read.
at::Tensor efficientzerotensor(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool>) {
  TORCH_CHECK(!layout || *layout == c10::kStrided, "neuron supports only strided tensors, got layout ", *layout);
  return efficient_zero_tensor(size, storable(c10::dtype_or_default(dtype)), target_index(device));
}

// scaled_dot_product_attention asks the device which kernel to use (a dispatch stub, not an op);
// with no answer registered, PrivateUse1 takes the math path and so other float32 values than CPU,
// which takes its flash kernel. The device answers as CPU does, and the chosen kernel
// (_scaled_dot_product_flash_attention_for_cpu, ...) then runs through the fallback.
}  // namespace

int64_t fused_sdp_choice_for_device(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const std::optional<at::Tensor>& mask, double dropout_p, bool is_causal,
                         std::optional<double> scale, bool enable_gqa) {
  // Under torch.compile's tracing the inputs are fake (or functional) tensors with no data and
  // a Python mode is active: host views of them are real tensors, and the nested CPU choice
  // below would hand those to the fake mode ("Please convert all Tensors to FakeTensors").
  // Tracing then takes the math decomposition, which every device runs.
  auto traced = [](const at::Tensor& t) {
    auto ks = t.key_set();
    return ks.has(c10::DispatchKey::Python) || ks.has(c10::DispatchKey::Functionalize);
  };
  if (c10::impl::TorchDispatchModeTLS::any_modes_set() || traced(q) || traced(k) || traced(v) ||
      (mask && mask->defined() && traced(*mask))) {
    return static_cast<int64_t>(at::SDPBackend::math);
  }
  // The choice depends on requires_grad (a mask that needs a gradient forces math): the host
  // views are fresh tensors without autograd metadata, so they carry the flag over.
  auto view = [](const at::Tensor& t) {
    at::Tensor h = host_view(t);
    if (t.requires_grad()) h.set_requires_grad(true);
    return h;
  };
  std::optional<at::Tensor> hm;
  if (mask && mask->defined()) hm = view(*mask);
  return at::_fused_sdp_choice(view(q), view(k), view(v), hm, dropout_p, is_causal, scale, enable_gqa);
}

namespace {

// Dense CPU and dense neuron tensors can swap their TensorImpl contents (param.data = ...), as
// CPU and CUDA can. Trap: c10's built-in answer leaves PrivateUse1 out, so nn.Module.to("neuron")
// creates a new Parameter per module and silently unties tied weights (GPT's embedding/head).
bool plain_dense(const at::Tensor& t) {
  auto ks = t.key_set();
  return ks.has(c10::DispatchKey::Dense) && !ks.has(c10::DispatchKey::Python) &&
         !ks.has(c10::DispatchKey::Functionalize) && t.layout() == c10::kStrided &&
         (ks.has_backend(c10::BackendComponent::CPUBit) || ks.has_backend(c10::BackendComponent::PrivateUse1Bit));
}

bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  if (plain_dense(self) && plain_dense(from)) return true;
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

// ATen's addr_ is addr_out(self, self): handed the very same Tensor twice, the CPU kernel takes
// self as the output as is (no broadcast) and needs it 2-D of the outer product's shape. Trap: the
// boxed fallback gets two stack entries, so the CPU kernel broadcasts a 0-D or 1-D self and
// resizes it in place where CPU raises. The checks are the CPU kernel's (same messages).
at::Tensor& addr_inplace(at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2, const c10::Scalar& beta,
                         const c10::Scalar& alpha) {
  TORCH_CHECK(self.dim() == 2, "2D tensor expected, got ", self.dim(), "D tensor for input");
  if (vec1.dim() == 1 && vec2.dim() == 1) {
    std::vector<int64_t> outer{vec1.size(0), vec2.size(0)};
    TORCH_CHECK(self.sizes() == c10::IntArrayRef(outer), "size mismatch, input: ", self.sizes(), ", v1: ",
                vec1.sizes(), ", v2: ", vec2.sizes());
  }
  return at::_ops::addr_out::call(self, vec1, vec2, beta, alpha, self);
}

}  // namespace


at::Tensor efficient_zero_tensor(c10::IntArrayRef size, c10::ScalarType dtype, c10::DeviceIndex idx) {
  c10::Device dev(kDev, idx);
  at::native::ZeroTensorAllocator allocator(dev);
  auto ks = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1) | c10::DispatchKeySet(c10::DispatchKey::ZeroTensor);
  return at::detail::empty_generic(size, &allocator, ks, dtype, std::nullopt);
}

void register_kernels(torch::Library& m) {
  m.impl("_efficientzerotensor", TORCH_FN(efficientzerotensor));
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("as_strided", TORCH_FN(as_strided));
  m.impl("addr_", TORCH_FN(addr_inplace));
  m.impl("view", TORCH_FN(view));
  m.impl("_reshape_alias", TORCH_FN(reshape_alias));
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("set_.source_Storage", TORCH_FN(set_storage));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage_offset));
  m.impl("set_.source_Tensor", TORCH_FN(set_tensor));
  m.impl("convolution_overrideable", TORCH_FN(convolution_overrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolution_backward_overrideable));
}

}  // namespace neuron

// The macro names the stub's registrar type unqualified: it has to stand in the stub's namespace.
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &neuron::fused_sdp_choice_for_device)
}  // namespace at::native
