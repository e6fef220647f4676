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
// ~4,000 random geometries (docs/backend.md): every wrong one overhangs, no fitting one is wrong;
// the input gradient and the contiguous forward were never wrong.
// The device computes those weight and bias gradients itself: the products of the bfloat16 values
// (exact) summed in float32 (a padded window view and one batched matmul), rounded once — what
// oneDNN's bfloat16 kernels compute where they are right; cheap exactly there (the windows of a
// small input). Those channels-last forwards run CPU's contiguous kernel. The input gradient and
// everything else keep CPU's kernel, bit for bit.

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

// The plain convolution's output sizes for an input of spatial sizes `in`.
std::vector<int64_t> plain_output_sizes(c10::IntArrayRef in, c10::IntArrayRef kernel, c10::IntArrayRef stride,
                                        c10::IntArrayRef padding, c10::IntArrayRef dilation) {
  std::vector<int64_t> out;
  for (size_t j = 0; j < kernel.size(); ++j)
    out.push_back((in[j] + 2 * nth_or_only(padding, j) - nth_or_only(dilation, j) * (kernel[j] - 1) - 1) /
                      nth_or_only(stride, j) + 1);
  return out;
}

bool all_bf16(std::initializer_list<const at::Tensor*> ts) {
  for (const at::Tensor* t : ts)
    if (t && t->scalar_type() != at::kBFloat16) return false;
  return true;
}

// The plain convolution from an input of sizes `in` (N, Ci, *in) to an output of sizes `out`
// (N, Co, *out) overhangs, and its shapes are ones CPU accepts. Trap: whatever CPU refuses (mixed
// dtypes, channel or size mismatches) must stay CPU's error to raise: the device's own path would
// compute something.
bool overhanging_plain_conv(c10::IntArrayRef in, c10::IntArrayRef out, const at::Tensor& weight,
                            c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
                            int64_t groups) {
  const size_t nd = static_cast<size_t>(weight.dim());
  if (nd < 3 || in.size() != nd || out.size() != nd || groups < 1 || weight.size(0) % groups != 0) return false;
  if (in[0] != out[0] || in[1] != weight.size(1) * groups || out[1] != weight.size(0)) return false;
  for (size_t j = 0; j < nd; ++j)
    if (in[j] < 1 || out[j] < 1 || (j >= 2 && weight.size(static_cast<int64_t>(j)) < 1)) return false;
  auto k = weight.sizes().slice(2);
  if (plain_output_sizes(in.slice(2), k, stride, padding, dilation) != out.slice(2).vec()) return false;
  return window_overhangs(in.slice(2), out.slice(2), k, stride, padding, dilation);
}

// The windows of `x` (N, C, *in) as a view of the zero-padded input: (N, C, *out, *kernel).
at::Tensor windows(const at::Tensor& x, c10::IntArrayRef kernel, c10::IntArrayRef out, c10::IntArrayRef stride,
                   c10::IntArrayRef padding, c10::IntArrayRef dilation) {
  const size_t n = kernel.size();
  std::vector<int64_t> pads;  // constant_pad_nd: (before, after) from the last dimension on
  for (size_t j = n; j-- > 0;) {
    pads.push_back(nth_or_only(padding, j));
    pads.push_back(nth_or_only(padding, j));
  }
  at::Tensor xp = at::constant_pad_nd(x, pads, 0).contiguous();
  std::vector<int64_t> sizes{xp.size(0), xp.size(1)}, strides{xp.stride(0), xp.stride(1)};
  for (size_t j = 0; j < n; ++j) {
    sizes.push_back(out[j]);
    strides.push_back(nth_or_only(stride, j) * xp.stride(2 + j));
  }
  for (size_t j = 0; j < n; ++j) {
    sizes.push_back(kernel[j]);
    strides.push_back(nth_or_only(dilation, j) * xp.stride(2 + j));
  }
  return xp.as_strided(sizes, strides);
}

int64_t product(c10::IntArrayRef a) {
  int64_t p = 1;
  for (int64_t v : a) p *= v;
  return p;
}

// (N, C, *out, *kernel) windows -> (groups, N*O, C/groups*K): one row per output position.
at::Tensor window_rows(const at::Tensor& x, c10::IntArrayRef kernel, c10::IntArrayRef out, c10::IntArrayRef stride,
                       c10::IntArrayRef padding, c10::IntArrayRef dilation, int64_t groups) {
  const int64_t n = x.size(0), c = x.size(1), o = product(out), k = product(kernel);
  return windows(x, kernel, out, stride, padding, dilation)
      .reshape({n, groups, c / groups, o, k})
      .permute({1, 0, 3, 2, 4})
      .reshape({groups, n * o, c / groups * k});
}

// The plain convolution's weight gradient: input x (N, Ci, *in), grad_output go (N, Co, *out)
// -> (Co, Ci/g, *kernel), in their dtype. One matmul of bfloat16 operands: CPU's bfloat16 matmul
// sums the exact products in float32 and rounds once (a float32 matmul would write and convert
// twice the bytes: 10x slower for a 3x3 conv on RetinaNet's 2x2 P6 input).
at::Tensor conv_weight_grad(const at::Tensor& go, const at::Tensor& x, c10::IntArrayRef kernel,
                            c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
                            int64_t groups) {
  auto out = go.sizes().slice(2);
  const int64_t n = x.size(0), ci = x.size(1), co = go.size(1), o = product(out);
  at::Tensor rows = window_rows(x, kernel, out, stride, padding, dilation, groups);  // g, N*O, Ci/g*K
  at::Tensor g = go.reshape({n, groups, co / groups, o}).permute({1, 2, 0, 3})
                     .reshape({groups, co / groups, n * o});
  std::vector<int64_t> shape{co, ci / groups};
  shape.insert(shape.end(), kernel.begin(), kernel.end());
  return at::bmm(g, rows).reshape(shape);
}

at::MemoryFormat format_of(const at::Tensor& a, const at::Tensor& b) {
  if (!channels_last(a) && !channels_last(b)) return at::MemoryFormat::Contiguous;
  return a.dim() == 5 ? at::MemoryFormat::ChannelsLast3d : at::MemoryFormat::ChannelsLast;
}

// `t` with the strides CPU's kernel gives in `format`. Trap: .contiguous(format) keeps a tensor
// whose size-1 dimensions make it count as both formats, so its strides stay another format's.
at::Tensor in_format(const at::Tensor& t, at::MemoryFormat format) {
  if (format == at::MemoryFormat::Contiguous) return t.contiguous();
  return at::empty(t.sizes(), t.options().memory_format(format)).copy_(t);
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
  // Only the plain channels-last forward (oneDNN's brg_conv) was measured wrong (a segfault): run
  // CPU's contiguous kernel instead (never wrong; the same bits as channels-last in 125 of 132
  // measured geometries) and give the result channels-last, as CPU would.
  const auto format = format_of(input, weight);
  if (!transposed && format != at::MemoryFormat::Contiguous && all_bf16({&input, &weight, b}) &&
      input.dim() == weight.dim() && input.dim() >= 3) {
    std::vector<int64_t> out{input.size(0), weight.size(0)};
    for (int64_t v : plain_output_sizes(input.sizes().slice(2), weight.sizes().slice(2), stride, padding, dilation))
      out.push_back(v);
    if (overhanging_plain_conv(input.sizes(), out, weight, stride, padding, dilation, groups)) {
      at::Tensor y = at::convolution(hi.contiguous(), hw.contiguous(), hb, stride, padding, dilation, false,
                                     output_padding, groups);
      return to_neuron_result(in_format(y, format), dev.index());
    }
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
  at::Tensor hg = host_view(grad_output), hi = host_view(input), hw = host_view(weight);
  auto back = [&](const at::Tensor& t) { return t.defined() ? to_neuron_result(t, dev.index()) : t; };
  // The plain convolution's view: a transposed one is the adjoint of the plain convolution whose
  // input is the transposed one's output (grad_output here) and whose output is its input.
  const at::Tensor& plain_in = transposed ? grad_output : input;
  const at::Tensor& plain_out = transposed ? input : grad_output;
  if (all_bf16({&grad_output, &input, &weight}) &&
      overhanging_plain_conv(plain_in.sizes(), plain_out.sizes(), weight, stride, padding, dilation, groups)) {
    // Every result in the memory format CPU's oneDNN path gives (channels-last if either input is).
    const auto format = format_of(input, weight);
    at::Tensor gi, gw, gb;
    if (output_mask[0] && transposed && format != at::MemoryFormat::Contiguous) {
      // A transposed convolution's input gradient is the plain forward, whose channels-last kernel
      // segfaulted: CPU's contiguous one, as in convolution_overrideable.
      std::vector<int64_t> no_output_padding(output_padding.size(), 0);
      gi = in_format(at::convolution(hg.contiguous(), hw.contiguous(), std::nullopt, stride, padding, dilation,
                                     false, no_output_padding, groups),
                     format);
    } else if (output_mask[0]) {
      // The input gradient alone on CPU's kernel (never wrong): asking for the weight or bias
      // gradient too would run the broken kernel, which computes both.
      gi = std::get<0>(at::convolution_backward(hg, hi, hw, c10::OptionalIntArrayRef(), stride, padding, dilation,
                                                transposed, output_padding, groups, {true, false, false}));
    }
    if (output_mask[1]) {
      auto k = weight.sizes().slice(2);
      gw = in_format(transposed ? conv_weight_grad(hi, hg, k, stride, padding, dilation, groups)
                                : conv_weight_grad(hg, hi, k, stride, padding, dilation, groups),
                     format);
    }
    if (output_mask[2]) {
      std::vector<int64_t> dims{0};
      for (int64_t j = 2; j < grad_output.dim(); ++j) dims.push_back(j);
      gb = hg.to(at::kFloat).sum(dims).to(at::kBFloat16);
    }
    return {back(gi), back(gw), back(gb)};
  }
  auto [gi, gw, gb] = at::convolution_backward(
      hg, hi, hw, output_mask[2] ? c10::OptionalIntArrayRef(bias_sizes) : c10::OptionalIntArrayRef(), stride, padding,
      dilation, transposed, output_padding, groups, output_mask);
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
