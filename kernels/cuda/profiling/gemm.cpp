// GEMM throughput through cuBLASLt: the heuristic's best algorithm for each shape, with a
// 32 MiB workspace (what frameworks give it), timed per call with CUDA events.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "cuda/profiling/profiling_cuda.hpp"

namespace rb::prof::cuda {
namespace {

void check_cuda(cudaError_t e, const char* call) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("CUDA call ") + call +
                             " failed: " + cudaGetErrorString(e));
}
void check_lt(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLASLt call ") + call +
                             " failed: " + cublasGetStatusString(s));
}
#define PROF_CUDA(call) check_cuda((call), #call)
#define PROF_LT(call) check_lt((call), #call)

struct LtHandle {
  cublasLtHandle_t h = nullptr;
  LtHandle() { PROF_LT(cublasLtCreate(&h)); }
  ~LtHandle() {
    if (h) cublasLtDestroy(h);
  }
};
struct MatmulDesc {
  cublasLtMatmulDesc_t d = nullptr;
  MatmulDesc(cublasComputeType_t c, cudaDataType_t scale) {
    PROF_LT(cublasLtMatmulDescCreate(&d, c, scale));
  }
  ~MatmulDesc() {
    if (d) cublasLtMatmulDescDestroy(d);
  }
};
struct Layout {
  cublasLtMatrixLayout_t l = nullptr;
  Layout(cudaDataType_t t, int rows, int cols) {
    PROF_LT(cublasLtMatrixLayoutCreate(&l, t, rows, cols, rows));
  }
  ~Layout() {
    if (l) cublasLtMatrixLayoutDestroy(l);
  }
};
struct Preference {
  cublasLtMatmulPreference_t p = nullptr;
  Preference() { PROF_LT(cublasLtMatmulPreferenceCreate(&p)); }
  ~Preference() {
    if (p) cublasLtMatmulPreferenceDestroy(p);
  }
};

struct TypeChoice {
  cudaDataType_t data;
  cudaDataType_t scale;
  cublasComputeType_t compute;
  std::size_t elem;
};

TypeChoice choose(const std::string& type) {
  if (type == "bfloat16") return {CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F, 2};
  if (type == "float16") return {CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F, 2};
  if (type == "tf32") return {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4};
  if (type == "float32") return {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, 4};
  if (type == "float64") return {CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F, 8};
  throw std::invalid_argument("gemm: unknown type '" + type +
                              "' (bfloat16, float16, tf32, float32, float64)");
}

}  // namespace

std::vector<double> gemm_seconds(const std::string& type, int m, int n, int k, int warmup,
                                 int iterations, void* stream_ptr) {
  const TypeChoice tc = choose(type);
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  const std::size_t workspace_bytes = 32u << 20;
  DeviceBuffer a(tc.elem * static_cast<std::size_t>(m) * k);
  DeviceBuffer b(tc.elem * static_cast<std::size_t>(k) * n);
  DeviceBuffer c(tc.elem * static_cast<std::size_t>(m) * n);
  DeviceBuffer workspace(workspace_bytes);
  // Small values (bytes 0x3c -> ~1 in fp16/bf16 terms, finite in every type) so no NaN/inf
  // slows or changes the kernels.
  PROF_CUDA(cudaMemsetAsync(a.get(), 0x3c, a.bytes(), stream));
  PROF_CUDA(cudaMemsetAsync(b.get(), 0x3c, b.bytes(), stream));

  LtHandle lt;
  MatmulDesc op(tc.compute, tc.scale);
  Layout la(tc.data, m, k), lb(tc.data, k, n), lc(tc.data, m, n);
  Preference pref;
  PROF_LT(cublasLtMatmulPreferenceSetAttribute(pref.p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                               &workspace_bytes, sizeof workspace_bytes));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  PROF_LT(cublasLtMatmulAlgoGetHeuristic(lt.h, op.d, la.l, lb.l, lc.l, lc.l, pref.p, 1, &heuristic,
                                         &found));
  if (found == 0)
    throw std::runtime_error("cuBLASLt has no algorithm for a " + type + " GEMM of " +
                             std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k));
  const double one = 1.0, zero = 0.0;
  const float onef = 1.0f, zerof = 0.0f;
  const void* alpha = tc.scale == CUDA_R_64F ? static_cast<const void*>(&one) : &onef;
  const void* beta = tc.scale == CUDA_R_64F ? static_cast<const void*>(&zero) : &zerof;
  auto call = [&] {
    PROF_LT(cublasLtMatmul(lt.h, op.d, alpha, a.get(), la.l, b.get(), lb.l, beta, c.get(), lc.l,
                           c.get(), lc.l, &heuristic.algo, workspace.get(), workspace_bytes,
                           stream));
  };
  for (int i = 0; i < warmup; ++i) call();
  EventTimeline tl(static_cast<std::size_t>(iterations) + 1, stream);
  tl.mark(0);
  for (int i = 0; i < iterations; ++i) {
    call();
    tl.mark(static_cast<std::size_t>(i) + 1);
  }
  PROF_CUDA(cudaStreamSynchronize(stream));
  std::vector<double> out;
  for (int i = 0; i < iterations; ++i)
    out.push_back(tl.seconds(static_cast<std::size_t>(i), static_cast<std::size_t>(i) + 1));
  return out;
}

}  // namespace rb::prof::cuda
