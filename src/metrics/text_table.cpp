#include "metrics/text_table.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace rb::h5 {

std::string fixed(double value, int decimals) {
  if (std::isnan(value)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

std::string sig3(double value) {
  if (std::isnan(value)) return "-";
  const double a = std::fabs(value);
  if (a > 0 && a < 1e-3) {  // errors and tiny rates: 7.75e-07, not 0.000000775
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2e", value);
    return buf;
  }
  const int decimals = a >= 100 || a == 0 ? 0
                       : a >= 10          ? 1
                       : a >= 1           ? 2
                                : std::min(9, 2 - static_cast<int>(std::floor(std::log10(a))));
  return fixed(value, decimals);
}

std::string wrapped(const std::string& text, std::size_t width, const std::string& first,
                    const std::string& indent) {
  std::string out, line = first;
  bool empty = true;  // no word on `line` yet
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    start = end + 1;
    if (word.empty()) continue;
    if (!empty && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line = indent;
      empty = true;
    }
    line += (empty ? "" : " ") + word;
    empty = false;
  }
  return out + line + "\n";
}

void TextTable::span(std::size_t first, std::size_t count, std::string label) {
  spans_.push_back({first, count, std::move(label)});
}

void TextTable::row(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

namespace {

std::string pad(const std::string& s, std::size_t width, bool left) {
  if (s.size() >= width) return s;
  const std::string fill(width - s.size(), ' ');
  return left ? s + fill : fill + s;
}

std::string centred(const std::string& s, std::size_t width, char fill) {
  if (s.size() + 2 >= width) return pad(s, width, false);
  const std::size_t before = (width - s.size() - 2) / 2;
  return std::string(before, fill) + " " + s + " " +
         std::string(width - s.size() - 2 - before, fill);
}

std::string without_trailing_spaces(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// The characters a line of these columns takes: one space, then two before each column.
std::size_t line_width(const std::vector<std::size_t>& cols, const std::vector<std::size_t>& w) {
  std::size_t n = 1;
  for (std::size_t c : cols) n += 2 + w[c];
  return n;
}

}  // namespace

std::vector<std::size_t> TextTable::column_widths() const {
  std::vector<std::size_t> w(columns_.size());
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    w[c] = std::max(columns_[c].header.size(), columns_[c].units.size());
    for (const auto& r : rows_) w[c] = std::max(w[c], r[c].size());
  }
  // A span wider than its columns widens its last column.
  for (const Span& s : spans_) {
    std::size_t have = 2 * (s.count - 1);
    for (std::size_t c = s.first; c < s.first + s.count; ++c) have += w[c];
    if (have < s.label.size() + 6) w[s.first + s.count - 1] += s.label.size() + 6 - have;
  }
  return w;
}

std::vector<std::vector<std::size_t>> TextTable::parts(const std::vector<std::size_t>& all,
                                                       const std::vector<std::size_t>& w,
                                                       std::size_t width) const {
  if (width == 0 || line_width(all, w) <= width) return {all};
  const auto repeated = [&](std::size_t c) {
    return std::find(repeated_.begin(), repeated_.end(), c) != repeated_.end();
  };
  std::vector<std::size_t> keys;
  for (std::size_t c : all)
    if (repeated(c)) keys.push_back(c);
  // The other columns in units that stay together: a span's columns, or one column.
  std::vector<std::vector<std::size_t>> units;
  for (std::size_t i = 0; i < all.size();) {
    std::size_t end = all[i] + 1;
    for (const Span& s : spans_)
      if (s.first == all[i]) end = std::max(end, s.first + s.count);
    std::vector<std::size_t> unit;
    for (; i < all.size() && all[i] < end; ++i)
      if (!repeated(all[i])) unit.push_back(all[i]);
    if (!unit.empty()) units.push_back(std::move(unit));
  }
  // Greedy: each part takes units while its line fits; a unit too wide alone gets a part anyway.
  std::vector<std::vector<std::size_t>> out;
  std::vector<std::size_t> part;
  for (const auto& unit : units) {
    std::vector<std::size_t> grown = part;
    grown.insert(grown.end(), unit.begin(), unit.end());
    std::vector<std::size_t> line = keys;
    line.insert(line.end(), grown.begin(), grown.end());
    if (!part.empty() && line_width(line, w) > width) {
      out.push_back(part);
      grown = unit;
    }
    part = std::move(grown);
  }
  if (!part.empty() || out.empty()) out.push_back(part);
  for (auto& p : out) {
    p.insert(p.end(), keys.begin(), keys.end());
    std::sort(p.begin(), p.end());
  }
  return out;
}

// The span labels over the part's columns; a span not wholly in the part has none.
std::string TextTable::span_line(const std::vector<std::size_t>& cols,
                                 const std::vector<std::size_t>& w) const {
  std::string s = " ";
  bool any = false;
  for (std::size_t i = 0; i < cols.size();) {
    const Span* whole = nullptr;
    for (const Span& sp : spans_)
      if (sp.first == cols[i] && i + sp.count <= cols.size() &&
          cols[i + sp.count - 1] == sp.first + sp.count - 1)
        whole = &sp;
    if (whole == nullptr) {
      s += "  " + std::string(w[cols[i++]], ' ');
      continue;
    }
    std::size_t width = 0;
    for (std::size_t k = 0; k < whole->count; ++k) width += w[cols[i++]] + 2;
    s += "  " + centred(whole->label, width - 2, '-');
    any = true;
  }
  return any ? without_trailing_spaces(s) + "\n" : "";
}

std::string TextTable::render_part(const std::vector<std::size_t>& cols,
                                   const std::vector<std::size_t>& w) const {
  auto line = [&](auto cell) {
    std::string out = " ";
    for (std::size_t c : cols) out += "  " + pad(cell(c), w[c], columns_[c].left);
    return without_trailing_spaces(out) + "\n";
  };
  std::string out = span_line(cols, w);
  out += line([&](std::size_t c) { return columns_[c].header; });
  bool units = false;
  for (std::size_t c : cols) units = units || !columns_[c].units.empty();
  if (units) out += line([&](std::size_t c) { return columns_[c].units; });
  for (const auto& r : rows_) out += line([&](std::size_t c) { return r[c]; });
  return out;
}

std::string TextTable::render(const std::string& title, const std::vector<std::string>& notes,
                              std::size_t width) const {
  std::string out;
  if (width == 0 || title.size() <= width) {
    out = title + "\n";
  } else {  // a title that starts indented keeps its indent, and its next lines two more
    const std::string indent = title.substr(0, title.find_first_not_of(' '));
    out = wrapped(title, width, indent, indent + "  ");
  }
  const std::vector<std::size_t> w = column_widths();
  std::vector<std::size_t> shown, dropped;
  for (std::size_t c = 0; c < columns_.size(); ++c) shown.push_back(c);
  if (width > 0 && line_width(shown, w) > width) {
    shown.clear();
    for (std::size_t c = 0; c < columns_.size(); ++c)
      (std::count(droppable_.begin(), droppable_.end(), c) ? dropped : shown).push_back(c);
  }
  const auto all = parts(shown, w, width);
  for (std::size_t p = 0; p < all.size(); ++p) out += (p ? "\n" : "") + render_part(all[p], w);
  const std::size_t note_width = width == 0 ? kTerminalWidth : width;
  for (const auto& n : notes) out += wrapped(n, note_width, "  ", "  ");
  if (!dropped.empty()) {
    std::string names;
    for (std::size_t c : dropped) names += (names.empty() ? "" : ", ") + columns_[c].header;
    out += wrapped("not shown at this width: " + names + " (--wide shows every column)", note_width,
                   "  ", "  ");
  }
  return out;
}

}  // namespace rb::h5
