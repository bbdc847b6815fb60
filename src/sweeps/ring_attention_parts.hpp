#pragma once
// The ring_attention sweep's parts, shared by its files (src/sweeps only): its parameters and
// points (parsed by ring_attention_parse.cpp), what one point measured (PointResult), and the
// points table and the screen's table (ring_attention_table.cpp). The sweep itself, which runs
// the points, is ring_attention.cpp.
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend.hpp"
#include "config/config.hpp"
#include "config/policy_file.hpp"
#include "metrics/table.hpp"
#include "ring/cp_attention.hpp"
#include "ring/parity.hpp"
#include "ring/problem.hpp"
#include "ring/ring_order.hpp"
#include "ring/transport_choice.hpp"
#include "sweeps/cp_policy.hpp"
#include "sweeps/sweep.hpp"

namespace rb::ring_sweep {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// As parsed; a value the config leaves out is its key's default in ring_attention_keys().
struct RingParams {
  int batch = 0;
  int num_heads = 0;
  int num_kv_heads = 0;  // GQA/MQA: K/V heads, each shared by num_heads / num_kv_heads query heads
  int head_dim = 0;
  std::vector<std::int64_t> seq_lengths;
  std::vector<std::int64_t> ring_sizes;
  std::vector<std::string> layouts;
  std::vector<std::string> dtypes;
  bool causal = false;
  std::vector<std::int64_t> segment_lengths, dilation_rates;
  std::int64_t warmup = 0;
  std::int64_t iterations = 0;
  bool backward = true;
  std::int64_t seed = 0;
  std::string kernel;
  std::string kernel_tile;
  // The tuned policy `kernel: auto` follows (the sweep's own `kernel_policy`, else the top
  // level's); null: the built-in rule.
  std::shared_ptr<KernelPolicyUse> policy;
  bool dump = false;
  int sample_rows = 0;                                    // 0: auto (ring::sampled_rows_per_rank)
  ring::ParityMode parity_mode = ring::ParityMode::Auto;  // validate.reference
  double tolerance = 0.0;                                 // 0: the dtype's default
  int world_size = 1;
  Backend backend = Backend::Host;
  // node_aware: rings cut from the ranks grouped node by node, so they cross nodes as few
  // times as the layout allows; rank: world order (rank r in ring r / R).
  ring::RingOrder ring_order = ring::RingOrder::NodeAware;
  // How the context-parallel group meets every key (ring/cp_attention.hpp), as asked: ring,
  // allgather, ulysses, hybrid or auto; one point each.
  std::vector<std::string> schemes;
  int ulysses_degree = 0;  // hybrid's Ulysses subgroup size (required with scheme hybrid)
  // Ulysses' head-group pipeline: each rank's heads in this many groups, one crossing while the
  // one before computes (ring/ulysses_attention.hpp); 1: one exchange each way. A list: one
  // Ulysses point each (auto takes its one value).
  std::vector<int> ulysses_head_groups = {1};
  // The tuned CP policy `scheme: auto` follows (cp_policy:); null: the built-in rule (ring).
  std::shared_ptr<CpPolicyUse> cp_policy;
  int ranks_per_node = 1;  // world / nodes: whether a group of R ranks fits one node
  // How the ring's K/V travel (ring/transport_choice.hpp), as asked: auto, nccl or
  // copy_engine; one point each.
  std::vector<std::string> transports;
  // Repeats of the overlap calibration after each ring point (0: off): the transfers alone and
  // the block computation alone (ring/cp_attention.hpp, OverlapCalibration).
  int overlap_repeats = 0;
};

struct Point {
  ring::Problem problem;
  ring::Scheme scheme = ring::Scheme::Ring;  // what runs (auto: as resolved)
  int ulysses_degree = 1;           // ranks splitting heads: hybrid U, ulysses R, 1 otherwise
  int head_groups = 1;              // Ulysses' head-group pipeline depth (1 for other schemes)
  bool scheme_auto = false;         // scheme: auto chose `scheme`
  bool scheme_from_policy = false;  // ... from the CP policy (else the built-in rule: ring)
  std::string scheme_source;  // where auto's choice came from; "none: scheme X named" otherwise
  int num_rings = 1;
  ring::TransportAsk transport = ring::TransportAsk::Auto;
  std::string label;
};

struct PointResult {
  std::string status = "ok";  // ok | oom | parity_failed, the same on every rank
  std::string failure;        // parity_failed: which tensor and by how much
  std::int64_t ring_id = -1, ring_rank = -1;
  std::int64_t ring_nodes = -1, crossing_hops = -1;
  bool comm_created = false;  // this point created its ring size's communicators
  double comm_create_s = 0.0;
  std::string kernel_path;
  attn::BlockCalls block_calls;  // per iteration (forward + backward)
  std::string oom_message;       // empty: this rank did not run out (another one did)
  std::int64_t oom_requested = -1, oom_free = -1;
  std::vector<double> forward_s, backward_s, total_s;  // per timed iteration
  std::vector<double> step_compute, step_wait, backward_step_compute, backward_step_wait;
  std::vector<std::int64_t> step_pairs;
  std::int64_t bytes_sent = -1, peak_memory = -1;
  double forward_flop = kNaN;
  ring::ParityReport parity;
  double parity_s = kNaN;
  std::string transport, transport_reason;  // what moved the data, and why that one
  std::optional<ring::OverlapCalibration> overlap;
};

// ---- a point's inputs and its dump (ring_attention_dump.cpp)
// This rank's shards of Q, K, V (and dO with backward) as stored, in the problem's dtype.
struct Shards {
  std::vector<unsigned char> q, k, v, dO;
};
Shards make_shards(const ring::Problem& p, int ring_rank, std::uint64_t seed, bool backward);
// `dump: true`: the first point's inputs and results, every rank's, under out/dump.
void write_dump(h5::Group& out, const ring::Problem& prob, int ring_rank, const Shards& in,
                const ring::RingResult& res, bool backward);

// ---- the parser (ring_attention_parse.cpp): every point validated, errors at their keys
struct Parsed {
  RingParams params;
  std::vector<Point> points;
};
Parsed parse(const SweepSpec& spec, const ParseContext& ctx);  // throws cfg::ConfigError
// A point's plan line; an auto point's starts with "auto:SCHEME".
std::string point_label(const RingParams& p, const Point& pt);
// The CP policy's shape of a point (tokens per rank are S / ring size).
CpShape cp_shape_of(const RingParams& p, const ring::Problem& pr);

// ---- the points table and the screen (ring_attention_table.cpp)
// The main table's metrics (I: iterations), and a ring size's step table's (R: its ring size).
void declare_metrics(h5::PointsTable& t, std::uint64_t I);
void declare_step_metrics(h5::PointsTable& t, std::uint64_t R);
// The rows of the kernel path table this sweep's device has: one block-call count each.
std::vector<std::string> device_paths(bool host);
void declare_block_calls(h5::PointsTable& t, bool host);
// Every iteration runs the same blocks: the counts of one.
attn::BlockCalls per_iteration(attn::BlockCalls calls, std::int64_t iterations);
void record(h5::PointsTable& t, std::size_t pi, const PointResult& r);
// The point's steps into its ring size's step table, at that table's point `qi`.
void record_steps(h5::PointsTable& t, std::size_t qi, const PointResult& r);
// Ranks per point above which the main table keeps a sample (hdf5-schema.md, "Rows"), and the
// ranks whose every step a step table keeps.
inline constexpr std::size_t kRankRows = 64;
inline constexpr std::size_t kStepRows = 8;
std::vector<h5::Headline> ring_headlines();
std::string ring_table(const std::string& title, const std::vector<h5::PointRecord>& records,
                       std::size_t width);
extern const char* const kFlopConvention;
// Backward FLOPs per forward FLOP under that convention (what rb-analysis reads back from it).
inline constexpr double kBackwardFlops = 2.5;

}  // namespace rb::ring_sweep
