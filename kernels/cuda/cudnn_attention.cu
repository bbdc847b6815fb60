// cuDNN fused attention through the backend API (no cudnn-frontend): the SDPA operation
// graphs, an execution-plan cache per shape, and the glue kernels that merge cuDNN's 16-bit
// block outputs into ringbench's fp32 running accumulators.
#include "cudnn_attention.hpp"

#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudnn.h>

#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "attention_cuda.hpp"
#include "check.hpp"
#include "common.cuh"
#include "kernel_paths.hpp"
#include "sdpa_split.hpp"

namespace rb::attn::gpu {
namespace {

// ---------------------------------------------------------------- glue kernels

// Row w of a library call's packed [batch][heads][m] output -> row of a ringbench buffer
// [batch][heads_total][rows]: the call covers heads head0 + k*head_step and rows
// row0 + i*row_step (a head group's row view).
struct RowMap {
  std::int64_t m;
  int heads, heads_total, head0, head_step;
  std::int64_t rows, row0, row_step;
  __device__ std::int64_t operator()(std::int64_t w) const {
    const std::int64_t i = w % m, hh = (w / m) % heads, bi = w / (m * heads);
    return (bi * heads_total + head0 + hh * head_step) * rows + row0 + i * row_step;
  }
};

// One warp per row: (O_b, lse_b) of a library call merged into the running fp32 (out, lse)
// by log-sum-exp.
template <typename T>
__global__ void merge_call(const T* __restrict__ o_blk, const float* __restrict__ lse_blk,
                           float* __restrict__ out, float* __restrict__ lse, RowMap map,
                           std::int64_t n_rows, int head_dim) {
  const std::int64_t w = (blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (w >= n_rows) return;
  const float lb = lse_blk[w];
  if (!(lb > -INFINITY)) return;  // nothing allowed (cannot happen for a split piece)
  const std::int64_t grow = map(w);
  merge_row(out + grow * head_dim, lse + grow, o_blk + w * head_dim, lb, head_dim, lane);
}

// The fp32 gradient rows a call covers += its packed 16-bit result. One warp per row, so the
// row map's 64-bit divisions are paid once per row, not per element (per element they cost
// more than the memory traffic: issue #26, the cudnn backward's overhead); `vector`: 4
// elements per lane (16-byte fp32, 8-byte 16-bit accesses), where the caller found the head dim
// a multiple of 4 and both bases aligned, so every row start is.
template <typename T>
__global__ void add_rows(float* __restrict__ dst, const T* __restrict__ src, RowMap map,
                         std::int64_t n_rows, int head_dim, bool vector) {
  const int lane = threadIdx.x & 31;
  const std::int64_t warps = (std::int64_t(gridDim.x) * blockDim.x) >> 5;
  for (std::int64_t w = (blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x) >> 5; w < n_rows;
       w += warps) {
    float* d = dst + map(w) * head_dim;
    const T* s = src + w * head_dim;
    if (!vector) {
      for (int c = lane; c < head_dim; c += 32) d[c] += to_float(s[c]);
      continue;
    }
    for (int c = lane * 4; c < head_dim; c += 128) {
      float4 acc = *reinterpret_cast<const float4*>(d + c);
      const uint2 raw = *reinterpret_cast<const uint2*>(s + c);
      const T* v = reinterpret_cast<const T*>(&raw);
      acc.x += to_float(v[0]);
      acc.y += to_float(v[1]);
      acc.z += to_float(v[2]);
      acc.w += to_float(v[3]);
      *reinterpret_cast<float4*>(d + c) = acc;
    }
  }
}

// A packed copy of the final lse rows a call covers, so the statistics tensor handed to cuDNN
// is packed and 16-byte aligned whatever the rows.
__global__ void gather_rows(float* __restrict__ dst, const float* __restrict__ src, RowMap map,
                            std::int64_t n_rows) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n_rows;
       i += std::int64_t(gridDim.x) * blockDim.x)
    dst[i] = src[map(i)];
}

// ---------------------------------------------------------------- backend API wrappers

[[noreturn]] void throw_cudnn(cudnnStatus_t st, const std::string& what) {
  char detail[1024] = {0};
  cudnnGetLastErrorString(detail, sizeof(detail));
  throw std::runtime_error("cuDNN call failed: " + what + ": " + cudnnGetErrorString(st) +
                           (detail[0] ? std::string(" (") + detail + ")" : std::string()));
}
#define RBK_CUDNN_CHECK(call, what)                                    \
  do {                                                                 \
    cudnnStatus_t rbk_st_ = (call);                                    \
    if (rbk_st_ != CUDNN_STATUS_SUCCESS) throw_cudnn(rbk_st_, (what)); \
  } while (0)

// One backend descriptor, destroyed with its owner.
class Desc {
 public:
  Desc(cudnnBackendDescriptorType_t type, const char* name) : name_(name) {
    RBK_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d_), std::string("creating ") + name_);
  }
  ~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }
  Desc& set(cudnnBackendAttributeName_t attr, cudnnBackendAttributeType_t type, std::int64_t n,
            const void* values) {
    RBK_CUDNN_CHECK(cudnnBackendSetAttribute(d_, attr, type, n, values),
                    "setting attribute " + std::to_string(int(attr)) + " of " + name_);
    return *this;
  }
  Desc& set(cudnnBackendAttributeName_t attr, const Desc& other) {
    cudnnBackendDescriptor_t o = other.get();
    return set(attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o);
  }
  Desc& finalize() {
    RBK_CUDNN_CHECK(cudnnBackendFinalize(d_), std::string("finalizing ") + name_);
    return *this;
  }
  // Finalize that reports failure instead of throwing (engine configs a shape does not fit).
  bool try_finalize() { return cudnnBackendFinalize(d_) == CUDNN_STATUS_SUCCESS; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
  const char* name_;
};
using DescPtr = std::shared_ptr<Desc>;

cudnnDataType_t cudnn_type(DType t) {
  return t == DType::BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
}

using Dims4 = std::array<std::int64_t, 4>;
Dims4 packed(const Dims4& d) {
  return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
}

// An operation graph under construction: tensors and operations, kept alive together.
class GraphBuilder {
 public:
  const Desc& tensor(std::int64_t uid, const Dims4& dims, const Dims4& strides,
                     cudnnDataType_t type, bool is_virtual = false, bool by_value = false) {
    auto t = std::make_shared<Desc>(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor descriptor");
    const std::int64_t align = 16;
    const bool virt = is_virtual;
    t->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type)
        .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data())
        .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data())
        .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid)
        .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align)
        .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt);
    if (by_value) {
      const bool bv = true;
      t->set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &bv);
    }
    t->finalize();
    keep_.push_back(t);
    return *t;
  }
  // A virtual (never materialised) intermediate, packed strides.
  const Desc& virt(const Dims4& dims, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    return tensor(next_virtual_++, dims, packed(dims), type, true);
  }
  // A by-value fp32 scalar (its variant-pack pointer is host memory).
  const Desc& scalar(std::int64_t uid) {
    return tensor(uid, {1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_FLOAT, false, true);
  }

  void pointwise(cudnnPointwiseMode_t mode, const Desc& x, const Desc* b, const Desc& y,
                 const Desc* t = nullptr, std::int64_t axis = -1,
                 cudnnDataType_t prec = CUDNN_DATA_FLOAT) {
    auto pw = std::make_shared<Desc>(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise descriptor");
    pw->set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode)
        .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    if (axis >= 0) pw->set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    pw->finalize();
    auto op =
        std::make_shared<Desc>(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "pointwise operation");
    const float one = 1.f;
    op->set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, *pw)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one);
    if (b) op->set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
    if (t) op->set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
    op->set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y).finalize();
    keep_.push_back(pw);
    add_op(op);
  }
  void matmul(const Desc& a, const Desc& b, const Desc& c) {
    auto mm = std::make_shared<Desc>(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul descriptor");
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    mm->set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp).finalize();
    auto op = std::make_shared<Desc>(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "matmul operation");
    op->set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a)
        .set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b)
        .set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c)
        .set(CUDNN_ATTR_OPERATION_MATMUL_DESC, *mm)
        .finalize();
    keep_.push_back(mm);
    add_op(op);
  }
  void reduction(cudnnReduceTensorOp_t what, const Desc& x, const Desc& y) {
    auto rd = std::make_shared<Desc>(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction descriptor");
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    rd->set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &what)
        .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp)
        .finalize();
    auto op =
        std::make_shared<Desc>(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "reduction operation");
    op->set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x)
        .set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y)
        .set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, *rd)
        .finalize();
    keep_.push_back(rd);
    add_op(op);
  }

  // A view change (transpose by strides) of a virtual tensor.
  void reshape(const Desc& x, const Desc& y) {
    auto op =
        std::make_shared<Desc>(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, "reshape operation");
    op->set(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x)
        .set(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y)
        .finalize();
    add_op(op);
  }
  // A virtual tensor with explicit strides.
  const Desc& virt_strided(const Dims4& dims, const Dims4& strides, cudnnDataType_t type) {
    return tensor(next_virtual_++, dims, strides, type, true);
  }

  // Unary / binary pointwise shorthands into a fresh virtual fp32 tensor.
  const Desc& unary(cudnnPointwiseMode_t mode, const Desc& x, const Dims4& dims) {
    const Desc& y = virt(dims);
    pointwise(mode, x, nullptr, y);
    return y;
  }
  const Desc& binary(cudnnPointwiseMode_t mode, const Desc& x, const Desc& b, const Dims4& dims) {
    const Desc& y = virt(dims);
    pointwise(mode, x, &b, y);
    return y;
  }

  const std::vector<DescPtr>& kept() const { return keep_; }
  const std::vector<cudnnBackendDescriptor_t>& ops() const { return ops_; }

 private:
  void add_op(const DescPtr& op) {
    keep_.push_back(op);
    ops_.push_back(op->get());
  }
  std::vector<DescPtr> keep_;
  std::vector<cudnnBackendDescriptor_t> ops_;
  std::int64_t next_virtual_ = 1000;
};

// Tensor ids of the variant pack.
enum Uid : std::int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kScale,
  kMaskFill,
  kDO,
  kDQ,
  kDK,
  kDV,
  kOne,
  kDQAccum,
  kSoftmaxSum,
};

// A finalized execution plan and everything it references.
struct Plan {
  std::vector<DescPtr> keep;
  DescPtr plan;
  std::int64_t workspace = 0;
  std::string engine;  // which engine the heuristics gave (for error messages)
};

// Layout of one library call.
struct Shape {
  int batch, heads, head_dim;  // heads of the call (a head group)
  std::int64_t sq, sk;         // rows of the call
  Dims4 q_str, kv_str;         // element strides of Q/O/dO and K/V: batch, head, row, 1
};
// Strides of a head group's [b, h, rows, d] view into a [batch][heads][buf_rows][d] buffer:
// every head_step-th head, every row_step-th row.
Dims4 group_strides(int heads_total, std::int64_t buf_rows, int head_dim, int head_step,
                    std::int64_t row_step) {
  return {std::int64_t(heads_total) * buf_rows * head_dim,
          std::int64_t(head_step) * buf_rows * head_dim, row_step * head_dim, 1};
}

// Causal (top-left) mask on a [b, h, sq, sk] score tensor: keep where row >= column.
const Desc& causal_mask(GraphBuilder& g, const Desc& scores, const Dims4& sdims) {
  const Desc& row = g.virt(sdims, CUDNN_DATA_INT32);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, scores, nullptr, row, nullptr, 2);
  const Desc& col = g.virt(sdims, CUDNN_DATA_INT32);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, scores, nullptr, col, nullptr, 3);
  const Desc& keep = g.virt(sdims, CUDNN_DATA_BOOLEAN);
  g.pointwise(CUDNN_POINTWISE_CMP_GE, row, &col, keep, nullptr, -1, CUDNN_DATA_BOOLEAN);
  const Desc& fill = g.scalar(kMaskFill);
  const Desc& masked = g.virt(sdims);
  // BINARY_SELECT: y = t ? x : b
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, scores, &fill, masked, &keep);
  return masked;
}

// Forward: S = scale Q K^T (masked), stats = max + log(sum exp(S - max)),
// O = softmax(S) V.
void build_forward(GraphBuilder& g, const Shape& s, DType dtype, bool causal) {
  const cudnnDataType_t io = cudnn_type(dtype);
  const Dims4 qd{s.batch, s.heads, s.sq, s.head_dim}, od = qd;
  const Dims4 kt{s.batch, s.heads, s.head_dim, s.sk};
  const Dims4 vd{s.batch, s.heads, s.sk, s.head_dim};
  const Dims4 sd{s.batch, s.heads, s.sq, s.sk}, rd{s.batch, s.heads, s.sq, 1};
  const Dims4 q_str = s.q_str, kv_str = s.kv_str;
  const Desc& q = g.tensor(kQ, qd, q_str, io);
  // K^T: the same memory read with the last two strides swapped.
  const Desc& k = g.tensor(kK, kt, {kv_str[0], kv_str[1], 1, kv_str[2]}, io);
  const Desc& v = g.tensor(kV, vd, kv_str, io);
  const Desc& o = g.tensor(kO, od, packed(od), io);
  const Desc& stats = g.tensor(kStats, rd, packed(rd), CUDNN_DATA_FLOAT);
  const Desc& scale = g.scalar(kScale);

  const Desc& s0 = g.virt(sd);
  g.matmul(q, k, s0);
  const Desc* sc = &g.binary(CUDNN_POINTWISE_MUL, s0, scale, sd);
  if (causal) sc = &causal_mask(g, *sc, sd);
  const Desc& mx = g.virt(rd);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, *sc, mx);
  const Desc& sub = g.binary(CUDNN_POINTWISE_SUB, *sc, mx, sd);
  const Desc& ex = g.unary(CUDNN_POINTWISE_EXP, sub, sd);
  const Desc& sum = g.virt(rd);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, ex, sum);
  const Desc& lg = g.unary(CUDNN_POINTWISE_LOG, sum, rd);
  g.pointwise(CUDNN_POINTWISE_ADD, mx, &lg, stats);
  // P in the data type: the second GEMM takes 16-bit operands.
  const Desc& p = g.virt(sd, io);
  g.pointwise(CUDNN_POINTWISE_DIV, ex, &sum, p);
  g.matmul(p, v, o);
}

// Backward (the graph cuDNN's fused flash backward engine recognises):
//   softmax_sum = rowsum(dO * O); P = exp(scale Q K^T - stats) (masked);
//   dV = P^T dO; dS = scale P (dO V^T - softmax_sum); dK = dS^T Q; dQ = dS K (fp32, cast).
void build_backward(GraphBuilder& g, const Shape& s, DType dtype, bool causal) {
  const cudnnDataType_t io = cudnn_type(dtype);
  const Dims4 qd{s.batch, s.heads, s.sq, s.head_dim};
  const Dims4 kd{s.batch, s.heads, s.sk, s.head_dim};
  const Dims4 kt{s.batch, s.heads, s.head_dim, s.sk};
  const Dims4 sd{s.batch, s.heads, s.sq, s.sk}, rd{s.batch, s.heads, s.sq, 1};
  const Dims4 std_{s.batch, s.heads, s.sk, s.sq};
  const Dims4 q_str = s.q_str, kv_str = s.kv_str;
  const Dims4 kt_str{kv_str[0], kv_str[1], 1, kv_str[2]};
  const Desc& q = g.tensor(kQ, qd, q_str, io);
  const Desc& k_t = g.tensor(kK, kt, kt_str, io);
  const Desc& v_t = g.tensor(kV, kt, kt_str, io);
  const Desc& o = g.tensor(kO, qd, q_str, io);
  const Desc& d_o = g.tensor(kDO, qd, q_str, io);
  const Desc& stats = g.tensor(kStats, rd, packed(rd), CUDNN_DATA_FLOAT);
  const Desc& scale = g.scalar(kScale);
  const Desc& one = g.scalar(kOne);
  const Desc& dq = g.tensor(kDQ, qd, packed(qd), io);
  const Desc& dk = g.tensor(kDK, kd, packed(kd), io);
  const Desc& dv = g.tensor(kDV, kd, packed(kd), io);
  const Desc& dq_acc = g.tensor(kDQAccum, qd, packed(qd), CUDNN_DATA_FLOAT);
  const Desc& sm_sum = g.tensor(kSoftmaxSum, rd, packed(rd), CUDNN_DATA_FLOAT);

  const Desc& doo = g.binary(CUDNN_POINTWISE_MUL, d_o, o, qd);
  const Desc& rs = g.virt(rd);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, doo, rs);
  g.pointwise(CUDNN_POINTWISE_MUL, rs, &one, sm_sum);

  const Desc& s0 = g.virt(sd);
  g.matmul(q, k_t, s0);
  const Desc& s1 = g.binary(CUDNN_POINTWISE_MUL, s0, scale, sd);
  const Desc* s3 = &g.binary(CUDNN_POINTWISE_SUB, s1, stats, sd);
  if (causal) s3 = &causal_mask(g, *s3, sd);
  const Desc& p = g.unary(CUDNN_POINTWISE_EXP, *s3, sd);
  const Dims4 t_str{std::int64_t(s.heads) * s.sq * s.sk, s.sq * s.sk, 1, s.sk};
  const Desc& p_t = g.virt_strided(std_, t_str, io);
  g.reshape(p, p_t);
  g.matmul(p_t, d_o, dv);

  const Desc& dp = g.virt(sd);
  g.matmul(d_o, v_t, dp);
  const Desc& dp1 = g.binary(CUDNN_POINTWISE_SUB, dp, sm_sum, sd);
  const Desc& dp2 = g.binary(CUDNN_POINTWISE_MUL, dp1, p, sd);
  const Desc& ds = g.binary(CUDNN_POINTWISE_MUL, dp2, scale, sd);
  const Desc& ds_t = g.virt_strided(std_, t_str, io);
  g.reshape(ds, ds_t);
  g.matmul(ds_t, q, dk);

  const Desc& k_r = g.virt_strided(kd, kv_str, CUDNN_DATA_FLOAT);
  g.reshape(k_t, k_r);
  g.matmul(ds, k_r, dq_acc);
  g.pointwise(CUDNN_POINTWISE_IDENTITY, dq_acc, nullptr, dq);
}

// Operation graph -> heuristics (mode A) -> the first engine config that finalizes.
Plan make_plan(cudnnHandle_t handle, GraphBuilder& g, const char* what) {
  Plan pl;
  pl.keep = g.kept();
  auto graph = std::make_shared<Desc>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
  graph
      ->set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
            std::int64_t(g.ops().size()), g.ops().data())
      .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)
      .finalize();
  pl.keep.push_back(graph);
  auto heur = std::make_shared<Desc>(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "engine heuristics");
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heur->set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, *graph)
      .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode)
      .finalize();
  pl.keep.push_back(heur);
  std::int64_t count = 0;
  RBK_CUDNN_CHECK(cudnnBackendGetAttribute(heur->get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
                  std::string("counting engine configs for ") + what);
  if (count <= 0)
    throw std::runtime_error(std::string("cuDNN has no engine for the ") + what +
                             " graph (this cuDNN/GPU does not support fused attention for it)");
  std::vector<DescPtr> cfgs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (std::int64_t i = 0; i < count; ++i) {
    cfgs.push_back(std::make_shared<Desc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config"));
    raw.push_back(cfgs.back()->get());
  }
  std::int64_t got = 0;
  RBK_CUDNN_CHECK(cudnnBackendGetAttribute(heur->get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data()),
                  std::string("reading engine configs for ") + what);
  for (std::int64_t i = 0; i < got; ++i) {
    auto plan = std::make_shared<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "execution plan");
    plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)
        .set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, *cfgs[std::size_t(i)]);
    if (!plan->try_finalize()) continue;
    std::int64_t ws = 0, n = 0;
    RBK_CUDNN_CHECK(cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                             CUDNN_TYPE_INT64, 1, &n, &ws),
                    "reading the workspace size");
    pl.keep.push_back(cfgs[std::size_t(i)]);
    pl.plan = plan;
    pl.workspace = ws;
    pl.engine = "engine config " + std::to_string(i) + " of " + std::to_string(got);
    return pl;
  }
  char detail[1024] = {0};
  cudnnGetLastErrorString(detail, sizeof(detail));
  throw std::runtime_error(std::string("cuDNN: none of the ") + std::to_string(got) +
                           " engine configs for the " + what + " graph could be finalized" +
                           (detail[0] ? std::string(" (") + detail + ")" : std::string()));
}

// The variant pack of one call: tensor ids and pointers. By-value scalars point at the host
// copies held here, so a Pack stays where it was made.
class Pack {
 public:
  Pack(float scale, bool causal) : scale_(scale) {
    add(kScale, &scale_);
    if (causal) add(kMaskFill, &fill_);
  }
  Pack(const Pack&) = delete;
  Pack& operator=(const Pack&) = delete;
  void add(std::int64_t uid, const void* p) {
    uids.push_back(uid);
    ptrs.push_back(const_cast<void*>(p));
  }
  void add_one() { add(kOne, &one_); }
  std::vector<std::int64_t> uids;
  std::vector<void*> ptrs;

 private:
  float scale_, one_ = 1.f, fill_ = -std::numeric_limits<float>::infinity();
};

// Address of row `row` of a [.., rows, head_dim] buffer of 16-bit elements.
const void* row_ptr(const void* base, std::int64_t row, int head_dim, std::size_t es) {
  return static_cast<const char*>(base) + std::size_t(row) * std::size_t(head_dim) * es;
}

}  // namespace

// ---------------------------------------------------------------- CudnnAttention

struct CudnnAttention::Impl {
  cudaStream_t stream;
  Alloc alloc;
  Free release;
  cudnnHandle_t handle = nullptr;
  std::map<std::array<std::int64_t, 14>, Plan> plans;
  std::map<std::array<std::int64_t, 14>, std::string> failed;
  // Grow-only scratch buffers.
  struct Buf {
    void* p = nullptr;
    std::size_t bytes = 0;
  };
  Buf o_blk, stats, dq, dk, dv, dq_acc, sm_sum, ws;

  void* need(Buf& b, std::size_t bytes) {
    if (bytes <= b.bytes) return b.p;
    if (b.p) release(b.p);
    b.p = nullptr;
    b.bytes = 0;
    b.p = alloc(bytes);
    b.bytes = bytes;
    return b.p;
  }

  const Plan& plan(bool backward, const Shape& s, DType dtype, bool causal) {
    const std::array<std::int64_t, 14> key{
        backward, int(dtype), causal,     s.batch,    s.heads,     s.head_dim,  s.sq,
        s.sk,     s.q_str[0], s.q_str[1], s.q_str[2], s.kv_str[0], s.kv_str[1], s.kv_str[2]};
    auto it = plans.find(key);
    if (it != plans.end()) return it->second;
    auto bad = failed.find(key);  // do not rebuild a graph cuDNN already refused
    if (bad != failed.end()) throw std::runtime_error(bad->second);
    GraphBuilder g;
    if (backward)
      build_backward(g, s, dtype, causal);
    else
      build_forward(g, s, dtype, causal);
    const std::string what = std::string(backward ? "backward" : "forward") +
                             (causal ? " causal" : "") + " SDPA (" + std::to_string(s.sq) + " x " +
                             std::to_string(s.sk) + " rows, head dim " +
                             std::to_string(s.head_dim) + ")";
    try {
      return plans.emplace(key, make_plan(handle, g, what.c_str())).first->second;
    } catch (const std::runtime_error& e) {
      failed.emplace(key, e.what());
      throw;
    }
  }

  // True when cuDNN has a plan for every call of the strided (dilated) groups; their strides
  // are unusual enough that a cuDNN release may refuse them, and then the whole block goes to
  // the flash kernels before anything was merged. Exact attention is never second-guessed:
  // a refusal there is an error.
  bool strided_plans_ready(bool backward, const std::vector<SdpaGroup>& groups, const Dims& d,
                           DType dtype);

  void execute(const Plan& pl, const Pack& args) {
    void* work = pl.workspace > 0 ? need(ws, std::size_t(pl.workspace)) : nullptr;
    Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack");
    pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, std::int64_t(args.uids.size()),
             args.uids.data())
        .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
             std::int64_t(args.ptrs.size()), args.ptrs.data())
        .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &work)
        .finalize();
    RBK_CUDNN_CHECK(cudnnBackendExecute(handle, pl.plan->get(), pack.get()),
                    "executing " + pl.engine);
  }
};

CudnnAttention::CudnnAttention(cudaStream_t stream, Alloc alloc, Free release)
    : impl_(std::make_unique<Impl>()) {
  impl_->stream = stream;
  impl_->alloc = std::move(alloc);
  impl_->release = std::move(release);
  RBK_CUDNN_CHECK(cudnnCreate(&impl_->handle), "cudnnCreate");
  RBK_CUDNN_CHECK(cudnnSetStream(impl_->handle, stream), "cudnnSetStream");
}

CudnnAttention::~CudnnAttention() {
  if (!impl_) return;
  cudaStreamSynchronize(impl_->stream);
  impl_->plans.clear();
  // Destructors must not throw: a release that fails here (process teardown) is ignored.
  for (Impl::Buf* b : {&impl_->o_blk, &impl_->stats, &impl_->dq, &impl_->dk, &impl_->dv,
                       &impl_->dq_acc, &impl_->sm_sum, &impl_->ws})
    if (b->p) try {
        impl_->release(b->p);
      } catch (...) {
      }
  if (impl_->handle) cudnnDestroy(impl_->handle);
}

bool CudnnAttention::supports(DType dtype, int head_dim) {
  // The cudnn row's full-speed range (kernel_paths.cpp) is what cuDNN takes natively.
  static const KernelPath& row = *find_kernel_path("cudnn", Device::Cuda);
  return row.full_speed.takes(dtype, head_dim, false, false);
}

namespace {

// One library call of a head group: its shape, where its rows start and how its packed output
// maps back onto the ring buffers.
struct Call {
  Shape shape;
  std::int64_t q_row,
      k_row;  // first buffer row (head group's first head, all batches) of Q and K/V
  RowMap q_map, k_map;
  std::int64_t q_n, k_n;  // packed rows of the call: batch * heads * sq (sk)
};

Call make_call(const Dims& d, const SdpaGroup& g, const SdpaPiece& pc) {
  Call c;
  c.shape = Shape{d.batch,
                  g.heads,
                  d.head_dim,
                  pc.q_count,
                  pc.k_count,
                  group_strides(d.heads, d.q_rows, d.head_dim, g.head_step, g.q.step),
                  group_strides(d.heads, d.kv_rows, d.head_dim, g.head_step, g.kv.step)};
  c.q_row = std::int64_t(g.offset) * d.q_rows + g.q.row(pc.q_off);
  c.k_row = std::int64_t(g.offset) * d.kv_rows + g.kv.row(pc.k_off);
  c.q_map = RowMap{pc.q_count,  g.heads,  d.heads,           g.offset,
                   g.head_step, d.q_rows, g.q.row(pc.q_off), g.q.step};
  c.k_map = RowMap{pc.k_count,         g.heads,  d.heads, g.offset, g.head_step, d.kv_rows,
                   g.kv.row(pc.k_off), g.kv.step};
  c.q_n = std::int64_t(d.batch) * g.heads * pc.q_count;
  c.k_n = std::int64_t(d.batch) * g.heads * pc.k_count;
  return c;
}

}  // namespace

bool CudnnAttention::Impl::strided_plans_ready(bool backward, const std::vector<SdpaGroup>& groups,
                                               const Dims& d, DType dtype) {
  for (const SdpaGroup& g : groups) {
    if (g.q.step == 1 && g.kv.step == 1 && g.head_step == 1) continue;
    for (const SdpaPiece& pc : g.pieces) try {
        plan(backward, make_call(d, g, pc).shape, dtype, pc.causal);
      } catch (const std::runtime_error&) {
        return false;
      }
  }
  return true;
}

void CudnnAttention::forward(const ForwardBlock& b) {
  const auto groups = supports(b.dtype, b.dims.head_dim)
                          ? split_groups_for_sdpa(b.q, b.kv, b.pattern, b.dims.heads)
                          : std::nullopt;
  if (!groups || !impl_->strided_plans_ready(false, *groups, b.dims, b.dtype)) {
    ++fallbacks_;
    flash_forward(b, impl_->stream);
    return;
  }
  const Dims& d = b.dims;
  const std::size_t es = dtype_size(b.dtype);
  for (const SdpaGroup& g : *groups)
    for (const SdpaPiece& pc : g.pieces) {
      const Call c = make_call(d, g, pc);
      const Plan& pl = impl_->plan(false, c.shape, b.dtype, pc.causal);
      void* ob = impl_->need(impl_->o_blk, std::size_t(c.q_n) * std::size_t(d.head_dim) * es);
      auto* st = static_cast<float*>(impl_->need(impl_->stats, std::size_t(c.q_n) * sizeof(float)));
      Pack args(b.scale, pc.causal);
      args.add(kQ, row_ptr(b.q_data, c.q_row, d.head_dim, es));
      args.add(kK, row_ptr(b.k_data, c.k_row, d.head_dim, es));
      args.add(kV, row_ptr(b.v_data, c.k_row, d.head_dim, es));
      args.add(kO, ob);
      args.add(kStats, st);
      impl_->execute(pl, args);
      const unsigned blocks = grid_for(c.q_n * 32, 256);
      if (b.dtype == DType::BF16)
        merge_call<<<blocks, 256, 0, impl_->stream>>>(static_cast<const __nv_bfloat16*>(ob), st,
                                                      b.out, b.lse, c.q_map, c.q_n, d.head_dim);
      else
        merge_call<<<blocks, 256, 0, impl_->stream>>>(static_cast<const __half*>(ob), st, b.out,
                                                      b.lse, c.q_map, c.q_n, d.head_dim);
      RBK_LAUNCH_CHECK();
    }
}

void CudnnAttention::backward(const BackwardBlock& b, const void* out_data) {
  const auto groups = supports(b.dtype, b.dims.head_dim) && out_data
                          ? split_groups_for_sdpa(b.q, b.kv, b.pattern, b.dims.heads)
                          : std::nullopt;
  if (!groups || !impl_->strided_plans_ready(true, *groups, b.dims, b.dtype)) {
    ++fallbacks_;
    flash_backward(b, impl_->stream);
    return;
  }
  const Dims& d = b.dims;
  const std::size_t es = dtype_size(b.dtype);
  const std::size_t hd = std::size_t(d.head_dim);
  for (const SdpaGroup& g : *groups)
    for (const SdpaPiece& pc : g.pieces) {
      const Call c = make_call(d, g, pc);
      const Plan& pl = impl_->plan(true, c.shape, b.dtype, pc.causal);
      const std::size_t qn = std::size_t(c.q_n), kn = std::size_t(c.k_n);
      void* dq = impl_->need(impl_->dq, qn * hd * es);
      void* dk = impl_->need(impl_->dk, kn * hd * es);
      void* dv = impl_->need(impl_->dv, kn * hd * es);
      auto* st = static_cast<float*>(impl_->need(impl_->stats, qn * sizeof(float)));
      gather_rows<<<grid_for(c.q_n, 256), 256, 0, impl_->stream>>>(st, b.lse, c.q_map, c.q_n);
      RBK_LAUNCH_CHECK();
      // cuDNN's own fp32 buffers: the dQ accumulator (zeroed here: older releases expect it)
      // and rowsum(dO * O). The accumulator is the engine's scratch, not dQ in the declared
      // layout (read back as dQ it was off by ~120 % on cuDNN 9.14): dQ comes from the cast.
      void* dq_acc = impl_->need(impl_->dq_acc, qn * hd * sizeof(float));
      void* sm_sum = impl_->need(impl_->sm_sum, qn * sizeof(float));
      RBK_CUDA_CHECK(cudaMemsetAsync(dq_acc, 0, qn * hd * sizeof(float), impl_->stream));
      Pack args(b.scale, pc.causal);
      args.add_one();
      args.add(kQ, row_ptr(b.q_data, c.q_row, d.head_dim, es));
      args.add(kK, row_ptr(b.k_data, c.k_row, d.head_dim, es));
      args.add(kV, row_ptr(b.v_data, c.k_row, d.head_dim, es));
      args.add(kO, row_ptr(out_data, c.q_row, d.head_dim, es));
      args.add(kDO, row_ptr(b.dout, c.q_row, d.head_dim, es));
      args.add(kStats, st);
      for (auto [uid, ptr] : {std::pair<Uid, void*>{kDQ, dq},
                              {kDK, dk},
                              {kDV, dv},
                              {kDQAccum, dq_acc},
                              {kSoftmaxSum, sm_sum}})
        args.add(uid, ptr);
      impl_->execute(pl, args);
      auto add = [&](float* dst, const void* src, const RowMap& map, std::int64_t n) {
        const unsigned blocks = grid_for(n * 32, 256);  // a warp per row
        const bool vector = d.head_dim % 4 == 0 &&
                            reinterpret_cast<std::uintptr_t>(dst) % 16 == 0 &&
                            reinterpret_cast<std::uintptr_t>(src) % 8 == 0;
        if (b.dtype == DType::BF16)
          add_rows<<<blocks, 256, 0, impl_->stream>>>(dst, static_cast<const __nv_bfloat16*>(src),
                                                      map, n, d.head_dim, vector);
        else
          add_rows<<<blocks, 256, 0, impl_->stream>>>(dst, static_cast<const __half*>(src), map, n,
                                                      d.head_dim, vector);
        RBK_LAUNCH_CHECK();
      };
      add(b.dq, dq, c.q_map, c.q_n);
      add(b.dk, dk, c.k_map, c.k_n);
      add(b.dv, dv, c.k_map, c.k_n);
    }
}

std::string cudnn_version_text() {
  return library_version_text([](libraryPropertyType part, int* v) {
    return cudnnGetProperty(part, v) == CUDNN_STATUS_SUCCESS;
  });
}

}  // namespace rb::attn::gpu
