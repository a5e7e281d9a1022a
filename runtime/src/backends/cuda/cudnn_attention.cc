// ATTENTION and ATTENTION_GRAD through cuDNN's fused scaled-dot-product attention (the cuDNN
// frontend's graph API: sdpa and sdpa_backward), for the cases real models run: bf16, no additive
// mask, no ALiBi slopes, head dims 64..128 (a multiple of 8, the same for keys and values), causal
// only when queries and keys are equally many (then cuDNN's top-left diagonal is ours), in either
// attention.layout (BSHD is [B, H, S, D] with other strides). Anything
// else, and any machine without cuDNN 9, runs attention.cu's reference kernels.
//
// cuDNN is loaded at run time (the frontend's dynamic loading: dlopen libcudnn.so.9, its CUDA calls
// through libcudart.so), so sl-run starts without it. SLRT_CUDNN_ATTENTION=0 turns this path off,
// =require makes a case it cannot take an error instead of a fallback (the GPU suite's comparison
// of the two paths uses both).
//
// Numerics: cuDNN computes the scores and the softmax in fp32 but multiplies the probabilities by
// V in bf16, so results differ from the reference kernel (fp32 throughout, rounded once) by about
// bf16 rounding of the probabilities: the GPU suite compares them within a stated bf16 tolerance
// (cuda_backend_test, CudaKernelTest.CudnnAttentionAgainstTheReferenceKernel).
//
// The gradient needs the forward's output and softmax statistics, which ATTENTION_GRAD does not
// take (the schedule recomputes rather than keeps them): it runs cuDNN's forward once more into
// scratch, then its backward.
#include "backends/cuda/cudnn_attention.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <functional>
#include <optional>
#include <tuple>
#include <unordered_map>

#include <dlfcn.h>

#include "slrt/error.h"

#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING
#define CUDNN_FRONTEND_SKIP_JSON_LIB
#include <cudnn_frontend.h>

namespace cudnn_frontend {
// The frontend's handle on the loaded library (dynamic loading): set once, below.
void *cudnn_dlhandle = nullptr;
} // namespace cudnn_frontend

namespace slrt::cuda {
namespace fe = cudnn_frontend;
namespace {

enum class Mode { kOff, kOn, kRequire };

Mode mode() {
  const char *value = std::getenv("SLRT_CUDNN_ATTENTION");
  if (!value || !*value || std::strcmp(value, "1") == 0)
    return Mode::kOn;
  if (std::strcmp(value, "0") == 0)
    return Mode::kOff;
  if (std::strcmp(value, "require") == 0)
    return Mode::kRequire;
  throw makeError("SLRT_CUDNN_ATTENTION='", value, "' is not 0, 1 or require");
}

// dlopen's outcome, once per process: empty when cuDNN is loaded, else why not.
const std::string &loadError() {
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
    for (const char *name : {"libcudnn.so.9", "libcudnn.so"}) {
      if (void *handle = dlopen(name, RTLD_NOW | RTLD_GLOBAL)) {
        fe::cudnn_dlhandle = handle;
        return;
      }
      const char *why = dlerror();
      error += std::string(error.empty() ? "" : "; ") + (why ? why : name);
    }
  });
  return error;
}

// Says once per process (to stderr) why attention runs on the reference kernels.
void noteFallback(const std::string &why) {
  static std::once_flag once;
  std::call_once(once, [&] {
    std::fprintf(stderr,
                 "slrt: cuDNN attention is unavailable (%s); attention runs on SpeedLoader's "
                 "reference kernels, which are much slower\n",
                 why.c_str());
  });
}

struct Shape {
  int64_t batch, heads, kvHeads, s, t, d;
  bool causal;
  float scale;
  bool bshd; // attention.layout BSHD: q, k, v, o and their gradients stored [B, S, H, D]
  bool operator<(const Shape &o) const {
    return std::tie(batch, heads, kvHeads, s, t, d, causal, scale, bshd) <
           std::tie(o.batch, o.heads, o.kvHeads, o.s, o.t, o.d, o.causal, o.scale, o.bshd);
  }
};

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDo, kDq, kDk, kDv };

// The strides of a tensor of `dims` [B, H, S, D] stored row-major, or with `bshd` stored
// [B, S, H, D] (cuDNN's SDPA takes any strides: the layout is only different strides).
std::vector<int64_t> stridesOf(const std::vector<int64_t> &dims, bool bshd) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size() - 1; i-- > 0;)
    strides[i] = strides[i + 1] * dims[i + 1];
  if (bshd && dims.size() == 4)
    strides = {dims[1] * dims[2] * dims[3], dims[3], dims[1] * dims[3], 1};
  return strides;
}

std::shared_ptr<fe::graph::Tensor_attributes> input(fe::graph::Graph &graph, const char *name,
                                                    int64_t uid, std::vector<int64_t> dims,
                                                    bool bshd,
                                                    fe::DataType_t type = fe::DataType_t::BFLOAT16) {
  return graph.tensor(fe::graph::Tensor_attributes()
                          .set_name(name)
                          .set_uid(uid)
                          .set_dim(dims)
                          .set_stride(stridesOf(dims, bshd))
                          .set_data_type(type));
}

void output(const std::shared_ptr<fe::graph::Tensor_attributes> &tensor, int64_t uid,
            std::vector<int64_t> dims, bool bshd,
            fe::DataType_t type = fe::DataType_t::BFLOAT16) {
  tensor->set_output(true).set_uid(uid).set_dim(dims).set_stride(stridesOf(dims, bshd))
      .set_data_type(type);
}

// A built graph, or why none could be built for this shape.
struct Built {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspaceBytes = 0;
  std::string error;
};

Built finish(std::shared_ptr<fe::graph::Graph> graph, cudnnHandle_t handle) {
  Built built;
  auto step = [&](fe::error_t status, const char *what) {
    if (status.is_bad() && built.error.empty())
      built.error = std::string(what) + ": " + status.get_message();
    return built.error.empty();
  };
  if (step(graph->validate(), "validate") &&
      step(graph->build_operation_graph(handle), "build_operation_graph") &&
      step(graph->create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans") &&
      step(graph->check_support(), "check_support") &&
      step(graph->build_plans(), "build_plans") &&
      step(graph->get_workspace_size(built.workspaceBytes), "get_workspace_size"))
    built.graph = std::move(graph);
  return built;
}

std::shared_ptr<fe::graph::Graph> newGraph() {
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return graph;
}

// Forward: O = softmax(Q K^T * scale) V, with the softmax statistics when `stats`.
Built buildForward(const Shape &sh, bool stats, cudnnHandle_t handle) {
  auto graph = newGraph();
  auto q = input(*graph, "Q", kQ, {sh.batch, sh.heads, sh.s, sh.d}, sh.bshd);
  auto k = input(*graph, "K", kK, {sh.batch, sh.kvHeads, sh.t, sh.d}, sh.bshd);
  auto v = input(*graph, "V", kV, {sh.batch, sh.kvHeads, sh.t, sh.d}, sh.bshd);
  auto options = fe::graph::SDPA_attributes()
                     .set_name("attention")
                     .set_generate_stats(stats)
                     .set_attn_scale(sh.scale)
                     .set_causal_mask(sh.causal);
  auto [o, statsTensor] = graph->sdpa(q, k, v, options);
  output(o, kO, {sh.batch, sh.heads, sh.s, sh.d}, sh.bshd);
  if (stats)
    output(statsTensor, kStats, {sh.batch, sh.heads, sh.s, 1}, false, fe::DataType_t::FLOAT);
  return finish(std::move(graph), handle);
}

Built buildBackward(const Shape &sh, cudnnHandle_t handle) {
  auto graph = newGraph();
  auto q = input(*graph, "Q", kQ, {sh.batch, sh.heads, sh.s, sh.d}, sh.bshd);
  auto k = input(*graph, "K", kK, {sh.batch, sh.kvHeads, sh.t, sh.d}, sh.bshd);
  auto v = input(*graph, "V", kV, {sh.batch, sh.kvHeads, sh.t, sh.d}, sh.bshd);
  auto o = input(*graph, "O", kO, {sh.batch, sh.heads, sh.s, sh.d}, sh.bshd);
  auto dO = input(*graph, "dO", kDo, {sh.batch, sh.heads, sh.s, sh.d}, sh.bshd);
  auto stats =
      input(*graph, "Stats", kStats, {sh.batch, sh.heads, sh.s, 1}, false, fe::DataType_t::FLOAT);
  auto options = fe::graph::SDPA_backward_attributes()
                     .set_name("attention gradient")
                     .set_attn_scale(sh.scale)
                     .set_causal_mask(sh.causal);
  auto [dQ, dK, dV] = graph->sdpa_backward(q, k, v, o, dO, stats, options);
  output(dQ, kDq, {sh.batch, sh.heads, sh.s, sh.d}, sh.bshd);
  output(dK, kDk, {sh.batch, sh.kvHeads, sh.t, sh.d}, sh.bshd);
  output(dV, kDv, {sh.batch, sh.kvHeads, sh.t, sh.d}, sh.bshd);
  return finish(std::move(graph), handle);
}

// Why cuDNN does not take this case (empty: it does).
std::string ineligible(bool causal, bool bshd, const Tensor &q, const Tensor &k, const Tensor &v,
                       const Tensor *mask, const Tensor *slopes, Element element) {
  if (element != Element::kBF16)
    return "not bf16";
  if (mask)
    return "an additive mask";
  if (slopes)
    return "ALiBi slopes";
  if (q.shape.size() != 4 || k.shape.size() != 4 || v.shape.size() != 4)
    return "not [B, H, S, D]";
  const int heads = bshd ? 2 : 1, seq = bshd ? 1 : 2;
  int64_t d = q.shape[3];
  if (v.shape[3] != d || d % 8 != 0 || d < 64 || d > 128)
    return "head dims other than one of 64..128 (a multiple of 8) for both keys and values";
  if (causal && q.shape[seq] != k.shape[seq])
    return "causal with fewer queries than keys";
  if (q.shape[heads] % k.shape[heads] != 0)
    return "query heads not a multiple of key heads";
  return {};
}

} // namespace

// A cuDNN handle bound to the context's stream and the graphs built for it, per shape.
struct CudnnAttention {
  cudnnHandle_t handle = nullptr;
  std::map<Shape, Built> forward, forwardWithStats, backward;
  ~CudnnAttention() {
    if (handle)
      fe::detail::destroy_handle(handle);
  }
};

void destroyCudnnAttention(CudnnAttention *state) noexcept { delete state; }

namespace {

// The context's cuDNN state, created on first use; null when cuDNN cannot be loaded.
CudnnAttention *stateOf(Context &ctx) {
  if (!loadError().empty())
    return nullptr;
  if (!ctx.cudnnAttention) {
    auto state = std::make_unique<CudnnAttention>();
    cudnnStatus_t status = fe::detail::create_handle(&state->handle);
    if (status != CUDNN_STATUS_SUCCESS)
      throw makeError("cudnnCreate failed: ", fe::detail::get_error_string(status));
    status = fe::detail::set_stream(state->handle, ctx.stream());
    if (status != CUDNN_STATUS_SUCCESS)
      throw makeError("cudnnSetStream failed: ", fe::detail::get_error_string(status));
    ctx.cudnnAttention = state.release();
  }
  return ctx.cudnnAttention;
}

// The graph for `sh` in `cache`, built on first use; null (having said why) when cuDNN has none.
const Built *graphFor(std::map<Shape, Built> &cache, const Shape &sh, Mode m,
                      const std::function<Built()> &build) {
  auto it = cache.find(sh);
  if (it == cache.end())
    it = cache.emplace(sh, build()).first;
  if (it->second.graph)
    return &it->second;
  std::string why = "cuDNN has no attention graph for [" + std::to_string(sh.batch) + ", " +
                    std::to_string(sh.heads) + ", " + std::to_string(sh.s) + ", " +
                    std::to_string(sh.d) + "] (" + it->second.error + ")";
  if (m == Mode::kRequire)
    throw makeError(why);
  noteFallback(why);
  return nullptr;
}

void execute(CudnnAttention &state, const Built &built, std::unordered_map<int64_t, void *> pack,
             void *workspace, const char *what) {
  fe::error_t status = built.graph->execute(state.handle, pack, workspace);
  if (status.is_bad())
    throw makeError("cuDNN ", what, " failed: ", status.get_message());
}

// The case's shape, or nullopt (having said why when that matters) when cuDNN does not take it.
std::optional<std::pair<Shape, Mode>> accept(Context &ctx, bool causal, float scale, bool bshd,
                                             const Tensor &q, const Tensor &k, const Tensor &v,
                                             const Tensor *mask, const Tensor *slopes,
                                             Element element) {
  Mode m = mode();
  if (m == Mode::kOff)
    return std::nullopt;
  std::string why = ineligible(causal, bshd, q, k, v, mask, slopes, element);
  if (!why.empty()) {
    if (m == Mode::kRequire)
      throw makeError("SLRT_CUDNN_ATTENTION=require, but cuDNN does not take attention with ",
                      why);
    return std::nullopt;
  }
  if (!stateOf(ctx)) {
    if (m == Mode::kRequire)
      throw makeError("SLRT_CUDNN_ATTENTION=require, but cuDNN 9 could not be loaded: ",
                      loadError());
    noteFallback("cannot load cuDNN 9: " + loadError());
    return std::nullopt;
  }
  const int heads = bshd ? 2 : 1, seq = bshd ? 1 : 2;
  Shape sh{q.shape[0],  q.shape[heads], k.shape[heads], q.shape[seq],
           k.shape[seq], q.shape[3],    causal,         scale,
           bshd};
  return std::make_pair(sh, m);
}

} // namespace

bool cudnnAttention(Context &ctx, bool causal, float scale, bool bshd, const Tensor &q,
                    const Tensor &k, const Tensor &v, const Tensor *mask, const Tensor *slopes,
                    const Tensor &y) {
  auto accepted = accept(ctx, causal, scale, bshd, q, k, v, mask, slopes, y.element);
  if (!accepted)
    return false;
  auto [sh, m] = *accepted;
  CudnnAttention &state = *ctx.cudnnAttention;
  const Built *forward =
      graphFor(state.forward, sh, m, [&] { return buildForward(sh, false, state.handle); });
  if (!forward)
    return false;
  void *workspace =
      forward->workspaceBytes > 0 ? ctx.scratch(static_cast<size_t>(forward->workspaceBytes)) : nullptr;
  execute(state, *forward,
          {{kQ, q.data}, {kK, k.data}, {kV, v.data}, {kO, y.data}}, workspace, "attention");
  return true;
}

bool cudnnAttentionGrad(Context &ctx, bool causal, float scale, bool bshd, const Tensor &q,
                        const Tensor &k, const Tensor &v, const Tensor &dy, const Tensor *mask,
                        const Tensor *slopes, const Tensor &dq, const Tensor &dk,
                        const Tensor &dv) {
  auto accepted = accept(ctx, causal, scale, bshd, q, k, v, mask, slopes, dq.element);
  if (!accepted)
    return false;
  auto [sh, m] = *accepted;
  CudnnAttention &state = *ctx.cudnnAttention;
  const Built *forward = graphFor(state.forwardWithStats, sh, m,
                                  [&] { return buildForward(sh, true, state.handle); });
  if (!forward)
    return false;
  const Built *backward =
      graphFor(state.backward, sh, m, [&] { return buildBackward(sh, state.handle); });
  if (!backward)
    return false;
  // Scratch: the recomputed output (bf16, in the layout of dy), the statistics (f32, [B, H, S]),
  // then the larger workspace.
  int64_t workspaceBytes = std::max(forward->workspaceBytes, backward->workspaceBytes);
  ScratchLayout layout;
  size_t outputAt = layout.add<uint16_t>(sh.batch * sh.heads * sh.s * sh.d);
  size_t statsAt = layout.add<float>(sh.batch * sh.heads * sh.s);
  size_t workspaceAt = layout.add<std::byte>(workspaceBytes);
  std::byte *base = ctx.scratch(layout.bytes());
  void *output = base + outputAt, *stats = base + statsAt;
  void *workspace = workspaceBytes > 0 ? base + workspaceAt : nullptr;
  execute(state, *forward,
          {{kQ, q.data}, {kK, k.data}, {kV, v.data}, {kO, output}, {kStats, stats}}, workspace,
          "attention (recomputed for its gradient)");
  execute(state, *backward,
          {{kQ, q.data},
           {kK, k.data},
           {kV, v.data},
           {kO, output},
           {kDo, dy.data},
           {kStats, stats},
           {kDq, dq.data},
           {kDk, dk.data},
           {kDv, dv.data}},
          workspace, "attention gradient");
  return true;
}

} // namespace slrt::cuda
