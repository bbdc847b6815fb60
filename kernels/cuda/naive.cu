// Naive path: cuBLAS GEMMs over a materialised fp32 score block, a mask+softmax kernel
// that applies the Pattern exactly on global positions (no row views: this path is the
// independent reference the fused kernels are checked against), and one fused kernel that
// merges the block result into the running (out, lse) by log-sum-exp.
//
// Work is cut into tasks of (a group of heads, a range of query rows) so the scratch
// (scores fp32 + probabilities in dtype + block output fp32) stays under the budget.
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "attention_cuda.hpp"
#include "check.hpp"
#include "common.cuh"

namespace rb::attn::gpu {
namespace {

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32:
      return CUDA_R_32F;
    case DType::F16:
      return CUDA_R_16F;
    case DType::BF16:
      return CUDA_R_16BF;
  }
  return CUDA_R_32F;
}

// Row-major C[m x n] = alpha * op(A) * op(B) + beta * C, batched over `batch` heads with the
// given element strides; cuBLAS is column-major, so this computes C^T = op(B)^T op(A)^T.
void gemm_rm(cublasHandle_t h, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
             const void* a, cudaDataType_t ta, long long lda, long long stride_a, const void* b,
             cudaDataType_t tb, long long ldb, long long stride_b, float beta, float* c,
             long long ldc, long long stride_c, int batch) {
  RBK_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      h, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha,
      b, tb, int(ldb), stride_b, a, ta, int(lda), stride_a, &beta, c, CUDA_R_32F, int(ldc),
      stride_c, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

struct Task {
  int bh0;          // first flattened (batch, head) index
  int nbh;          // heads in this task
  std::int64_t r0;  // first query row (relative to the span)
  std::int64_t m;   // query rows
};

// One block per (head, query row): mask, max, sum, probabilities, block lse.
template <typename T>
__global__ void softmax_rows(const float* __restrict__ scores, T* __restrict__ probs,
                             float* __restrict__ block_lse, std::int64_t m, std::int64_t n, int bh0,
                             int heads, Span q, Span kv, std::int64_t r0, DevPattern pat) {
  const std::int64_t row = blockIdx.x;  // (head in task) * m + i
  const int hh = int(row / m);
  const std::int64_t i = row % m;
  const int head = (bh0 + hh) % heads;
  const std::int64_t qp = q.first + (r0 + i) * q.stride;
  const float* s = scores + row * n;
  T* p = probs + row * n;
  __shared__ float red[32];
  float mx = -INFINITY;
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x)
    if (pattern_allows(pat, qp, kv.first + j * kv.stride, head)) mx = fmaxf(mx, s[j]);
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = mx;
  __syncthreads();
  mx = -INFINITY;
  for (int w = 0; w < int(blockDim.x >> 5); ++w) mx = fmaxf(mx, red[w]);
  __syncthreads();
  float sum = 0.f;
  if (mx != -INFINITY)
    for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x)
      if (pattern_allows(pat, qp, kv.first + j * kv.stride, head)) sum += expf(s[j] - mx);
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = sum;
  __syncthreads();
  sum = 0.f;
  for (int w = 0; w < int(blockDim.x >> 5); ++w) sum += red[w];
  const float lse = (sum > 0.f) ? mx + logf(sum) : -INFINITY;
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const bool ok = lse != -INFINITY && pattern_allows(pat, qp, kv.first + j * kv.stride, head);
    p[j] = T(ok ? expf(s[j] - lse) : 0.f);
  }
  if (threadIdx.x == 0) block_lse[row] = lse;
}

// Fused merge of the block result (o_blk, lse_blk) into the running (out, lse). One warp per row.
__global__ void merge_rows(const float* __restrict__ o_blk, const float* __restrict__ lse_blk,
                           float* __restrict__ out, float* __restrict__ lse, std::int64_t m,
                           int nbh, int bh0, std::int64_t q_rows, std::int64_t row_base,
                           int head_dim) {
  const std::int64_t w = (blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (w >= m * nbh) return;
  const float lb = lse_blk[w];
  if (lb == -INFINITY) return;  // nothing allowed in this block: the running state stays
  const std::int64_t bh = bh0 + w / m;
  const std::int64_t grow = bh * q_rows + row_base + (w % m);
  merge_row(out + grow * head_dim, lse + grow, o_blk + w * head_dim, lb, head_dim, lane);
}

// Backward: P = exp(S - lse_final) on allowed pairs (stored in dtype).
template <typename T>
__global__ void bwd_probs(const float* __restrict__ scores, T* __restrict__ probs,
                          const float* __restrict__ lse, std::int64_t m, std::int64_t n, int bh0,
                          int heads, std::int64_t q_rows, Span q, Span kv, std::int64_t r0,
                          DevPattern pat) {
  const int hh = blockIdx.y;
  const int head = (bh0 + hh) % heads;
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < m * n;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t i = e / n, j = e % n;
    const float l = lse[(bh0 + hh) * q_rows + q.row0 + r0 + i];
    const std::int64_t idx = hh * m * n + e;
    const bool ok = l != -INFINITY && pattern_allows(pat, q.first + (r0 + i) * q.stride,
                                                     kv.first + j * kv.stride, head);
    probs[idx] = T(ok ? expf(scores[idx] - l) : 0.f);
  }
}

// Backward: dS = scale * P * (dP - delta), written over P.
template <typename T>
__global__ void bwd_dscores(const float* __restrict__ dp, T* __restrict__ probs,
                            const float* __restrict__ delta, std::int64_t m, std::int64_t n,
                            int bh0, std::int64_t q_rows, std::int64_t q_row0, std::int64_t r0,
                            float scale) {
  const int hh = blockIdx.y;
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < m * n;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t i = e / n;
    const float d = delta[(bh0 + hh) * q_rows + q_row0 + r0 + i];
    const std::int64_t idx = hh * m * n + e;
    probs[idx] = T(scale * to_float(probs[idx]) * (dp[idx] - d));
  }
}

int grid_1d(std::int64_t n, int threads) {
  const std::int64_t b = (n + threads - 1) / threads;
  return int(std::max<std::int64_t>(1, std::min<std::int64_t>(b, 4096)));
}

// The most (head, query row) rows one task of for_each_task holds: whole heads when a head's
// rows fit the budget, else the rows that fit.
std::size_t task_rows(std::int64_t rows, int bh_total, std::size_t bytes_per_row,
                      std::size_t budget) {
  const std::size_t rows_fit = std::max<std::size_t>(1, budget / bytes_per_row);
  return std::min<std::size_t>(std::size_t(rows) * bh_total,
                               rows_fit >= std::size_t(rows) ? (rows_fit / rows) * rows : rows_fit);
}

// Splits (heads x query rows) into tasks whose scratch fits `budget` bytes, given the bytes
// one query row of one head needs.
template <typename F>
void for_each_task(int bh_total, std::int64_t rows, std::size_t bytes_per_row, std::size_t budget,
                   F&& f) {
  const std::int64_t rows_fit = std::max<std::int64_t>(1, std::int64_t(budget / bytes_per_row));
  if (rows_fit >= rows) {
    const int heads_fit = int(std::min<std::int64_t>(bh_total, rows_fit / rows));
    for (int bh = 0; bh < bh_total; bh += heads_fit)
      f(Task{bh, std::min(heads_fit, bh_total - bh), 0, rows});
  } else {
    for (int bh = 0; bh < bh_total; ++bh)
      for (std::int64_t r = 0; r < rows; r += rows_fit)
        f(Task{bh, 1, r, std::min(rows_fit, rows - r)});
  }
}

}  // namespace

NaiveAttention::NaiveAttention(cudaStream_t stream, Alloc alloc, Free release, std::size_t budget)
    : stream_(stream), alloc_(std::move(alloc)), free_(std::move(release)), budget_(budget) {
  cublasHandle_t h = nullptr;
  RBK_CUBLAS_CHECK(cublasCreate(&h));
  handle_ = h;
  RBK_CUBLAS_CHECK(cublasSetStream(h, stream_));
  // Default math with CUBLAS_COMPUTE_32F: fp32 data stays fp32 (no TF32), the reference
  // must not silently lose precision; bf16/fp16 data runs on tensor cores.
}

NaiveAttention::~NaiveAttention() {
  try {
    release_workspace();
  } catch (...) {
    // A destructor must not throw; a failing free here means the context is already broken.
  }
  if (handle_) cublasDestroy(static_cast<cublasHandle_t>(handle_));
}

void NaiveAttention::release_workspace() {
  if (ws_) {
    // The stream may still use the scratch; freeing device memory synchronises the device.
    free_(ws_);
    ws_ = nullptr;
    ws_bytes_ = 0;
  }
}

void* NaiveAttention::workspace(std::size_t bytes) {
  if (bytes <= ws_bytes_) return ws_;
  release_workspace();
  ws_ = alloc_(bytes);
  ws_bytes_ = bytes;
  return ws_;
}

void NaiveAttention::forward(const ForwardBlock& blk) {
  const Dims& d = blk.dims;
  const std::int64_t m_all = blk.q.count, n = blk.kv.count;
  if (m_all <= 0 || n <= 0) return;
  auto h = static_cast<cublasHandle_t>(handle_);
  const int hd = d.head_dim;
  const int bh_total = d.batch * d.heads;
  const std::size_t es = dtype_size(blk.dtype);
  const bool f32 = blk.dtype == DType::F32;
  // scores fp32 (probabilities overwrite them in place for fp32), probabilities in dtype,
  // block output fp32, block lse.
  const std::size_t per_row =
      std::size_t(n) * 4 + (f32 ? 0 : std::size_t(n) * es) + std::size_t(hd) * 4 + 4;
  const std::size_t max_rows = task_rows(m_all, bh_total, per_row, budget_);
  char* ws = static_cast<char*>(workspace(per_row * max_rows + 256 * 4));
  const cudaDataType_t ty = cuda_type(blk.dtype);
  const DevPattern pat = dev_pattern(blk.pattern);

  for_each_task(bh_total, m_all, per_row, budget_, [&](const Task& t) {
    const std::size_t rows = std::size_t(t.nbh) * t.m;
    float* scores = reinterpret_cast<float*>(ws);
    char* p_raw = ws + ((rows * n * 4 + 255) / 256) * 256;
    void* probs = f32 ? static_cast<void*>(scores) : static_cast<void*>(p_raw);
    char* after_p = f32 ? p_raw : p_raw + ((rows * n * es + 255) / 256) * 256;
    float* o_blk = reinterpret_cast<float*>(after_p);
    float* lse_blk = reinterpret_cast<float*>(after_p + ((rows * hd * 4 + 255) / 256) * 256);

    const char* qb = static_cast<const char*>(blk.q_data) +
                     ((std::int64_t(t.bh0) * d.q_rows + blk.q.row0 + t.r0) * hd) * es;
    const char* kb = static_cast<const char*>(blk.k_data) +
                     ((std::int64_t(t.bh0) * d.kv_rows + blk.kv.row0) * hd) * es;
    const char* vb = static_cast<const char*>(blk.v_data) +
                     ((std::int64_t(t.bh0) * d.kv_rows + blk.kv.row0) * hd) * es;
    // S[m x n] = scale * Q K^T
    gemm_rm(h, false, true, int(t.m), int(n), hd, blk.scale, qb, ty, hd, d.q_rows * hd, kb, ty, hd,
            d.kv_rows * hd, 0.f, scores, n, t.m * n, t.nbh);
    with_storage_type(blk.dtype, [&](auto tag) {
      using T = decltype(tag);
      softmax_rows<T><<<unsigned(rows), 256, 0, stream_>>>(scores, static_cast<T*>(probs), lse_blk,
                                                           t.m, n, t.bh0, d.heads, blk.q, blk.kv,
                                                           t.r0, pat);
    });
    RBK_LAUNCH_CHECK();
    // O_blk[m x hd] = P V
    gemm_rm(h, false, false, int(t.m), hd, int(n), 1.f, probs, ty, n, t.m * n, vb, ty, hd,
            d.kv_rows * hd, 0.f, o_blk, hd, t.m * hd, t.nbh);
    merge_rows<<<grid_1d(std::int64_t(rows) * 32, 256), 256, 0, stream_>>>(
        o_blk, lse_blk, blk.out, blk.lse, t.m, t.nbh, t.bh0, d.q_rows, blk.q.row0 + t.r0, hd);
    RBK_LAUNCH_CHECK();
  });
}

void NaiveAttention::backward(const BackwardBlock& blk) {
  const Dims& d = blk.dims;
  const std::int64_t m_all = blk.q.count, n = blk.kv.count;
  if (m_all <= 0 || n <= 0) return;
  auto h = static_cast<cublasHandle_t>(handle_);
  const int hd = d.head_dim;
  const int bh_total = d.batch * d.heads;
  const std::size_t es = dtype_size(blk.dtype);
  // scores / dP fp32 + probabilities / dS in dtype.
  const std::size_t per_row = std::size_t(n) * (4 + es);
  const std::size_t max_rows = task_rows(m_all, bh_total, per_row, budget_);
  char* ws = static_cast<char*>(workspace(per_row * max_rows + 256 * 2));
  const cudaDataType_t ty = cuda_type(blk.dtype);
  const DevPattern pat = dev_pattern(blk.pattern);

  for_each_task(bh_total, m_all, per_row, budget_, [&](const Task& t) {
    const std::size_t rows = std::size_t(t.nbh) * t.m;
    float* scores = reinterpret_cast<float*>(ws);
    void* probs = ws + ((rows * n * 4 + 255) / 256) * 256;
    const std::int64_t qoff = (std::int64_t(t.bh0) * d.q_rows + blk.q.row0 + t.r0) * hd;
    const std::int64_t kvoff = (std::int64_t(t.bh0) * d.kv_rows + blk.kv.row0) * hd;
    const char* qb = static_cast<const char*>(blk.q_data) + qoff * es;
    const char* dob = static_cast<const char*>(blk.dout) + qoff * es;
    const char* kb = static_cast<const char*>(blk.k_data) + kvoff * es;
    const char* vb = static_cast<const char*>(blk.v_data) + kvoff * es;
    const long long sq = d.q_rows * hd, skv = d.kv_rows * hd, ss = t.m * n;
    const dim3 grid(unsigned(std::min<std::int64_t>(4096, (t.m * n + 255) / 256)), unsigned(t.nbh));

    gemm_rm(h, false, true, int(t.m), int(n), hd, blk.scale, qb, ty, hd, sq, kb, ty, hd, skv, 0.f,
            scores, n, ss, t.nbh);
    with_storage_type(blk.dtype, [&](auto tag) {
      using T = decltype(tag);
      bwd_probs<T><<<grid, 256, 0, stream_>>>(scores, static_cast<T*>(probs), blk.lse, t.m, n,
                                              t.bh0, d.heads, d.q_rows, blk.q, blk.kv, t.r0, pat);
    });
    RBK_LAUNCH_CHECK();
    // dV[n x hd] += P^T dO
    gemm_rm(h, true, false, int(n), hd, int(t.m), 1.f, probs, ty, n, ss, dob, ty, hd, sq, 1.f,
            blk.dv + kvoff, hd, skv, t.nbh);
    // dP[m x n] = dO V^T
    gemm_rm(h, false, true, int(t.m), int(n), hd, 1.f, dob, ty, hd, sq, vb, ty, hd, skv, 0.f,
            scores, n, ss, t.nbh);
    with_storage_type(blk.dtype, [&](auto tag) {
      using T = decltype(tag);
      bwd_dscores<T><<<grid, 256, 0, stream_>>>(scores, static_cast<T*>(probs), blk.delta, t.m, n,
                                                t.bh0, d.q_rows, blk.q.row0, t.r0, blk.scale);
    });
    RBK_LAUNCH_CHECK();
    // dQ[m x hd] += dS K ; dK[n x hd] += dS^T Q
    gemm_rm(h, false, false, int(t.m), hd, int(n), 1.f, probs, ty, n, ss, kb, ty, hd, skv, 1.f,
            blk.dq + qoff, hd, sq, t.nbh);
    gemm_rm(h, true, false, int(n), hd, int(t.m), 1.f, probs, ty, n, ss, qb, ty, hd, sq, 1.f,
            blk.dk + kvoff, hd, skv, t.nbh);
  });
}

}  // namespace rb::attn::gpu
