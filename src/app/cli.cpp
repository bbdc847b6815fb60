#include "app/cli.hpp"

#include <algorithm>
#include <filesystem>
#include <cmath>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "app/registry.hpp"
#include "kernel_paths.hpp"

namespace rb {
namespace {

constexpr const char* kUsageLine = "usage: ringbench CONFIG.yaml [OPTIONS]";

// CLI11 puts the description before the usage line; ringbench's help starts with the usage
// line (the first thing people and tests look for), so both come from here.
class UsageFirst : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App*, std::string) const override {
    return fmt::format(
        "{}\nRuns the sweeps named in CONFIG.yaml on every rank (launch with mpirun/srun) and\n"
        "writes all per-rank metrics into one HDF5 file. Kokkos options (--kokkos-*) are\n"
        "passed to Kokkos.\n",
        kUsageLine);
  }
};

std::string footer_text() {
  std::string s = "Sweep types:\n";
  for (const auto& k : sweep_kinds()) s += fmt::format("  {}: {}\n", k.type, k.summary);
  s += "  (ringbench --help TYPE: the type's keys, each with its default and limits)\n";
  s += "Kernel paths (kernel: in a ring_attention sweep):\n";
  for (const auto& p : attn::kernel_paths())
    s += fmt::format("  {} ({}, {}): {}\n", p.name, attn::to_string(p.device),
                     p.built ? "built" : "not built", p.summary);
  s += "Exit codes: 0 complete, 1 failed run or invalid config, 2 usage error, 124 a time limit\n"
       "passed (--timeout, run.timeout_s, run.point_timeout_s), 128 + N ended by signal N\n"
       "(143 SIGTERM, 130 SIGINT, 138 SIGUSR1; the end state in OUTPUT.end).\n"
       "Docs: docs/user-guide.md, docs/config.md (YAML), docs/hdf5-schema.md (output layout).";
  return s;
}

// --timeout: a finite number of seconds > 0. CLI::PositiveNumber lets nan through (nan <= 0 is
// false) and inf, and either one disabled the limit.
CLI::Validator finite_positive_seconds() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value) || !std::isfinite(value) || !(value > 0))
          return "expected a finite number of seconds > 0, got '" + text + "'";
        return "";
      },
      "");
}

struct Options {
  bool help_only = false;
  bool version = false;
  int ranks_per_node = 0;
  std::string placement = "block";
};

void describe_options(CLI::App& app, CommandLine& cli, Options& o) {
  app.formatter(std::make_shared<UsageFirst>());
  app.set_help_flag("-h,--help", "print this help and exit; --help TYPE: a sweep type's keys");
  app.add_flag("--version", o.version, "print the version and library versions, and exit");
  app.add_option("config", cli.config_path, "the run's YAML file (docs/config.md)")
      ->type_name("CONFIG.yaml");
  app.add_option("-o,--output", cli.output,
                 "output file (default: <run.output_dir>/<run.name>_<UTC time>.h5)")
      ->type_name("FILE.h5");
  app.add_option("--only", cli.only, "run only the named sweeps (repeatable)")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->type_name("SWEEP[,SWEEP]");
  app.add_flag("--dry-run", cli.dry_run, "validate the config and print the plan; run nothing");
  app.add_flag("--force", cli.force, "overwrite an existing --output file");
  app.add_flag("-q,--quiet", cli.quiet,
               "print only errors, warnings and the final line (no progress, no tables)");
  app.add_flag("-v,--verbose", cli.verbose, "with --dry-run: list every point");
  app.add_flag("--wide", cli.wide,
               "print each table row on one line, however wide (default: tables wider than 100 "
               "columns are split into parts)");
  app.add_option("--json", cli.json,
                 "also write the results as JSON: a header and one record per point "
                 "(rank 0; written at the end, and on failure); - writes it to stdout, and "
                 "the tables and summary go to stderr")
      ->type_name("FILE");
  app.add_option("--world-size", cli.world_size,
                 "with --dry-run: plan for N ranks without mpirun (a login node); "
                 "--ranks-per-node gives the node layout")
      ->check(CLI::Range(1, 1 << 24).description(""))
      ->type_name("N");
  app.add_option("--estimate-from", cli.estimate_from,
                 "with --dry-run: take each point's time from this earlier output file where "
                 "the points match (the cost model elsewhere)")
      ->type_name("PREVIOUS.h5");
  app.add_option("--timeout", cli.timeout_s,
                 "stop every rank with exit code 124 when the whole run takes longer "
                 "(overrides run.timeout_s)")
      ->check(finite_positive_seconds())
      ->type_name("SECONDS");
  auto* rpn = app.add_option("--ranks-per-node", o.ranks_per_node,
                             "pretend every K ranks form a node (tests, dry-runs of a multi-node "
                             "plan on one machine)")
                  ->check(CLI::Range(1, 1 << 20).description(""))
                  ->type_name("K");
  app.add_option("--placement", o.placement,
                 "with --ranks-per-node: block (ranks 0..K-1 on node 0) or cyclic (rank r on "
                 "node r % N)")
      ->check(CLI::IsMember({"block", "cyclic"}).description(""))
      ->needs(rpn)
      ->type_name("block|cyclic");
  app.footer(footer_text());
}

// The numeric --kokkos-* options: Kokkos' own failure on a non-number is "stoi" alone.
std::string bad_kokkos_number(const std::vector<std::string>& args) {
  for (const std::string& a : args)
    for (const char* name : {"--kokkos-num-threads=", "--kokkos-threads=", "--kokkos-device-id=",
                             "--kokkos-num-devices=", "--kokkos-numa="})
      if (a.rfind(name, 0) == 0) {
        const std::string value = a.substr(std::string(name).size());
        if (value.empty() || value.size() > 9 ||
            value.find_first_not_of("0123456789") != std::string::npos)
          return a;
      }
  return "";
}

ParsedCommandLine usage_error(const std::string& why) {
  ParsedCommandLine p;
  p.exit_code = 2;
  p.message =
      fmt::format("ringbench: {}\n{}\nRun 'ringbench --help' for the options.\n", why, kUsageLine);
  return p;
}

// `--help TYPE`: the keys of one sweep type, from the table its parser reads them through.
ParsedCommandLine sweep_help(const std::string& type) {
  std::vector<std::string> types;
  for (const auto& k : sweep_kinds()) {
    if (type == k.type) {
      ParsedCommandLine p;
      p.exit_code = 0;
      p.message = fmt::format(
          "{}: {}\nKeys of a sweep `type: {}` (docs/sweeps/{}.md has the details):\n"
          "  KEY: TYPE, default DEFAULT; ALLOWED VALUES\n{}",
          k.type, k.summary, k.type, k.type, cfg::describe_keys(k.keys()));
      return p;
    }
    types.push_back(k.type);
  }
  const std::string hint = cfg::did_you_mean(type, types);
  return usage_error(fmt::format("--help: unknown sweep type '{}'{}; the sweep types are {}", type,
                                 hint.empty() ? "" : "; did you mean '" + hint + "'?",
                                 cfg::join(types, ", ")));
}

// The word after --help, when it names a sweep type rather than the config file
// (`ringbench run.yaml --help` and `ringbench --help run.yaml` print the usual help).
std::string help_topic(const std::vector<const char*>& args) {
  for (std::size_t i = 1; i + 1 < args.size(); ++i) {
    const std::string a = args[i], next = args[i + 1];
    const auto ends_with = [&](const std::string& end) {
      return next.size() >= end.size() &&
             next.compare(next.size() - end.size(), end.size(), end) == 0;
    };
    if ((a == "--help" || a == "-h") && !next.empty() && next[0] != '-' && !ends_with(".yaml") &&
        !ends_with(".yml"))
      return next;
  }
  return "";
}

}  // namespace

std::string usage_text() {
  CommandLine cli;
  Options o;
  CLI::App app{"", "ringbench"};
  describe_options(app, cli, o);
  return app.help();
}

ParsedCommandLine parse_command_line(int argc, const char* const* argv) {
  ParsedCommandLine p;
  CommandLine& cli = p.cli;
  std::vector<const char*> ours{argc > 0 ? argv[0] : "ringbench"};
  cli.command_line = ours[0];
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    cli.command_line += " " + a;
    if (a.rfind("--kokkos-", 0) == 0)
      cli.kokkos_args.push_back(a);
    else
      ours.push_back(argv[i]);
  }
  if (const std::string topic = help_topic(ours); !topic.empty()) return sweep_help(topic);
  Options o;
  CLI::App app{"", "ringbench"};
  describe_options(app, cli, o);
  try {
    app.parse(static_cast<int>(ours.size()), ours.data());
  } catch (const CLI::CallForHelp&) {
    p.exit_code = 0;
    p.message = app.help();
    return p;
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  }
  if (o.version) {
    p.exit_code = 0;
    p.show_version = true;
    return p;
  }
  if (cli.config_path.empty()) return usage_error("no config file given");
  // Given but empty (`-o ''`, `--only ''`, a shell variable that was never set): not the default.
  if (app.count("--output") > 0 && cli.output.empty())
    return usage_error("--output is empty; name the output file, or leave --output out");
  cli.only.erase(std::remove(cli.only.begin(), cli.only.end(), std::string()), cli.only.end());
  if (app.count("--only") > 0 && cli.only.empty())
    return usage_error("--only names no sweep; name one (--only SWEEP[,SWEEP]), or leave it out");
  if (const std::string bad = bad_kokkos_number(cli.kokkos_args); !bad.empty())
    return usage_error(bad + ": expected a non-negative integer");
  if (!cli.output.empty() && cli.output.size() < 3)
    return usage_error(fmt::format(
        "--output '{}' is too short for an output file name{}; --output names the file, e.g. "
        "'{}/run.h5'",
        cli.output, std::filesystem::is_directory(cli.output) ? " (it is a directory)" : "",
        cli.output));
  if (cli.world_size > 0 && !cli.dry_run)
    return usage_error(
        "--world-size plans a --dry-run; a real run takes its size from the launcher");
  if (!cli.estimate_from.empty() && !cli.dry_run)
    return usage_error("--estimate-from goes with --dry-run");
  if (cli.quiet && cli.verbose) return usage_error("--quiet and --verbose contradict each other");
  if (cli.json == "-" && cli.dry_run)
    return usage_error("--json - writes a run's results to stdout; a --dry-run has none");
  if (cli.world_size > 0 && o.ranks_per_node > 0 && cli.world_size % o.ranks_per_node != 0)
    return usage_error(
        fmt::format("--world-size {} is not a multiple of --ranks-per-node {}: "
                    "every node of the planned job runs the same number of ranks",
                    cli.world_size, o.ranks_per_node));
  if (o.ranks_per_node > 0) {
    cli.simulated.ranks_per_node = o.ranks_per_node;
    cli.simulated.placement = o.placement == "cyclic" ? Placement::Cyclic : Placement::Block;
  }
  return p;
}

}  // namespace rb
