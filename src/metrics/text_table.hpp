#pragma once
// Aligned text tables for the terminal: the one place that formats them (every sweep's results
// table, the dry-run plan). A table wider than the terminal is split into parts, one under the
// other, each starting with the columns that say which row it is; width 0 (--wide) keeps every
// column on one line.
#include <cstddef>
#include <string>
#include <vector>

namespace rb::h5 {

// The columns a terminal line may take (tables, their notes, the run's header and summary).
constexpr std::size_t kTerminalWidth = 100;

class TextTable {
 public:
  struct Column {
    Column(std::string h, std::string u = "", bool l = false)
        : header(std::move(h)), units(std::move(u)), left(l) {}
    std::string header;
    std::string units;  // second header line, e.g. "(GB/s)"; empty: none
    bool left = false;  // text columns align left, numbers right
  };
  explicit TextTable(std::vector<Column> columns) : columns_(std::move(columns)) {}
  // A label centred over columns [first, first + count) above the headers ("out-of-place").
  // A split keeps a span's columns in one part.
  void span(std::size_t first, std::size_t count, std::string label);
  // The columns that say which row it is (default: the first): every part of a split table
  // starts with them.
  void repeat(std::vector<std::size_t> columns) { repeated_ = std::move(columns); }
  // Columns a table too wide for the terminal leaves out before it splits (what the others
  // imply, such as a collective's element count); a note names them and --wide shows them.
  void droppable(std::vector<std::size_t> columns) { droppable_ = std::move(columns); }
  void row(std::vector<std::string> cells);  // fewer cells than columns: the rest empty
  std::size_t rows() const { return rows_.size(); }
  // "title", the header lines, the rows, then the notes (wrapped at `width`, or at
  // kTerminalWidth when width is 0); every line but the title indented by two spaces; ends with
  // a newline. Lines longer than `width` are split into parts (a blank line between them) and
  // a long title wrapped; width 0: one part, however wide.
  std::string render(const std::string& title, const std::vector<std::string>& notes = {},
                     std::size_t width = kTerminalWidth) const;

 private:
  struct Span {
    std::size_t first, count;
    std::string label;
  };
  std::vector<std::size_t> column_widths() const;
  // The columns of each part, in table order, from `shown`: one part when they fit.
  std::vector<std::vector<std::size_t>> parts(const std::vector<std::size_t>& shown,
                                              const std::vector<std::size_t>& w,
                                              std::size_t width) const;
  std::string render_part(const std::vector<std::size_t>& cols,
                          const std::vector<std::size_t>& w) const;
  std::string span_line(const std::vector<std::size_t>& cols,
                        const std::vector<std::size_t>& w) const;

  std::vector<Column> columns_;
  std::vector<Span> spans_;
  std::vector<std::size_t> repeated_{0};
  std::vector<std::size_t> droppable_;
  std::vector<std::vector<std::string>> rows_;
};

// `text` in lines of at most `width` characters, words kept whole (a longer word has a line of
// its own): the first line starts with `first`, the others with `indent`; ends with a newline.
std::string wrapped(const std::string& text, std::size_t width, const std::string& first,
                    const std::string& indent);
// Fixed-point with `decimals` digits; "-" for NaN (a missing value, never 0).
std::string fixed(double value, int decimals);
// Three significant digits at least ("0.00123", "12.3", "4567", "7.75e-07" below 0.001);
// "-" for NaN.
std::string sig3(double value);

}  // namespace rb::h5
