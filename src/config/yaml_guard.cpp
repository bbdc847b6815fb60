#include "config/yaml_guard.hpp"

#include <sstream>
#include <unordered_map>
#include <vector>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include "config/node.hpp"

namespace rb::cfg {
namespace {

// Counts the nodes of the expanded document from the event stream. An anchored node's size is
// known when it ends (a collection: the count at its end minus the count at its start), so an
// alias adds that size in one step; sizes saturate at the limit, so nesting cannot overflow.
class ExpansionCounter final : public YAML::EventHandler {
 public:
  ExpansionCounter(std::string file, std::uint64_t limit) : file_(std::move(file)), limit_(limit) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { leaf(mark, anchor); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                const std::string&) override {
    leaf(mark, anchor);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    const auto it = size_of_.find(anchor);
    add(it == size_of_.end() ? 1 : it->second, mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Open {
    YAML::anchor_t anchor;
    std::uint64_t count_before;
  };

  void leaf(const YAML::Mark& mark, YAML::anchor_t anchor) {
    add(1, mark);
    if (anchor != YAML::NullAnchor) size_of_[anchor] = 1;
  }
  void open(const YAML::Mark& mark, YAML::anchor_t anchor) {
    open_.push_back({anchor, count_});
    add(1, mark);
  }
  void close() {
    if (open_.empty()) return;
    const Open o = open_.back();
    open_.pop_back();
    if (o.anchor != YAML::NullAnchor) size_of_[o.anchor] = count_ - o.count_before;
  }
  void add(std::uint64_t n, const YAML::Mark& mark) {
    count_ = (n > limit_ - count_) ? limit_ + 1 : count_ + n;
    if (count_ > limit_)
      throw ConfigError(Location{file_, mark.line + 1, mark.column + 1}, "",
                        "the document expands to more than " + std::to_string(limit_) +
                            " YAML nodes here (aliases '*name' repeat what their anchor "
                            "'&name' holds, so nested aliases multiply); a ringbench config "
                            "needs a few thousand: write the values out or use fewer aliases");
  }

  std::string file_;
  std::uint64_t limit_;
  std::uint64_t count_ = 0;
  std::vector<Open> open_;
  std::unordered_map<YAML::anchor_t, std::uint64_t> size_of_;
};

}  // namespace

void check_yaml_expansion(const std::string& text, const std::string& file,
                          std::uint64_t max_nodes) {
  std::istringstream in(text);
  ExpansionCounter counter(file, max_nodes);
  try {
    YAML::Parser parser(in);
    while (parser.HandleNextDocument(counter)) {
    }
  } catch (const YAML::Exception&) {
    // Syntax errors: the parser that builds the tree reports them with its own wording.
  }
}

}  // namespace rb::cfg
