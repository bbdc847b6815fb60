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
#include "config/text_checks.hpp"

namespace rb::cfg {
namespace {

// Counts the nodes of the expanded document from the event stream. An anchored node's size is
// known when it ends (a collection: the count at its end minus the count at its start), so an
// alias adds that size in one step; sizes saturate at the limit, so nesting cannot overflow.
// An alias of an anchor whose collection is still open (`x: &a [*a]`) makes a node that
// contains itself: yaml-cpp builds it, and every walk of the tree (the duplicate-key check
// first) recurses until the stack runs out, so it is refused here, at the alias's key path.
// It also checks each quoted scalar's closing quote: the event stream is the one place that knows
// where a scalar starts, and yaml-cpp lets an unclosed quote run to the end of the file.
class ExpansionCounter final : public YAML::EventHandler {
 public:
  ExpansionCounter(const std::string& text, std::string file, std::uint64_t limit)
      : text_(text), file_(std::move(file)), limit_(limit) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { leaf(mark, anchor, ""); }
  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    check_quote(mark);
    check_no_nul(mark, value);
    // YAML's merge key is the plain scalar `<<` as a map key ("?": no tag, not quoted).
    if (tag == "?" && value == "<<" && !open_.empty() && open_.back().map && open_.back().at_key)
      open_.back().merge_mark = mark;
    leaf(mark, anchor, value);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    check_not_recursive(mark, anchor);
    const auto it = size_of_.find(anchor);
    add(it == size_of_.end() ? 1 : it->second, mark);
    node_done("*" + alias_name(mark));
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, anchor, false);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(mark, anchor, true);
  }
  void OnMapEnd() override { close(); }

  // The key path where reading stopped (after a syntax error: the map or list it is in).
  std::string path() const { return path_here(); }

 private:
  // A collection being read: its anchor and count at its start (sizes), and where in it the
  // next node goes (the key path of messages).
  struct Open {
    YAML::anchor_t anchor;
    std::uint64_t count_before;
    int line;  // 1-based, where the collection starts
    bool map;
    bool at_key = true;     // map: the next node is a key (else the value of `key`)
    std::size_t index = 0;  // sequence: the next node's index
    std::string key;
    // Where a merge key `<<` was read, until its value ends (then it is refused: the alias
    // checks of the value come first); null otherwise.
    YAML::Mark merge_mark = YAML::Mark::null_mark();
  };

  void leaf(const YAML::Mark& mark, YAML::anchor_t anchor, const std::string& value) {
    add(1, mark);
    if (anchor != YAML::NullAnchor) size_of_[anchor] = 1;
    node_done(value);
  }
  void open(const YAML::Mark& mark, YAML::anchor_t anchor, bool map) {
    open_.push_back({anchor, count_, mark.line + 1, map, true, 0, ""});
    add(1, mark);
  }
  void close() {
    if (open_.empty()) return;
    const Open o = open_.back();
    open_.pop_back();
    if (o.anchor != YAML::NullAnchor) size_of_[o.anchor] = count_ - o.count_before;
    node_done("?");  // a collection as a map key has no name of its own
  }
  // A whole node was read: its parent moves on to the next key, value or index.
  void node_done(const std::string& text) {
    if (open_.empty()) return;
    Open& parent = open_.back();
    if (!parent.map) {
      ++parent.index;
    } else {
      if (parent.at_key)
        parent.key = text;
      else if (!parent.merge_mark.is_null())
        refuse_merge_key(parent.merge_mark);
      parent.at_key = !parent.at_key;
    }
  }
  // The key path of the node being read, as cfg::Node spells it (`sweeps[1].ring_sizes`).
  std::string path_here() const {
    std::string path;
    for (const Open& o : open_) {
      if (!o.map)
        path += "[" + std::to_string(o.index) + "]";
      else if (!o.at_key)
        path += (path.empty() ? "" : ".") + o.key;
      else
        break;  // the node is a key: its map's path names it
    }
    return path;
  }
  // The 1-based line of text_[pos].
  int line_of(std::size_t pos) const {
    return 1 + static_cast<int>(std::count(text_.begin(),
                                           text_.begin() + static_cast<std::ptrdiff_t>(pos), '\n'));
  }
  // The name after '*' at an alias's mark (yaml-cpp hands out only a number).
  std::string alias_name(const YAML::Mark& mark) const {
    if (mark.pos < 0 || static_cast<std::size_t>(mark.pos) >= text_.size()) return "";
    std::size_t at = static_cast<std::size_t>(mark.pos);
    if (text_[at] == '*') ++at;
    const std::size_t end = text_.find_first_of(" \t\r\n,[]{}", at);
    return text_.substr(at, end == std::string::npos ? std::string::npos : end - at);
  }
  void check_not_recursive(const YAML::Mark& mark, YAML::anchor_t anchor) const {
    for (const Open& o : open_) {
      if (o.anchor != anchor) continue;
      const std::string name = alias_name(mark);
      // A block collection's mark is its first entry, a line below its `&name`: the text says.
      const std::size_t amp = mark.pos > 0
                                  ? text_.rfind("&" + name, static_cast<std::size_t>(mark.pos))
                                  : std::string::npos;
      const int line = amp == std::string::npos ? o.line : line_of(amp);
      throw ConfigError(Location{file_, mark.line + 1, mark.column + 1}, path_here(),
                        "the alias '*" + name + "' stands for the " + (o.map ? "map" : "list") +
                            " anchored '&" + name + "' at line " + std::to_string(line) +
                            ", which contains this alias: the value would contain itself without "
                            "end; an alias may only repeat a value that is complete before it");
    }
  }
  // yaml-cpp does not implement merge keys: `<<: *a` would be an ordinary key named '<<' and the
  // map would miss every key it meant to merge ("missing required key 'type'").
  [[noreturn]] void refuse_merge_key(const YAML::Mark& mark) const {
    throw ConfigError(Location{file_, mark.line + 1, mark.column + 1}, path_here(),
                      "YAML merge keys are not supported; write the keys out");
  }
  // A quoted "\0" (or "\x00") puts a NUL byte in a string, and every C string it reaches (a
  // path, an MPI_Info hint) ends there without a word. Refused at the key, for keys and values.
  void check_no_nul(const YAML::Mark& mark, const std::string& value) const {
    if (value.find('\0') == std::string::npos) return;
    const bool is_key = !open_.empty() && open_.back().map && open_.back().at_key;
    std::string shown;
    for (const char c : value) shown += c == '\0' ? std::string("\\0") : std::string(1, c);
    throw ConfigError(Location{file_, mark.line + 1, mark.column + 1}, path_here(),
                      std::string(is_key ? "a key" : "the value") + " '" + shown +
                          "' contains a NUL byte (\\0), which would cut it short where it is "
                          "used; remove it");
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
    const int line = line_of(at);
    const std::string quote(1, text_[at]);
    throw ConfigError(Location{file_, line, static_cast<int>(at - line_start) + 1}, "",
                      "unterminated quoted string: the " + quote +
                          " opened here is never "
                          "closed, so everything after it up to the end of the file would be one "
                          "value; add the closing " +
                          quote);
  }

  const std::string& text_;
  std::string file_;
  std::uint64_t limit_;
  std::uint64_t count_ = 0;
  std::vector<Open> open_;
  std::unordered_map<YAML::anchor_t, std::uint64_t> size_of_;
};

// yaml-cpp's error for a key past YAML's limit names the map it is in ("end of map flow not
// found") or its ':' ("illegal map value"), never the key: when the text has such a key at or
// before the error's line, the error is that key, at its start, in the map `path`.
void explain_overlong_key(const std::string& text, const std::string& file, int error_line,
                          const std::string& path) {
  const auto key = find_overlong_key(text);
  if (!key || key->line > error_line) return;
  throw ConfigError(Location{file, key->line, key->column}, path,
                    "unknown key longer than " + std::to_string(kMaxImplicitKeyChars) +
                        " characters (" + std::to_string(key->length) + ", starting '" +
                        key->start + "...'): YAML reads a key of at most " +
                        std::to_string(kMaxImplicitKeyChars) +
                        " characters, and no ringbench key is near that long; shorten it, or "
                        "look for a missing ':' or ','");
}

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
  } catch (const YAML::ParserException& e) {
    explain_overlong_key(text, file, e.mark.line + 1, counter.path());
    // Other syntax errors: the parser that builds the tree reports them with its own wording.
  } catch (const YAML::Exception&) {
  }
}

}  // namespace rb::cfg
