// The command line (before Kokkos starts) and the provenance the driver records.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "app/cli.hpp"
#include "app/provenance.hpp"

namespace {

rb::ParsedCommandLine parse(std::vector<const char*> args) {
  args.insert(args.begin(), "ringbench");
  return rb::parse_command_line(static_cast<int>(args.size()), args.data());
}

bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

}  // namespace

TEST_CASE("--help starts with ringbench's usage and lists sweep types and kernel paths") {
  const rb::ParsedCommandLine p = parse({"--help"});
  CHECK(p.exit_code == 0);
  CHECK(p.message.rfind("usage: ringbench", 0) == 0);
  CHECK(contains(p.message, "--ranks-per-node"));
  CHECK(contains(p.message, "--placement"));
  CHECK(contains(p.message, "host_pingpong"));
  CHECK(contains(p.message, "Kernel paths"));
  CHECK((contains(p.message, "(cuda, built)") || contains(p.message, "(cuda, not built)")));
  CHECK(!contains(p.message, "--kokkos-num-threads"));
  CHECK(rb::usage_text() == p.message);
}

TEST_CASE("--help TYPE prints the sweep's keys from its key table; an unknown TYPE lists them") {
  const rb::ParsedCommandLine p = parse({"--help", "memory"});
  CHECK(p.exit_code == 0);
  CHECK(p.message.rfind("memory: ", 0) == 0);
  CHECK(contains(p.message, "docs/sweeps/memory.md"));
  CHECK(contains(p.message, "  bytes: byte size, default 1GiB (cuda), 32MiB (host); >= 4096\n"));
  CHECK(contains(p.message, "  iterations: integer, default 10; 1 .. 100000\n"));
  CHECK(contains(parse({"-h", "compute"}).message, "  attention.dtype: dtype, default bf16"));

  const rb::ParsedCommandLine unknown = parse({"--help", "memroy"});
  CHECK(unknown.exit_code == 2);
  CHECK(contains(unknown.message, "unknown sweep type 'memroy'; did you mean 'memory'?"));
  CHECK(contains(unknown.message, "host_pingpong, ring_attention, collectives"));

  // A config file beside --help is no TYPE: the usual help, as before.
  CHECK(parse({"--help", "run.yaml"}).message == rb::usage_text());
  CHECK(parse({"run.yaml", "--help"}).message == rb::usage_text());
}

TEST_CASE("options are parsed; --kokkos-* pass through to Kokkos") {
  const rb::ParsedCommandLine p =
      parse({"run.yaml", "--output", "out.h5", "--only", "a,b", "--only=c", "--dry-run",
             "--kokkos-num-threads=2", "--force"});
  REQUIRE(p.exit_code == -1);
  CHECK(p.cli.config_path == "run.yaml");
  CHECK(p.cli.output == "out.h5");
  CHECK(p.cli.only == std::vector<std::string>{"a", "b", "c"});
  CHECK(p.cli.dry_run);
  CHECK(p.cli.force);
  CHECK(!p.cli.simulated.active());
  CHECK(p.cli.kokkos_args == std::vector<std::string>{"--kokkos-num-threads=2"});
  CHECK(contains(p.cli.command_line, "ringbench run.yaml --output out.h5"));
}

TEST_CASE("--only before the config takes one value") {
  const rb::ParsedCommandLine p = parse({"--only", "a", "run.yaml"});
  REQUIRE(p.exit_code == -1);
  CHECK(p.cli.only == std::vector<std::string>{"a"});
  CHECK(p.cli.config_path == "run.yaml");
}

TEST_CASE("simulated node layout: --ranks-per-node and --placement") {
  rb::ParsedCommandLine p = parse({"run.yaml", "--ranks-per-node", "2"});
  REQUIRE(p.exit_code == -1);
  CHECK(p.cli.simulated.ranks_per_node == 2);
  CHECK(p.cli.simulated.placement == rb::Placement::Block);
  p = parse({"run.yaml", "--ranks-per-node=4", "--placement", "cyclic"});
  REQUIRE(p.exit_code == -1);
  CHECK(p.cli.simulated.ranks_per_node == 4);
  CHECK(p.cli.simulated.placement == rb::Placement::Cyclic);
}

TEST_CASE("--timeout takes positive seconds; exit code 124 is documented in --help") {
  const rb::ParsedCommandLine p = parse({"run.yaml", "--timeout", "90.5"});
  REQUIRE(p.exit_code == -1);
  CHECK(p.cli.timeout_s == 90.5);
  CHECK(parse({"run.yaml"}).cli.timeout_s == 0.0);
  // Issue #31 item 16: nan passed CLI::PositiveNumber (nan <= 0 is false) and disabled the limit.
  for (const char* bad : {"0", "-3", "ten", "nan", "NaN", "inf", "-inf", "1e999", "-0"}) {
    CAPTURE(bad);
    const rb::ParsedCommandLine e = parse({"run.yaml", "--timeout", bad});
    CHECK(e.exit_code == 2);
    CHECK(contains(e.message, "--timeout"));
  }
  const std::string help = parse({"--help"}).message;
  CHECK(contains(help, "--timeout SECONDS"));
  CHECK(contains(help, "124"));
}

TEST_CASE("empty --output and --only, and non-numeric --kokkos-* numbers, say which") {
  CHECK(contains(parse({"run.yaml", "-o", ""}).message, "--output is empty"));
  CHECK(contains(parse({"run.yaml", "--only", ""}).message, "--only names no sweep"));
  CHECK(contains(parse({"run.yaml", "--kokkos-threads=abc"}).message,
                 "--kokkos-threads=abc: expected a non-negative integer"));
  CHECK(parse({"run.yaml", "--kokkos-num-threads=4", "--kokkos-disable-warnings"}).exit_code == -1);
}

TEST_CASE("usage errors exit 2 with a message and the usage line") {
  const std::vector<std::vector<const char*>> bad = {
      {},                                     // no config
      {"run.yaml", "--bogus"},                // unknown option
      {"a.yaml", "b.yaml"},                   // two configs
      {"run.yaml", "--output"},               // missing value
      {"run.yaml", "--output", "x"},          // too short to be a file name
      {"run.yaml", "--ranks-per-node", "0"},  // out of range
      {"run.yaml", "--placement", "cyclic"},  // needs --ranks-per-node
      {"run.yaml", "--ranks-per-node", "2", "--placement", "round-robin"},
      {"run.yaml", "--output", ""},          // given, empty: not the default name
      {"run.yaml", "--only", ""},            // given, empty: not every sweep
      {"run.yaml", "--kokkos-threads=abc"},  // Kokkos itself says only "stoi"
      {"run.yaml", "--kokkos-num-threads=-2"},
      {"run.yaml", "--kokkos-num-threads=99999999999"},
  };
  for (const auto& args : bad) {
    const rb::ParsedCommandLine p = parse(args);
    CAPTURE(p.message);
    CHECK(p.exit_code == 2);
    CHECK(p.message.rfind("ringbench: ", 0) == 0);
    CHECK(contains(p.message, "usage: ringbench"));
  }
}

TEST_CASE("--version asks for the version text, which names the libraries") {
  const rb::ParsedCommandLine p = parse({"--version"});
  CHECK(p.exit_code == 0);
  CHECK(p.show_version);
  const std::string v = rb::version_text();
  CHECK(v.rfind("ringbench ", 0) == 0);
  for (const char* lib : {"mpi: ", "hdf5: ", "hwloc: ", "kokkos: "}) CHECK(contains(v, lib));
}

TEST_CASE("the recorded environment keeps only the variables that change results") {
  const char* env[] = {"NCCL_ALGO=Ring",
                       "CUDA_VISIBLE_DEVICES=0,1",
                       "HOME=/root",
                       "OMPI_MCA_btl=self",
                       "SLURM_JOB_ID=42",
                       "SLURM_PROCID=3",
                       "PATH=/usr/bin",
                       "KOKKOS_NUM_THREADS=4",
                       "RINGBENCH_PLACEMENT=cyclic",
                       "UCX_TLS=rc",
                       "OMP_NUM_THREADS=8",
                       "NOEQUALS",
                       "FI_PROVIDER=efa",
                       "PMIX_RANK=0",
                       "I_MPI_FABRICS=shm:ofi",
                       "MPICH_GPU_SUPPORT_ENABLED=1",
                       "FIX=1",
                       "MPICH=1",
                       "XPMIX_RANK=1",
                       nullptr};
  const rb::NamedValues kept = rb::result_environment(env);
  std::vector<std::string> names;
  for (const auto& [name, value] : kept) names.push_back(name);
  // Prefixes, not substrings: FIX, MPICH and XPMIX_RANK are not kept.
  CHECK(names == std::vector<std::string>{
                     "CUDA_VISIBLE_DEVICES", "FI_PROVIDER", "I_MPI_FABRICS", "KOKKOS_NUM_THREADS",
                     "MPICH_GPU_SUPPORT_ENABLED", "NCCL_ALGO", "OMPI_MCA_btl", "OMP_NUM_THREADS",
                     "PMIX_RANK", "RINGBENCH_PLACEMENT", "SLURM_JOB_ID", "UCX_TLS"});
  CHECK(kept[0].second == "0,1");
}

TEST_CASE("--wide keeps rows whole; --json - is stdout, which a --dry-run cannot fill") {
  CHECK(parse({"run.yaml", "--wide"}).cli.wide);
  CHECK_FALSE(parse({"run.yaml"}).cli.wide);
  rb::ParsedCommandLine p = parse({"run.yaml", "--json", "-"});
  CHECK(p.exit_code == -1);
  CHECK(p.cli.json == "-");
  p = parse({"run.yaml", "--json", "-", "--dry-run"});
  CHECK(p.exit_code == 2);
  CHECK(contains(p.message, "--json - writes a run's results to stdout"));
  CHECK(parse({"run.yaml", "--json", "r.json", "--dry-run"}).exit_code == -1);
}

TEST_CASE("--quiet, --json, and the dry-run options; --world-size only plans") {
  rb::ParsedCommandLine p = parse({"run.yaml", "--quiet", "--json", "r.json"});
  CHECK(p.exit_code == -1);
  CHECK(p.cli.quiet);
  CHECK(p.cli.json == "r.json");
  p = parse({"run.yaml", "--dry-run", "--world-size", "64", "--ranks-per-node", "8", "--verbose",
             "--estimate-from", "old.h5"});
  CHECK(p.exit_code == -1);
  CHECK(p.cli.world_size == 64);
  CHECK(p.cli.simulated.ranks_per_node == 8);
  CHECK(p.cli.verbose);
  CHECK(p.cli.estimate_from == "old.h5");
  for (const auto& bad : std::vector<std::vector<const char*>>{
           {"run.yaml", "--world-size", "4"},  // a real run takes the launcher's size
           {"run.yaml", "--dry-run", "--world-size", "0"},
           {"run.yaml", "--dry-run", "--world-size", "6", "--ranks-per-node", "4"},
           {"run.yaml", "--estimate-from", "old.h5"},
           {"run.yaml", "--quiet", "--verbose"}}) {
    p = parse(bad);
    CHECK(p.exit_code == 2);
    CHECK(p.message.rfind("ringbench: ", 0) == 0);
  }
  CHECK(parse({"run.yaml", "--dry-run", "--world-size", "6", "--ranks-per-node", "4"})
            .message.find("not a multiple of --ranks-per-node 4") != std::string::npos);
}
