#pragma once
// `kernel_policy:` (top level, or in a sweep): a tuned policy file made by `rb-analysis tune`
// that `kernel: auto` follows. Read and checked at config time on every rank (a missing file,
// a wrong schema, an unknown path name, a range a path cannot run are cfg::ConfigErrors naming
// the policy file, the key inside it and the line); whether it applies to this machine is
// decided once the GPU is known (applicability()), by the driver. docs/tuning.md has the format.
// (Named policy_file, not kernel_policy: "kernel_policy.hpp" is the kernels layer's header.)
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/key_spec.hpp"
#include "config/node.hpp"
#include "kernel_policy.hpp"

namespace rb {

// Where the timings behind a policy were taken (its `machine:` map); "" for null.
struct PolicyMachine {
  std::string device;  // host | cuda
  std::string gpu, cuda_driver, cuda_runtime, cudnn, ringbench_version, commit;
  std::string gpu_arch;  // compute capability "9.0"; files without it: known_gpu_arch(gpu)
};

// One `kernel_policy:` key of the config and the file it names.
struct KernelPolicyUse {
  std::string key;      // "kernel_policy" or "sweeps[2].kernel_policy"
  cfg::Location where;  // of the key in the config
  std::string file;     // resolved path
  bool strict = false;  // refuse (instead of warning) when it does not apply here
  PolicyMachine machine;
  std::shared_ptr<const attn::KernelPolicy> policy;
  // What auto follows, set by the driver after applicability(): the policy, or the built-in
  // rule with the reason. Until then: the policy (a --dry-run never decides).
  attn::PolicySource source;
};

// The `machine:` map of a tuned policy file (kernel or CP policy). Throws cfg::ConfigError.
PolicyMachine parse_policy_machine(const cfg::Node& root);

// A tuned policy file's top-level keys: the header every kind has (version, kind, machine and
// the tuner's notes), the kind's `own` keys, then `rules`.
std::vector<cfg::KeySpec> policy_file_keys(std::vector<cfg::KeySpec> own);
// A rule's keys: the shape keys every kind starts with (dtype, head_dim), the kind's `own` shape
// keys, then `ranges` (what each range holds, in words), all required unless `own` says.
std::vector<cfg::KeySpec> policy_rule_keys(std::vector<cfg::KeySpec> own, std::string ranges);
// A range's keys: `<unit>_min` and `<unit>_max` (inclusive), the `<choice>` tuned fastest there
// (null where none passed parity), the kind's `own` keys, the built-in rule's `default_<choice>`
// and the measured `speedup`.
std::vector<cfg::KeySpec> policy_range_keys(const std::string& unit, const std::string& choice,
                                            std::vector<cfg::KeySpec> own);

// Which file a reader takes: `version` and `kind` as `rb-analysis <tool>` writes them.
struct PolicyFormat {
  const char* what;  // "policy", "CP policy": names the version in messages
  std::int64_t version;
  const char* kind;
  const char* tool;  // "tune", "tune-cp"
};
// A missing or other version, or another kind, is refused at its key. Throws cfg::ConfigError.
void check_policy_format(const cfg::Node& root, const PolicyFormat& format);
// A policy file named at `owner.key`: an absolute path, or one relative to the config file's
// directory. An empty name is a cfg::ConfigError.
std::string resolve_policy_path(const cfg::Node& owner, const std::string& key, std::string file);

// A policy key as written (kernel_policy:, cp_policy:): `FILE` or `{file: FILE, strict: BOOL}`,
// the file resolved (resolve_policy_path) and read; `what` names the file in the error when it
// cannot be read ("tuned policy", "CP policy"). Throws cfg::ConfigError.
struct PolicyKey {
  std::string file, text;
  bool strict = false;
  std::string key;      // the key's full path, e.g. "sweeps[2].kernel_policy"
  cfg::Location where;  // of the key in the config
};
PolicyKey read_policy_key(const cfg::Node& owner, const std::string& key, const std::string& what);

// Reads `owner.key` (read_policy_key) and parses the kernel policy. Throws cfg::ConfigError.
std::shared_ptr<KernelPolicyUse> parse_kernel_policy(const cfg::Node& owner,
                                                     const std::string& key);

// The policy's rules from its text (exposed for tests). `file` names it in errors.
std::shared_ptr<KernelPolicyUse> parse_kernel_policy_text(const std::string& text,
                                                          const std::string& file);

// What this rank runs on, for applicability().
struct ThisMachine {
  std::string device;    // host | cuda
  std::string gpu;       // GPU model ("" on the host)
  std::string cudnn;     // cuDNN version text as /run/libraries records it ("" on the host)
  std::string gpu_arch;  // compute capability "9.0" ("" on the host)
};

// The compute capability of a GPU model a policy names when the file does not say it (files
// from before machine.gpu_arch): the data-centre models ringbench has been tuned on. "" unknown.
std::string known_gpu_arch(const std::string& gpu);

// Empty when the policy was made on this kind of machine (same device, cuDNN version, every
// path it names built here, and the same GPU model or, ported, another of the same
// architecture: port_if_other_model in the driver warns); otherwise one sentence saying what
// differs.
std::string applicability(const KernelPolicyUse& use, const ThisMachine& here);
// The machine part of that check (device, GPU model or architecture, cuDNN), shared with the
// CP policy (sweeps/cp_policy.hpp).
std::string machine_applicability(const PolicyMachine& m, const ThisMachine& here);
// When the policy applies only as a port (tuned on another GPU model of this architecture):
// that model; else "".
std::string ported_from(const KernelPolicyUse& use, const ThisMachine& here);
std::string ported_from(const PolicyMachine& m, const ThisMachine& here);

}  // namespace rb
