// Each sweep's key table against docs/sweeps/<type>.md: the doc's key tables (markdown tables
// whose first column is `key`) list every key of the table, nested ones as parent.child, with the
// table's default where the doc has a default column, and no key the table lacks. `type` and
// `name`, common to every sweep, are documented in docs/config.md. Also: every literal default of
// every table passes its own key's constraint, on both backends.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "app/registry.hpp"
#include "config/key_spec.hpp"

namespace {

using rb::cfg::KeySpec;
using rb::cfg::KeyType;

std::vector<std::string> cells_of(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  for (std::size_t i = 1; i < line.size(); ++i) {
    if (line[i] == '|' && line[i - 1] != '\\') {
      cells.push_back(cell);
      cell.clear();
    } else {
      cell += line[i];
    }
  }
  return cells;
}

// A cell as text: no backticks or bold, white space folded.
std::string plain(const std::string& cell) {
  std::string out;
  for (std::size_t i = 0; i < cell.size(); ++i) {
    if (cell[i] == '`' || (cell[i] == '*' && i + 1 < cell.size() && cell[i + 1] == '*')) {
      if (cell[i] == '*') ++i;
      continue;
    }
    if (cell[i] == ' ' && (out.empty() || out.back() == ' ')) continue;
    out += cell[i];
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

struct DocKey {
  std::string default_text;  // "" where the table has no default column
  bool has_default = false;
  int line = 0;
};

// Every row of the doc's key tables: the key (first backticked word of the first cell).
std::map<std::string, DocKey> doc_keys(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), path << " is missing: every sweep type has its doc");
  std::map<std::string, DocKey> keys;
  std::string line;
  int number = 0, default_column = -1;
  bool in_key_table = false;
  while (std::getline(in, line)) {
    ++number;
    if (line.rfind("|", 0) != 0) {
      in_key_table = false;
      continue;
    }
    const std::vector<std::string> cells = cells_of(line);
    if (!in_key_table && !cells.empty() && plain(cells[0]) == "key") {
      in_key_table = true;
      default_column = -1;
      for (std::size_t c = 0; c < cells.size(); ++c)
        if (plain(cells[c]) == "default") default_column = static_cast<int>(c);
      continue;
    }
    if (!in_key_table || line.rfind("|---", 0) == 0) continue;
    const auto open = cells[0].find('`'), close = cells[0].find('`', open + 1);
    REQUIRE_MESSAGE(close != std::string::npos,
                    path << ":" << number << ": a key row names no `key`");
    DocKey k;
    k.line = number;
    k.has_default = default_column >= 0;
    if (k.has_default) k.default_text = plain(cells.at(static_cast<std::size_t>(default_column)));
    keys[cells[0].substr(open + 1, close - open - 1)] = k;
  }
  return keys;
}

void check_defaults(const std::vector<KeySpec>& keys, const std::string& where) {
  for (const KeySpec& k : keys) {
    if (k.type == KeyType::Map) check_defaults(k.keys, where + k.name + ".");
    if (k.fallback.empty()) continue;
    const rb::cfg::Node empty(YAML::Load("{}"), "test", "");
    for (rb::Backend b : {rb::Backend::Host, rb::Backend::Cuda}) {
      INFO(where << k.name << " on " << rb::to_string(b) << ": default " << k.default_text());
      CHECK_NOTHROW(rb::cfg::KeyReader(empty, keys, b).check(k.name));
    }
  }
}

}  // namespace

TEST_CASE("docs/sweeps/<type>.md lists exactly the keys of the type's table, with its defaults") {
  for (const rb::SweepKind& kind : rb::sweep_kinds()) {
    const std::string type = kind.type;
    const std::string path = std::string(RINGBENCH_SOURCE_DIR) + "/docs/sweeps/" + type + ".md";
    const std::map<std::string, DocKey> documented = doc_keys(path);
    std::map<std::string, const KeySpec*> spec;
    const std::vector<KeySpec> keys = rb::cfg::flattened(kind.keys());
    for (const KeySpec& k : keys) spec[k.name] = &k;
    for (const KeySpec& k : keys) {
      if (k.name == "type" || k.name == "name") continue;  // docs/config.md
      const auto it = documented.find(k.name);
      CHECK_MESSAGE(it != documented.end(), path << ": key `" << k.name << "` of the " << type
                                                 << " key table is in no key table of the doc");
      if (it != documented.end() && it->second.has_default)
        CHECK_MESSAGE(it->second.default_text == k.default_text(),
                      path << ":" << it->second.line << ": `" << k.name << "` default '"
                           << it->second.default_text << "', the key table says '"
                           << k.default_text() << "'");
    }
    for (const auto& [name, doc] : documented)
      CHECK_MESSAGE(spec.count(name) == 1, path << ":" << doc.line << ": `" << name
                                                << "` is no key of the " << type << " key table");
  }
}

TEST_CASE("every literal default of every sweep's key table passes the key's own checks") {
  for (const rb::SweepKind& kind : rb::sweep_kinds())
    check_defaults(kind.keys(), std::string(kind.type) + ".");
}
