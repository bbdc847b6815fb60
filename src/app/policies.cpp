// Tuned policies (kernel_policy:, cp_policy:) against the machine this run has: whether each
// file applies, is ported from another GPU model of the same architecture, or gives way to the
// built-in rule (a warning; with strict: true an error before any work). The same decision on
// every rank.
#include "app/policies.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "app/provenance.hpp"
#include "config/policy_file.hpp"
#include "runtime/gpu.hpp"
#include "runtime/mpi_util.hpp"
#include "sweeps/cp_policy.hpp"

namespace rb {
namespace {

// Each policy file once, in sweep order: the sweeps' kernel_policies() or cp_policies().
template <class Use, class Of>
std::vector<std::shared_ptr<Use>> policy_uses(const std::vector<std::unique_ptr<Sweep>>& sweeps,
                                              Of of) {
  std::vector<std::shared_ptr<Use>> uses;
  for (const auto& sweep : sweeps)
    for (auto& use : of(*sweep))
      if (std::find(uses.begin(), uses.end(), use) == uses.end()) uses.push_back(use);
  return uses;
}

std::string library_version(const char* name) {
  for (const auto& [library, text] : library_versions())
    if (library == name) return text;
  return "";
}

// A kind of policy in the messages: what it is, what it steers ("kernel: auto" or "scheme:
// auto"), and what that follows without the file.
struct PolicyWords {
  const char* kind;
  const char* steers;
  const char* without_it;
};
PolicyWords words(const KernelPolicyUse&) {
  return {"kernel policy", "kernel: auto", "kernel: auto follows the built-in rule"};
}
PolicyWords words(const CpPolicyUse&) {
  return {"CP policy", "scheme: auto", "scheme: auto runs the ring (the built-in rule)"};
}

// Whether one policy applies on every rank: "" or the first rank's reason. Every rank must
// also have read the same bytes (a node with a stale copy would run other kernels).
template <class Use>
std::string policy_reason(const Use& use, const GpuInfo& gpu, Backend backend, MPI_Comm world) {
  const ThisMachine here{to_string(backend), gpu.name,
                         backend == Backend::Cuda ? library_version("cudnn") : "", gpu.arch};
  std::string sha = use.policy->sha256;
  mpi::broadcast_string(sha, world);
  std::string mine = applicability(use, here);
  if (sha != use.policy->sha256)
    mine = "rank " + std::to_string(mpi::rank_of(world)) + " read other bytes from " + use.file +
           " than rank 0 (sha256 " + use.policy->sha256 + ", rank 0: " + sha + ")";
  for (const auto& reason : mpi::gather_strings(mine, world))
    if (!reason.empty()) return reason;
  return "";
}

// A policy tuned on another GPU model of this architecture applies (applicability() said so):
// say it once and record "ported from MODEL" with the file, or (strict) refuse through `refusal`.
template <class Use>
void port_if_other_model(Use& use, const GpuInfo& gpu, Backend backend, std::string& refusal,
                         MPI_Comm world) {
  const ThisMachine here{to_string(backend), gpu.name, "", gpu.arch};
  const std::string from = ported_from(use, here);
  if (from.empty()) return;
  const std::string why = "it was tuned on GPU '" + from + "', this rank has '" + gpu.name +
                          "' of the same architecture (sm " + gpu.arch + ")";
  if (use.strict) {
    refusal = why;
    return;
  }
  if (mpi::rank_of(world) == 0)
    fmt::print(stderr,
               "warning: {}:{}: key '{}': tuned policy {} ported: {}; {} follows it (strict: true "
               "refuses instead)\n",
               use.where.file, use.where.line, use.key, use.file, why, words(use).steers);
  use.source.description += " ported from " + from;
}

// Decides, on every rank alike, what each policy key's `auto` follows: the file where it was
// tuned on this kind of machine, else the built-in rule with a warning, or (strict) an error
// before any work. Returns false after an error.
template <class Use>
bool decide(const std::vector<std::shared_ptr<Use>>& uses, Backend backend, const GpuInfo& gpu,
            bool quiet, MPI_Comm world) {
  const bool root = mpi::rank_of(world) == 0;
  for (const auto& use : uses) {
    std::string strict_refusal;
    const std::string why = policy_reason(*use, gpu, backend, world);
    const std::string where = fmt::format("{}:{}: key '{}': tuned policy {}", use->where.file,
                                          use->where.line, use->key, use->file);
    if (why.empty()) {
      port_if_other_model(*use, gpu, backend, strict_refusal, world);
      if (!strict_refusal.empty()) {
        if (root)
          fmt::print(stderr, "ringbench: invalid config: {} refused (strict): {}\n", where,
                     strict_refusal);
        return false;
      }
      if (root && !quiet)
        fmt::print(stderr, "{}: {} is followed by {}\n", words(*use).kind, use->source.description,
                   words(*use).steers);
      continue;
    }
    if (use->strict) {
      if (root)
        fmt::print(stderr, "ringbench: invalid config: {} refused (strict): {}\n", where, why);
      return false;
    }
    if (root)
      fmt::print(stderr, "warning: {} not applied: {}; {} (strict: true refuses instead)\n", where,
                 why, words(*use).without_it);
    use->source = {nullptr, "built-in (" + use->file + " not applied: " + why + ")"};
  }
  return true;
}

}  // namespace

std::vector<InputFile> policy_files(const Config& config,
                                    const std::vector<std::unique_ptr<Sweep>>& sweeps) {
  std::vector<InputFile> out;
  const auto add = [&](const auto& uses) {
    for (const auto& use : uses)
      out.push_back(
          {fmt::format("{}:{}: key '{}'", use->where.file, use->where.line, use->key), use->file});
  };
  auto kernel =
      policy_uses<KernelPolicyUse>(sweeps, [](const Sweep& w) { return w.kernel_policies(); });
  if (config.kernel_policy &&
      std::find(kernel.begin(), kernel.end(), config.kernel_policy) == kernel.end())
    kernel.push_back(config.kernel_policy);
  add(kernel);
  add(policy_uses<CpPolicyUse>(sweeps, [](const Sweep& w) { return w.cp_policies(); }));
  return out;
}

bool decide_policies(const std::vector<std::unique_ptr<Sweep>>& sweeps, Backend backend,
                     const GpuInfo& gpu, bool quiet, MPI_Comm world) {
  const auto kernel =
      policy_uses<KernelPolicyUse>(sweeps, [](const Sweep& w) { return w.kernel_policies(); });
  const auto cp = policy_uses<CpPolicyUse>(sweeps, [](const Sweep& w) { return w.cp_policies(); });
  // Every line here is a note or a warning: stderr, as the progress lines (stdout keeps the
  // header, the tables and the summary).
  return decide(kernel, backend, gpu, quiet, world) && decide(cp, backend, gpu, quiet, world);
}

}  // namespace rb
