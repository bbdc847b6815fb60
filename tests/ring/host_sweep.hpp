#pragma once
// A sweep run into a fresh file on every rank as the driver runs it (path factories, progress,
// run context), for the sweep tests that read the file back; a sweep's YAML map and parse
// context as the driver hands them to its parser.
#include <doctest/doctest.h>
#include <mpi.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "app/paths.hpp"
#include "app/progress.hpp"
#include "config/config.hpp"
#include "config/expect_error.hpp"
#include "config/node.hpp"
#include "metrics/h5.hpp"
#include "runtime/mpi.hpp"
#include "sweeps/ring_attention.hpp"
#include "sweeps/sweep.hpp"
#include "test_support.hpp"

namespace rbtest {

// A sweep's YAML map as the driver hands it to the sweep's parser (sweeps[0] of `file`).
inline rb::SweepSpec sweep_spec(const std::string& type, const std::string& name,
                                const std::string& yaml, const std::string& file = "test.yaml") {
  rb::SweepSpec s;
  s.type = type;
  s.name = name;
  s.node = rb::cfg::Node(YAML::Load(yaml), file, "sweeps[0]");
  return s;
}

// A file `name` holding `text` in this process's scratch folder of `area`, and the path of a
// config file beside it (not written: a sweep's relative paths start from the config's folder).
// The folder goes with it.
struct ConfigFolder {
  std::filesystem::path dir;
  std::string config;
  ConfigFolder(const std::string& area, const std::string& name, const std::string& text)
      : dir(rb::test::scratch_dir(area)), config((dir / "run.yaml").string()) {
    std::ofstream(dir / name) << text;
  }
  ~ConfigFolder() { std::filesystem::remove_all(dir); }
  ConfigFolder(const ConfigFolder&) = delete;
  ConfigFolder& operator=(const ConfigFolder&) = delete;
};

// The parse context of a host run of `world` ranks.
inline rb::ParseContext host_context(int world) {
  rb::ParseContext c;
  c.world_size = world;
  c.backend = rb::Backend::Host;
  return c;
}

// The ConfigError parse_ring_attention throws for the ring_attention map `yaml` of config file
// `config` on a host world of `world` ranks (the test fails if it throws none).
inline rb::cfg::ConfigError ring_config_error(const std::string& yaml, const std::string& config,
                                              int world) {
  return rb::test::expect_error([&] {
    rb::parse_ring_attention(sweep_spec("ring_attention", "ra", yaml, config), host_context(world));
  });
}

// Parses and returns the error (empty if accepted); checks the failing key and that the
// message starts with file:line:col.
inline std::string rejection(rb::SweepParser parse, const rb::SweepSpec& spec,
                             const rb::ParseContext& ctx, const std::string& key) {
  try {
    parse(spec, ctx);
  } catch (const rb::cfg::ConfigError& e) {
    CHECK(e.key() == "sweeps[0]." + key);
    CHECK(std::string(e.what()).find("test.yaml:") == 0);
    return e.message();
  }
  return "";
}

struct HostSweepRun {
  std::string path;          // the output file, the same on every rank
  rb::SweepOutcome outcome;  // this rank's
};

// Runs `sweep` into /sweeps/<its name> of a new file at `path` on `backend` (gpu: the CUDA
// path's context; cache: the run's group communicators, else the sweep makes its own).
// Collective; returns this rank's outcome.
inline rb::SweepOutcome run_sweep_into(const std::string& path, rb::Sweep& sweep,
                                       const rb::Config& cfg, const rb::RankLayout& layout,
                                       rb::Backend backend = rb::Backend::Host,
                                       rb::GpuContext* gpu = nullptr,
                                       rb::groups::GroupCache* cache = nullptr) {
  rb::SweepOutcome outcome;
  {
    rb::h5::File file = rb::h5::File::create(path, MPI_COMM_WORLD, true);
    rb::h5::Group root = file.root();
    rb::h5::Group out = root.group("sweeps").group(sweep.name());
    const rb::PathFactories paths = rb::make_path_factories(backend);
    rb::Progress progress(layout.rank, sweep.name(), sweep.point_count());
    rb::RunContext ctx{cfg, MPI_COMM_WORLD, layout, backend, gpu, paths, progress, cache};
    outcome = sweep.run(ctx, out);
    file.close();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return outcome;
}

// Runs the first sweep of a YAML text on the host path into a fresh file.
inline HostSweepRun run_host_sweep(const std::string& yaml, rb::SweepParser parse,
                                   const std::string& file_stem) {
  const rb::Config cfg = rb::parse_config_text(yaml, file_stem + ".yaml");
  rb::ParseContext pctx;
  pctx.world_size = rb::test::world();
  auto sweep = parse(cfg.sweeps.at(0), pctx);
  sweep->set_name(cfg.sweeps.at(0).name);
  HostSweepRun run{rb::test::test_path("ring", file_stem), {}};
  run.outcome = run_sweep_into(run.path, *sweep, cfg, rb::discover_rank_layout(MPI_COMM_WORLD));
  return run;
}

}  // namespace rbtest
