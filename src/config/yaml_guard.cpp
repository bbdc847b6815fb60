#include "config/yaml_guard.hpp"

#include <algorithm>
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
// It also checks each quoted scalar's closing quote: the event stream is the one place that knows
// where a scalar starts, and yaml-cpp lets an unclosed quote run to the end of the file.
class ExpansionCounter final : public YAML::EventHandler {
 public:
  ExpansionCounter(const std::string& text, std::string file, std::uint64_t limit)
      : text_(text), file_(std::move(file)), limit_(limit) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { leaf(mark, anchor); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                const std::string&) override {
    check_quote(mark);
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

  // A scalar's mark is its first character, after an anchor (&a) or tag (!t) if it has one.
  void check_quote(const YAML::Mark& mark) const {
    if (mark.pos < 0) return;
    std::size_t at = static_cast<std::size_t>(mark.pos);
    while (at < text_.size() && (text_[at] == '&' || text_[at] == '!')) {
      while (at < text_.size() && text_[at] != ' ' && text_[at] != '\t' && text_[at] != '\n') ++at;
      while (at < text_.size() && (text_[at] == ' ' || text_[at] == '\t')) ++at;
    }
    if (at >= text_.size() || (text_[at] != '"' && text_[at] != '\'') || quote_is_closed(text_, at))
      return;
    std::size_t line_start = text_.rfind('\n', at);
    line_start = line_start == std::string::npos ? 0 : line_start + 1;
    const int line = 1 + static_cast<int>(std::count(text_.begin(), text_.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
    const std::string quote(1, text_[at]);
    throw ConfigError(Location{file_, line, static_cast<int>(at - line_start) + 1}, "",
                      "unterminated quoted string: the " + quote + " opened here is never "
                      "closed, so everything after it up to the end of the file would be one "
                      "value; add the closing " + quote);
  }

  const std::string& text_;
  std::string file_;
  std::uint64_t limit_;
  std::uint64_t count_ = 0;
  std::vector<Open> open_;
  std::unordered_map<YAML::anchor_t, std::uint64_t> size_of_;
};

}  // namespace

bool quote_is_closed(const std::string& text, std::size_t open) {
  const char quote = text[open];
  for (std::size_t i = open + 1; i < text.size(); ++i) {
    if (quote == '"' && text[i] == '\\') {
      ++i;  // an escape: the next character is never the closing quote
    } else if (text[i] == quote) {
      if (quote == '\'' && i + 1 < text.size() && text[i + 1] == '\'') {
        ++i;  // '' is a quote inside single quotes
        continue;
      }
      return true;
    }
  }
  return false;
}

void check_yaml_expansion(const std::string& text, const std::string& file,
                          std::uint64_t max_nodes) {
  std::istringstream in(text);
  ExpansionCounter counter(text, file, max_nodes);
  try {
    YAML::Parser parser(in);
    while (parser.HandleNextDocument(counter)) {
    }
  } catch (const YAML::Exception&) {
    // Syntax errors: the parser that builds the tree reports them with its own wording.
  }
}

}  // namespace rb::cfg
