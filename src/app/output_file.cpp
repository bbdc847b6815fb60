#include "app/output_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <exception>
#include <filesystem>
#include <sstream>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "app/agreed_errors.hpp"
#include "app/end_record.hpp"
#include "app/progress.hpp"
#include "app/provenance.hpp"
#include "app/run_end.hpp"
#include "config/file_kind.hpp"
#include "ringbench/version.hpp"
#include "runtime/mpi_util.hpp"

namespace rb {
namespace {

// The config file is passed so that an --output naming it is refused (even with --force).
std::optional<h5::File> open_output(const std::string& path, bool force,
                                    const std::string& config_path, const RunSection& run,
                                    MPI_Comm world) {
  std::string error;
  h5::File file;
  try {
    h5::IoHints hints;
    hints.mpiio = run.mpiio_hints;
    hints.alignment_bytes = run.alignment_bytes;
    file = h5::File::create(path, world, force, config_path, hints);
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (first_error_reported(error, "", world)) return std::nullopt;
  return file;
}

// --json names a file rank 0 replaces after every sweep: a path it may not replace (a FIFO, a
// device, a link without --force) is refused before the output is claimed, not warned about
// after every sweep of a run that then has no JSON.
// Whether two paths name one file: the same inode where both exist, else the same path once
// made absolute and normal (an output not written yet).
bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::equivalent(a, b, ec)) return true;
  return fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec) && !ec;
}

// The output or --json naming a policy file the run reads: replacing it (with --force) would
// destroy an input, as the config itself is protected.
bool inputs_refused(const CommandLine& cli, const std::string& out_path,
                    const std::vector<InputFile>& inputs, MPI_Comm world) {
  std::string error;
  if (mpi::rank_of(world) == 0)
    for (const InputFile& in : inputs) {
      if (same_file(out_path, in.path))
        error = "output file '" + out_path + "' is the policy file " + in.named_by +
                " names; choose another --output";
      else if (!cli.json.empty() && cli.json != "-" && same_file(cli.json, in.path))
        error = "--json file '" + cli.json + "' is the policy file " + in.named_by +
                " names; choose another --json";
      if (!error.empty()) break;
    }
  return first_error_reported(error, "", world);
}

// The directory --json goes into, made as --output's is (a JSON that could not be written ended a
// successful run with no JSON and exit 0); "" or why it cannot be made.
std::string make_parent_directory(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path parent = fs::path(path).parent_path();
  std::error_code ec;
  if (parent.empty() || fs::is_directory(parent, ec)) return "";
  fs::create_directories(parent, ec);
  return ec ? "cannot create the directory '" + parent.string() + "' for --json file '" + path +
                  "': " + ec.message()
            : "";
}

bool json_path_refused(const CommandLine& cli, const std::string& out_path, MPI_Comm world) {
  std::string error;
  if (!cli.json.empty() && cli.json != "-" && mpi::rank_of(world) == 0) {
    if (same_file(cli.json, cli.config_path))
      error = "--json file '" + cli.json + "' is the config file '" + cli.config_path +
              "'; choose another --json";
    else if (same_file(cli.json, out_path))
      error = "--json file '" + cli.json + "' is the output file; choose another --json";
    else
      error = refusal_to_replace(cli.json, cli.force, "--json file");
    if (error.empty()) error = make_parent_directory(cli.json);
    if (!error.empty() && cfg::kind_at(cli.json) == "a symbolic link")
      error += " (or pass --force to replace the link itself, never its target)";
  }
  return first_error_reported(error, "", world);
}

// Rank 0 locks the output for the whole run (OutputLock: a second run on it is refused while
// this one is alive); its refusal is every rank's.
bool output_lock_refused(const std::string& path, std::unique_ptr<OutputLock>& lock,
                         MPI_Comm world) {
  std::string error;
  if (mpi::rank_of(world) == 0) {
    try {
      lock = std::make_unique<OutputLock>(path);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  return first_error_reported(error, "", world);
}

// Rank 0, holding the output's lock, before the output is claimed: the names of the files the
// run makes beside it must hold nothing, or a regular file (an earlier run's); a link, FIFO,
// device, socket or directory there is someone else's, and the run refuses to start (rather
// than run without the hang guard's heartbeat). The end record an earlier run on this output
// left (app/end_record.hpp) is removed, so that a record always speaks of the file beside it.
bool side_files_refused(const std::string& out_path, bool heartbeat, MPI_Comm world) {
  std::string error;
  if (mpi::rank_of(world) == 0 && heartbeat)
    error = refusal_to_replace(out_path + ".heartbeat", false, "heartbeat file");
  if (mpi::rank_of(world) == 0 && error.empty())
    error = remove_end_record(end_record_path(out_path));
  return first_error_reported(error, "", world);
}

// /run/mpiio_hints: the hints MPI-IO reports in effect on the output file (the config's
// run.mpiio_hints it kept, and its own defaults), one string attribute each.
void write_mpiio_hints(h5::Group& run, const h5::File& file, MPI_Comm world) {
  // Rank 0's list for everyone: attr() is collective, so every rank writes the same keys.
  std::string text;
  for (const auto& [key, value] : file.mpiio_hints_in_effect()) text += key + '\n' + value + '\n';
  mpi::broadcast_string(text, world);
  h5::Group g = run.group("mpiio_hints");
  std::istringstream lines(text);
  std::string key, value;
  while (std::getline(lines, key) && std::getline(lines, value)) g.attr(key, value);
}

void write_run_group(h5::Group& run, const Validated& v, const CommandLine& cli,
                     const std::string& text, const RankLayout& layout, int mpi_thread_level) {
  run.attr("ringbench_version", kVersion);
  run.attr("git_commit", kGitCommit);
  run.attr("config_file", cli.config_path);
  run.attr("config_text", text);
  run.attr("command_line", cli.command_line);
  run.attr("start_time", utc_now_iso8601());
  run.attr("world_size", layout.world_size);
  run.attr("node_count", layout.node_count);
  run.attr("simulated_ranks_per_node", layout.simulated.ranks_per_node);
  run.attr("simulated_placement",
           layout.simulated.active() ? to_string(layout.simulated.placement) : "none");
  run.attr("backend", to_string(v.backend));
  run.attr("mpi_thread_level", MpiEnvironment::thread_level_name(mpi_thread_level));
  write_run_provenance(run);
  run.set_attr("end_time", "");
  run.set_attr("status", "running");
  run.set_attr("failure", "");
}

// One /ranks column: which rank a row is (role key), an integer or a text per rank.
struct RankColumn {
  const char* name;
  std::variant<std::int64_t, std::string> value;
  const char* description;
};

std::vector<RankColumn> rank_columns(const RankLayout& layout, const RankSetup& s) {
  auto id = [](int v) { return static_cast<std::int64_t>(v); };
  return {
      {"rank", id(layout.rank), "MPI rank in MPI_COMM_WORLD"},
      {"hostname", layout.hostname, "host the rank ran on"},
      {"node_index", id(layout.node_index),
       "node index, ordered by the lowest rank on each node "
       "(simulated nodes with --ranks-per-node)"},
      {"local_rank", id(layout.local_rank),
       "rank within its node (from MPI_Comm_split_type shared)"},
      {"gpu_index", id(s.gpu.index), "CUDA device ordinal the rank drove; -1 on the host path"},
      {"gpu_name", s.gpu.name, "GPU product name; empty on host"},
      {"gpu_arch", s.gpu.arch, "GPU compute capability major.minor (9.0: Hopper); empty on host"},
      {"gpu_uuid", s.gpu.uuid, "GPU UUID; empty on host"},
      {"gpu_pci_bus_id", s.gpu.pci_bus_id, "GPU PCI bus id; empty on host"},
      {"cpuset", s.cpuset,
       "effective CPU binding (PU list) "
       "after ringbench applied its policy"},
      {"numa_node", id(s.numa), "NUMA node covering the cpuset; -1 when several or unknown"},
      {"binding_policy", to_string(s.decision.policy), "binding policy from the config"},
      {"binding_explanation", s.decision.explanation, "why this binding was chosen"},
  };
}

// Every /ranks dataset says which rank a row is (role key) except the clocks (role metric).
void write_ranks_table(h5::Group& root, const RankLayout& layout, const RankSetup& s) {
  h5::Group ranks = root.group("ranks");
  for (const RankColumn& c : rank_columns(layout, s)) {
    const h5::Meta meta{"1", c.description, "key"};
    if (const auto* text = std::get_if<std::string>(&c.value))
      ranks.write_per_rank_string(c.name, *text, meta);
    else
      ranks.write_per_rank(c.name, std::get<std::int64_t>(c.value), meta);
  }
  write_rank_clocks(ranks, s.gpu);
  // /ranks/rank is the rank axis of every /ranks dataset: xarray and netCDF readers name it.
  ranks.mark_scale("rank");
  for (const std::string& name : ranks.dataset_names())
    if (name != "rank") ranks.attach_scales(name, {"rank"});
}

}  // namespace

std::string output_path(const CommandLine& cli, const Config& c, MPI_Comm world) {
  if (!cli.output.empty()) return cli.output;
  // One timestamp for all ranks (rank 0's), so every rank opens the same file.
  std::string stamp = utc_now("%Y%m%dT%H%M%SZ");
  mpi::broadcast_string(stamp, world);
  return fmt::format("{}/{}_{}.h5", c.run.output_dir.empty() ? "." : c.run.output_dir, c.run.name,
                     stamp);
}

bool output_refused(const CommandLine& cli, const std::string& out_path,
                    const std::vector<InputFile>& inputs, bool heartbeat,
                    std::unique_ptr<OutputLock>& lock, MPI_Comm world) {
  return inputs_refused(cli, out_path, inputs, world) || json_path_refused(cli, out_path, world) ||
         output_lock_refused(out_path, lock, world) ||
         side_files_refused(out_path, heartbeat, world);
}

std::optional<h5::File> create_output(const std::string& out_path, const Validated& v,
                                      const CommandLine& cli, const std::string& text,
                                      const RankLayout& layout, const RankSetup& s,
                                      int mpi_thread_level, MPI_Comm world) {
  struct stat before {};
  const bool new_output = ::lstat(out_path.c_str(), &before) != 0;  // rank 0's view is the one used
  std::optional<h5::File> file =
      open_output(out_path, cli.force, cli.config_path, v.config.run, world);
  if (!file) return std::nullopt;
  h5::Group root = file->root();
  h5::Group run = root.group("run");
  try {
    write_run_group(run, v, cli, text, layout, mpi_thread_level);
    write_mpiio_hints(run, *file, world);
    write_ranks_table(root, layout, s);
    file->flush();
  } catch (const std::exception& e) {
    // A file whose first flush failed (a full disk) holds no readable HDF5 and would refuse
    // the next run's claim: rank 0 removes the one this run made (we hold its lock). An older
    // file that --force was to replace is left alone (the new data went to a temporary name).
    if (layout.rank == 0 && new_output && ::unlink(out_path.c_str()) == 0)
      fmt::print(stderr, "ringbench: removed the unfinished output '{}'\n", out_path);
    stop_on_output_error(e, "the run and ranks groups", *file, layout.rank, nullptr, world);
  }
  return file;
}

}  // namespace rb
