// MATMUL and GEMM through cuBLAS, transposed operands as CUBLAS_OP_T (never copied): sgemm with
// fp32 compute for f32 (the handle's math mode keeps
// TF32 off, so results agree with the CPU backend to fp32 rounding), dgemm for f64, and for bf16
// one cuBLASLt matmul with bf16 A, B and C, CUBLAS_COMPUTE_32F (tensor cores, fp32 accumulation)
// and fp32 alpha and beta, each result rounded once to bf16. A bf16 GEMM that adds a C (beta not
// 0, a bias row too) sums in an fp32 Y and rounds it once (gemm, below).
//
// Rounded once: the bf16 path asks cuBLASLt for algorithms whose split-k parts (if any) are summed
// in fp32 (CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK; summed in place or in bf16 they would round
// each result more than once), and uses cublasGemmStridedBatchedEx only where cuBLASLt has no
// algorithm at all. What did round twice on an H200 (2026-11-26) was adding a C to a bf16 Y, in
// cuBLAS and cuBLASLt alike: gemm() below sums those in fp32.
#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <unordered_map>

#include <cublasLt.h>

#include "backends/cuda/cuda_device.cuh"

namespace slrt::cuda {
namespace {

void check(cublasStatus_t status, const char *what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw makeError(what, " failed: ", cublasGetStatusName(status), " (",
                    cublasGetStatusString(status), ")");
}

int cublasInt(int64_t value, const char *what) {
  if (value < 0 || value > INT_MAX)
    throw makeError("GEMM ", what, " = ", value, " is outside what cuBLAS takes (", INT_MAX, ")");
  return static_cast<int>(value);
}

// --- bf16 through cuBLASLt -------------------------------------------------------------------

// cuBLASLt descriptors, destroyed however the call ends.
struct LtDescriptors {
  cublasLtMatmulDesc_t matmul = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  LtDescriptors() = default;
  LtDescriptors(const LtDescriptors &) = delete;
  LtDescriptors &operator=(const LtDescriptors &) = delete;
  ~LtDescriptors() {
    if (preference)
      cublasLtMatmulPreferenceDestroy(preference);
    if (d)
      cublasLtMatrixLayoutDestroy(d);
    if (b)
      cublasLtMatrixLayoutDestroy(b);
    if (a)
      cublasLtMatrixLayoutDestroy(a);
    if (matmul)
      cublasLtMatmulDescDestroy(matmul);
  }
};

// The largest power of two (at most 256) that divides the address: what cuBLASLt may assume of it.
uint32_t alignmentOf(const void *pointer) {
  auto address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0)
    alignment /= 2;
  return alignment;
}

// What the heuristic may use; more helps large GEMMs (NVIDIA suggests 32 MiB on Hopper).
constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;

// Row-major, for `batch` matrices at the given element strides (0: one matrix shared by every
// batch): Y = alpha * op(A) op(B) + beta * Y as one cuBLASLt matmul: bf16 A and B, Y of yType
// (bf16, or fp32 for gemm's sum with a C), fp32 compute and scale, split-k parts (if any) summed
// in fp32. `workspace` (at least kLtWorkspaceBytes) when the caller holds the context's scratch
// already, else null. Column-major as in gemmBatched: Y^T [n, m] = op(B)^T op(A)^T. Returns false,
// having enqueued nothing, when cuBLASLt has no algorithm for these shapes and alignments.
// What decides a cuBLASLt plan: the problem's shape, layouts, types and the buffers' alignments.
// No padding (10 x 8 + 6 x 4 bytes), so that comparing and hashing its bytes is comparing fields.
struct LtKey {
  int64_t m, n, k, lda, strideA, ldb, strideB, ldy, strideY, batch;
  int32_t yType;
  uint32_t alignA, alignB, alignD, transA, transB;
  bool operator==(const LtKey &o) const {
    return std::memcmp(this, &o, sizeof(LtKey)) == 0;
  }
};

struct LtKeyHash {
  size_t operator()(const LtKey &key) const {
    // FNV-1a over the key's bytes.
    const auto *bytes = reinterpret_cast<const unsigned char *>(&key);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof(LtKey); ++i)
      h = (h ^ bytes[i]) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

// The descriptors and the heuristic's choice for one LtKey; `supported` false when cuBLASLt has no
// algorithm for it (remembered too, so the fallback costs no second heuristic call).
struct LtPlan {
  LtDescriptors lt;
  bool supported = false;
  cublasLtMatmulHeuristicResult_t result = {};
};

} // namespace

class LtPlanCache {
public:
  // At most this many shapes are kept; a run with more (it would need thousands of distinct GEMM
  // shapes) starts again from an empty cache.
  static constexpr size_t kMaxPlans = 4096;
  std::unordered_map<LtKey, std::unique_ptr<LtPlan>, LtKeyHash> plans;
};

void destroyLtPlans(LtPlanCache *plans) noexcept { delete plans; }

namespace {

// Builds the descriptors and asks the heuristic once; see gemmLt.
std::unique_ptr<LtPlan> makeLtPlan(Context &ctx, const LtKey &key) {
  auto plan = std::make_unique<LtPlan>();
  LtDescriptors &lt = plan->lt;
  uint64_t um = static_cast<uint64_t>(key.m), un = static_cast<uint64_t>(key.n);
  uint64_t uk = static_cast<uint64_t>(key.k);
  cublasOperation_t opA = key.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = key.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  static_assert(sizeof(LtKey) == 10 * 8 + 6 * 4, "LtKey must have no padding");
  check(cublasLtMatmulDescCreate(&lt.matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F),
        "cublasLtMatmulDescCreate");
  auto setDesc = [&](cublasLtMatmulDescAttributes_t attribute, const void *value, size_t size,
                     const char *what) {
    check(cublasLtMatmulDescSetAttribute(lt.matmul, attribute, value, size), what);
  };
  // Lt's first operand is B (stored [k, n] row-major, i.e. n x k column-major, or transposed).
  setDesc(CUBLASLT_MATMUL_DESC_TRANSA, &opB, sizeof opB, "cublasLtMatmulDescSetAttribute (TRANSA)");
  setDesc(CUBLASLT_MATMUL_DESC_TRANSB, &opA, sizeof opA, "cublasLtMatmulDescSetAttribute (TRANSB)");
  // Stored shapes (rows, columns, leading dimension), column-major, and the batch.
  auto layout = [&](cublasLtMatrixLayout_t &out, uint64_t rows, uint64_t columns, int64_t ld,
                    int64_t stride, const char *what, cudaDataType_t type = CUDA_R_16BF) {
    check(cublasLtMatrixLayoutCreate(&out, type, rows, columns, std::max<int64_t>(1, ld)), what);
    if (key.batch > 1) {
      int32_t count = cublasInt(key.batch, "batch count");
      check(cublasLtMatrixLayoutSetAttribute(out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                             sizeof count),
            what);
      check(cublasLtMatrixLayoutSetAttribute(out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                             &stride, sizeof stride),
            what);
    }
  };
  layout(lt.a, key.transB ? uk : un, key.transB ? un : uk, key.ldb, key.strideB,
         "cublasLtMatrixLayoutCreate (B)");
  layout(lt.b, key.transA ? um : uk, key.transA ? uk : um, key.lda, key.strideA,
         "cublasLtMatrixLayoutCreate (A)");
  layout(lt.d, un, um, key.ldy, key.strideY, "cublasLtMatrixLayoutCreate (Y)",
         static_cast<cudaDataType_t>(key.yType));
  check(cublasLtMatmulPreferenceCreate(&lt.preference), "cublasLtMatmulPreferenceCreate");
  auto setPreference = [&](cublasLtMatmulPreferenceAttributes_t attribute, const void *value,
                           size_t size, const char *what) {
    check(cublasLtMatmulPreferenceSetAttribute(lt.preference, attribute, value, size), what);
  };
  size_t workspaceBytes = kLtWorkspaceBytes;
  setPreference(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspaceBytes, sizeof workspaceBytes,
                "cublasLtMatmulPreferenceSetAttribute (MAX_WORKSPACE_BYTES)");
  // Split-k parts summed in the compute type (fp32) only: in place or in the output type (bf16)
  // would round each result more than once. No split at all (NONE) is always allowed.
  uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  setPreference(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reductions, sizeof reductions,
                "cublasLtMatmulPreferenceSetAttribute (REDUCTION_SCHEME_MASK)");
  // The arena's offsets are the compiler's: tell the heuristic how aligned the buffers really are
  // (it assumes 256 bytes otherwise).
  setPreference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &key.alignA, sizeof key.alignA,
                "cublasLtMatmulPreferenceSetAttribute (MIN_ALIGNMENT_A_BYTES)");
  setPreference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &key.alignB, sizeof key.alignB,
                "cublasLtMatmulPreferenceSetAttribute (MIN_ALIGNMENT_B_BYTES)");
  setPreference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &key.alignD, sizeof key.alignD,
                "cublasLtMatmulPreferenceSetAttribute (MIN_ALIGNMENT_C_BYTES)");
  setPreference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &key.alignD, sizeof key.alignD,
                "cublasLtMatmulPreferenceSetAttribute (MIN_ALIGNMENT_D_BYTES)");
  int found = 0;
  // C is Y itself (read when beta is not 0).
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      ctx.cublasLt(), lt.matmul, lt.a, lt.b, lt.d, lt.d, lt.preference, 1, &plan->result, &found);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && found == 0))
    return plan;
  check(status, "cublasLtMatmulAlgoGetHeuristic");
  if (plan->result.state != CUBLAS_STATUS_SUCCESS)
    return plan;
  if (plan->result.workspaceSize > workspaceBytes)
    throw makeError("cuBLASLt chose an algorithm that needs ", plan->result.workspaceSize,
                    " bytes of workspace, more than the ", workspaceBytes, " it was offered");
  plan->supported = true;
  return plan;
}

// Row-major, for `batch` matrices at the given element strides (0: one matrix shared by every
// batch): Y = alpha * op(A) op(B) + beta * Y as one cuBLASLt matmul: bf16 A and B, Y of yType
// (bf16, or fp32 for gemm's sum with a C), fp32 compute and scale, split-k parts (if any) summed
// in fp32. `workspace` (at least kLtWorkspaceBytes) when the caller holds the context's scratch
// already, else null. Column-major as in gemmBatched: Y^T [n, m] = op(B)^T op(A)^T. Returns false,
// having enqueued nothing, when cuBLASLt has no algorithm for these shapes and alignments. The
// descriptors and the heuristic's algorithm are made on a shape's first call and kept in the
// context (LtPlanCache): later calls of the shape only enqueue the matmul.
bool gemmLt(Context &ctx, bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha,
            const bf16 *a, int64_t lda, int64_t strideA, const bf16 *b, int64_t ldb,
            int64_t strideB, float beta, void *y, cudaDataType_t yType, int64_t ldy,
            int64_t strideY, int64_t batch, void *workspace = nullptr) {
  LtKey key;
  key.transA = transA;
  key.transB = transB;
  key.m = m;
  key.n = n;
  key.k = k;
  key.lda = lda;
  key.strideA = strideA;
  key.ldb = ldb;
  key.strideB = strideB;
  key.ldy = ldy;
  key.strideY = strideY;
  key.batch = batch;
  key.yType = static_cast<int32_t>(yType);
  // Lt's A is our B and its B our A.
  key.alignA = alignmentOf(b);
  key.alignB = alignmentOf(a);
  key.alignD = alignmentOf(y);
  if (!ctx.ltPlans)
    ctx.ltPlans = new LtPlanCache();
  auto &plans = ctx.ltPlans->plans;
  auto found = plans.find(key);
  if (found == plans.end()) {
    if (plans.size() >= LtPlanCache::kMaxPlans)
      plans.clear();
    found = plans.emplace(key, makeLtPlan(ctx, key)).first;
  }
  const LtPlan &plan = *found->second;
  if (!plan.supported)
    return false;
  if (!workspace && plan.result.workspaceSize > 0)
    workspace = ctx.scratch(plan.result.workspaceSize);
  check(cublasLtMatmul(ctx.cublasLt(), plan.lt.matmul, &alpha, b, plan.lt.a, a, plan.lt.b, &beta,
                       y, plan.lt.d, y, plan.lt.d, &plan.result.algo, workspace,
                       plan.result.workspaceSize, ctx.stream()),
        "cublasLtMatmul (bf16)");
  return true;
}

// Row-major C = alpha * op(A) op(B) + beta * C for `batch` matrices at the given element strides
// (0: one matrix shared by every batch). cuBLAS is column-major, and a row-major matrix is the
// column-major view of its transpose: C^T = op(B)^T op(A)^T, so the operands swap and keep their
// transpose flags, each with its row length as the leading dimension.
// alpha and beta are in the compute type (float for bf16 storage).
template <typename T>
void gemmBatched(Context &ctx, bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                 Compute<T> alpha, const T *a, int64_t lda, int64_t strideA, const T *b,
                 int64_t ldb, int64_t strideB, Compute<T> beta, T *c, int64_t ldc, int64_t strideC,
                 int64_t batch) {
  int im = cublasInt(m, "m"), in = cublasInt(n, "n"), ik = cublasInt(k, "k");
  int ia = std::max(1, cublasInt(lda, "lda")), ib = std::max(1, cublasInt(ldb, "ldb"));
  int ic = std::max(1, cublasInt(ldc, "ldc")), count = cublasInt(batch, "batch count");
  cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  if constexpr (std::is_same_v<T, float>)
    check(cublasSgemmStridedBatched(ctx.cublas(), opB, opA, in, im, ik, &alpha, b, ib, strideB, a,
                                    ia, strideA, &beta, c, ic, strideC, count),
          "cublasSgemmStridedBatched");
  else if constexpr (std::is_same_v<T, double>)
    check(cublasDgemmStridedBatched(ctx.cublas(), opB, opA, in, im, ik, &alpha, b, ib, strideB, a,
                                    ia, strideA, &beta, c, ic, strideC, count),
          "cublasDgemmStridedBatched");
  else {
    static_assert(std::is_same_v<T, bf16>);
    // alpha and beta in CUBLAS_COMPUTE_32F's scale type.
    static_assert(std::is_same_v<Compute<T>, float>);
    if (gemmLt(ctx, transA, transB, m, n, k, alpha, a, lda, strideA, b, ldb, strideB, beta, c,
               CUDA_R_16BF, ldc, strideC, batch))
      return;
    check(cublasGemmStridedBatchedEx(ctx.cublas(), opB, opA, in, im, ik, &alpha, b, CUDA_R_16BF, ib,
                                     strideB, a, CUDA_R_16BF, ia, strideA, &beta, c, CUDA_R_16BF,
                                     ic, strideC, count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx (bf16, fp32 compute)");
  }
}

Dims broadcastShape(const Dims &a, const Dims &b) {
  size_t rank = std::max(a.size(), b.size());
  Dims result(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    result[i] = da == 1 ? db : da;
  }
  return result;
}

// numpy.matmul: rank-1 operands are promoted to matrices, batch dimensions broadcast. With the
// transpose flags (version 5) an operand is stored with its last two dimensions swapped and
// cuBLAS reads it transposed (CUBLAS_OP_T): its leading dimension stays its stored row length.
template <typename T>
void matmulAs(Context &ctx, bool transA, bool transB, const Tensor &aRef, const Tensor &bRef,
              const Tensor &yRef) {
  Dims a = aRef.shape.size() == 1 ? Dims{1, aRef.shape[0]} : aRef.shape;
  Dims b = bRef.shape.size() == 1 ? Dims{bRef.shape[0], 1} : bRef.shape;
  int64_t lda = a.back(), ldb = b.back();
  int64_t m = transA ? a.back() : a[a.size() - 2], k = transA ? a[a.size() - 2] : a.back();
  int64_t n = transB ? b[b.size() - 2] : b.back();
  Dims aBatch(a.begin(), a.end() - 2), bBatch(b.begin(), b.end() - 2);
  const T *aData = aRef.as<T>(), *bData = bRef.as<T>();
  T *y = yRef.as<T>();
  if (yRef.numel() == 0)
    return;
  if (k == 0) {
    // An empty sum.
    SLRT_CUDA_CHECK(
        cudaMemsetAsync(y, 0, static_cast<size_t>(yRef.numel()) * sizeof(T), ctx.stream()));
    return;
  }
  int64_t aCount = product(aBatch, 0, aBatch.size()), bCount = product(bBatch, 0, bBatch.size());
  if (bCount == 1 && !transA) {
    // Activations times a weight: A's batches are contiguous rows, so one GEMM of (batch * m)
    // rows.
    return gemmBatched<T>(ctx, false, transB, aCount * m, n, k, 1, aData, lda, 0, bData, ldb, 0,
                          0, y, n, 0, 1);
  }
  Dims batch = broadcastShape(aBatch, bBatch);
  int64_t count = product(batch, 0, batch.size());
  std::vector<int64_t> aStrides = broadcastStrides(aBatch, batch);
  std::vector<int64_t> bStrides = broadcastStrides(bBatch, batch);
  // Laid out densely over the batch (size-1 dimensions step nowhere, whatever their stride).
  std::vector<int64_t> dense = denseStrides(batch);
  auto isDense = [&](const std::vector<int64_t> &strides) {
    for (size_t d = 0; d < batch.size(); ++d)
      if (batch[d] != 1 && strides[d] != dense[d])
        return false;
    return true;
  };
  bool aDense = isDense(aStrides), bDense = isDense(bStrides);
  if ((aCount == 1 || aDense) && (bCount == 1 || bDense))
    return gemmBatched<T>(ctx, transA, transB, m, n, k, 1, aData, lda, aCount == 1 ? 0 : m * k,
                          bData, ldb, bCount == 1 ? 0 : k * n, 0, y, n, m * n, count);
  // Batch dimensions that broadcast both ways: one GEMM per result matrix.
  std::vector<int64_t> index(batch.size(), 0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t aAt = 0, bAt = 0;
    for (size_t d = 0; d < batch.size(); ++d) {
      aAt += index[d] * aStrides[d];
      bAt += index[d] * bStrides[d];
    }
    gemmBatched<T>(ctx, transA, transB, m, n, k, 1, aData + aAt * m * k, lda, 0,
                   bData + bAt * k * n, ldb, 0, 0, y + i * m * n, n, 0, 1);
    for (size_t d = batch.size(); d-- > 0;) {
      if (++index[d] < batch[d])
        break;
      index[d] = 0;
    }
  }
}

} // namespace

void matmul(Context &ctx, bool transA, bool transB, const Tensor &a, const Tensor &b,
            const Tensor &y) {
  withFloatType(y.element,
                [&](auto type) { matmulAs<decltype(type)>(ctx, transA, transB, a, b, y); });
}

// ONNX Gemm: Y = alpha * op(A) * op(B) + beta * C, C unidirectionally broadcast to Y. Y starts as
// C broadcast, so that cuBLAS adds beta * Y in place; without C, or with beta 0, cuBLAS overwrites
// Y and C is never read. A bf16 GEMM with a C sums in fp32 (below).
void gemm(Context &ctx, bool transA, bool transB, float alpha, float beta, const Tensor &a,
          const Tensor &b, const Tensor *c, const Tensor &y) {
  int64_t m = y.shape[0], n = y.shape[1];
  int64_t k = transA ? a.shape[0] : a.shape[1];
  if (m == 0 || n == 0)
    return;
  double betaUsed = 0;
  if (c && beta != 0.0f) {
    expand(ctx, *c, y);
    betaUsed = beta;
  }
  if (k == 0)
    return scale(ctx, betaUsed, y);
  if (y.element == Element::kBF16 && betaUsed != 0) {
    // With a bf16 Y and beta != 0, cuBLAS and cuBLASLt rounded alpha * op(A) op(B) to bf16 before
    // adding beta * C on an H200 (2026-11-26: one bf16 ulp off with a full C, m 64, n 128, k 96,
    // also with split-k summed in fp32; so did cuBLASLt's bias epilogue with a bias row): the sum
    // is made in an fp32 Y (C widened into it) and rounded to bf16 once, by CAST. It costs an
    // fp32 pass over Y (the fused bias epilogue would not, if cuBLASLt rounded once).
    ScratchLayout layout;
    size_t accAt = layout.add<float>(m * n), workspaceAt = layout.add<std::byte>(kLtWorkspaceBytes);
    std::byte *base = ctx.scratch(layout.bytes());
    Tensor acc{base + accAt, Element::kF32, sizeof(float), {m, n}};
    cast(ctx, y, acc);
    if (gemmLt(ctx, transA, transB, m, n, k, alpha, a.as<bf16>(), a.shape[1], 0, b.as<bf16>(),
               b.shape[1], 0, beta, acc.data, CUDA_R_32F, n, 0, 1, base + workspaceAt))
      return cast(ctx, acc, y);
  }
  withFloatType(y.element, [&](auto type) {
    using T = decltype(type);
    gemmBatched<T>(ctx, transA, transB, m, n, k, static_cast<Compute<T>>(alpha), a.as<T>(),
                   a.shape[1], 0, b.as<T>(), b.shape[1], 0, static_cast<Compute<T>>(betaUsed),
                   y.as<T>(), n, 0, 1);
  });
}

} // namespace slrt::cuda
