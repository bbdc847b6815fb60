#pragma once
// Runs the first sweep of a YAML text on the host path into a fresh file, on every rank, as the
// driver would (path factories, progress, run context): the sweep tests read the file back.
#include <doctest/doctest.h>
#include <mpi.h>
#include <yaml-cpp/yaml.h>

#include <string>

#include "app/paths.hpp"
#include "app/progress.hpp"
#include "config/config.hpp"
#include "config/node.hpp"
#include "metrics/h5.hpp"
#include "runtime/mpi.hpp"
#include "sweeps/sweep.hpp"
#include "test_support.hpp"

namespace rbtest {

// A sweep's YAML map as the driver hands it to the sweep's parser (file test.yaml, sweeps[0]).
inline rb::SweepSpec sweep_spec(const std::string& type, const std::string& name,
                                const std::string& yaml) {
  rb::SweepSpec s;
  s.type = type;
  s.name = name;
  s.node = rb::cfg::Node(YAML::Load(yaml), "test.yaml", "sweeps[0]");
  return s;
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

inline HostSweepRun run_host_sweep(const std::string& yaml, rb::SweepParser parse,
                                   const std::string& file_stem) {
  const rb::Config cfg = rb::parse_config_text(yaml, file_stem + ".yaml");
  const rb::RankLayout layout = rb::discover_rank_layout(MPI_COMM_WORLD);
  rb::ParseContext pctx;
  pctx.world_size = rb::test::world();
  auto sweep = parse(cfg.sweeps.at(0), pctx);
  const std::string name = cfg.sweeps.at(0).name;
  HostSweepRun run{rb::test::test_path("ring", file_stem), {}};
  {
    rb::h5::File file = rb::h5::File::create(run.path, MPI_COMM_WORLD, true);
    rb::h5::Group root = file.root();
    rb::h5::Group out = root.group("sweeps").group(name);
    const rb::PathFactories paths = rb::make_path_factories(rb::Backend::Host);
    rb::Progress progress(layout.rank, name, sweep->plan().size());
    rb::RunContext ctx{cfg, MPI_COMM_WORLD, layout, rb::Backend::Host, nullptr, paths, progress};
    run.outcome = sweep->run(ctx, out);
    file.close();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return run;
}

}  // namespace rbtest
