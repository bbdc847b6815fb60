// The terminal tables (h5::TextTable) and the headline statistics of a points table.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include <mpi.h>

#include "metrics/table.hpp"

// A span wider than its columns widens the last of them.
TEST_CASE("text table: columns aligned, text left, numbers right, spans centred") {
  rb::h5::TextTable t({{"name", "", true}, {"time", "(us)"}, {"busbw", "(GB/s)"}});
  t.span(1, 2, "out-of-place");
  t.row({"all_reduce", "1.5", "12.25"});
  t.row({"x", "100"});
  const std::string s = t.render("== title ==", {"note"});
  CHECK(s ==
        "== title ==\n"
        "               -- out-of-place --\n"
        "   name        time         busbw\n"
        "               (us)        (GB/s)\n"
        "   all_reduce   1.5         12.25\n"
        "   x            100\n"
        "  note\n");
}

TEST_CASE("text table: long notes wrap at 100 columns, words whole") {
  rb::h5::TextTable t({{"x"}});
  std::string note;
  for (int i = 0; i < 40; ++i) note += "word" + std::to_string(i) + " ";
  note.pop_back();
  const std::string s = t.render("t", {note});
  std::size_t lines = 0, start = 0;
  for (std::size_t nl = s.find('\n'); nl != std::string::npos; nl = s.find('\n', start = nl + 1)) {
    CHECK(nl - start <= 100);
    ++lines;
  }
  CHECK(lines == 2 + 3);  // title, header, and the note (269 characters) in 3 lines
  CHECK(s.find(" word39\n") != std::string::npos);
}

namespace {

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t nl = s.find('\n'); nl != std::string::npos; nl = s.find('\n', start = nl + 1))
    out.push_back(s.substr(start, nl - start));
  return out;
}

// Ten 9-character metric columns after two key columns: 1 + 8 + 6 + 10 x 11 = 125 columns.
rb::h5::TextTable wide_table() {
  std::vector<rb::h5::TextTable::Column> cols = {{"op", "", true}, {"size", "(B)"}};
  for (int i = 0; i < 10; ++i) cols.push_back({"metric" + std::to_string(i), "(GB/s)"});
  rb::h5::TextTable t(cols);
  t.span(6, 4, "in-place");
  t.repeat({0, 1});
  std::vector<std::string> row = {"reduce", "1024"};
  for (int i = 0; i < 10; ++i) row.push_back("value" + std::to_string(i) + "xyz");
  t.row(row);
  return t;
}

}  // namespace

TEST_CASE("text table: wider than the terminal, split into parts that start with the key columns") {
  const std::string s = wide_table().render("== wide ==", {"note"}, 60);
  const auto lines = lines_of(s);
  std::size_t parts = 0;
  for (const auto& l : lines) {
    CHECK(l.size() <= 60);
    if (l.find(" op ") != std::string::npos) ++parts;  // a header line per part
  }
  // 1 + 8 + 6 (keys) + 4 x 11 = 59 per part; the span's four columns stay in one part.
  CHECK(parts == 3);
  CHECK(s.find("   op      size    metric0") != std::string::npos);
  CHECK(s.find("   op      size    metric4") != std::string::npos);
  CHECK(s.find("   op      size    metric8    metric9") != std::string::npos);
  CHECK(s.find("---- in-place") != std::string::npos);
  for (int i = 0; i < 10; ++i)
    CHECK(s.find("value" + std::to_string(i) + "xyz") != std::string::npos);
  std::size_t rows = 0;
  for (const auto& l : lines) rows += l.rfind("   reduce  1024", 0) == 0;
  CHECK(rows == 3);  // the row's keys begin every part
  CHECK(lines.back() == "  note");
}

TEST_CASE("text table: droppable columns go first when too wide, and a note names them") {
  rb::h5::TextTable t = wide_table();
  t.droppable({2, 3, 4, 5, 10, 11});  // left: 1 + 8 + 6 + 4 x 11 = 59
  const std::string s = t.render("== wide ==", {"note"}, 60);
  const auto lines = lines_of(s);
  REQUIRE(lines.size() == 1 + 4 + 3);  // title, one part (span, header, units, row), 3 note lines
  CHECK(lines[2] == "   op      size    metric4    metric5    metric6    metric7");
  CHECK(lines[6] == "  not shown at this width: metric0, metric1, metric2,");
  CHECK(lines[7] == "  metric3, metric8, metric9 (--wide shows every column)");
  CHECK(t.render("== wide ==", {}, 0).find("metric0") != std::string::npos);
}

TEST_CASE("text table: width 0 keeps every column on one line; a long title wraps") {
  const std::string wide = wide_table().render("== wide ==", {}, 0);
  CHECK(lines_of(wide).size() == 5);  // title, span, header, units, the row
  CHECK(lines_of(wide)[4].size() == 125);
  const std::string title(30, 'x');
  const std::string s =
      rb::h5::TextTable({{"a"}}).render("  " + title + " " + title + " " + title, {}, 70);
  CHECK(s.rfind("  " + title + " " + title + "\n    " + title + "\n", 0) == 0);
}

TEST_CASE("wrapped: first line and later lines indented as asked, words whole") {
  CHECK(rb::h5::wrapped("libraries: a b c", 14, "", "  ") == "libraries: a b\n  c\n");
  CHECK(rb::h5::wrapped("averyveryverylongword x", 8, "> ", "  ") ==
        "> averyveryverylongword\n  x\n");
}

TEST_CASE("numbers: missing reads '-', three significant digits at least") {
  CHECK(rb::h5::fixed(NAN, 2) == "-");
  CHECK(rb::h5::fixed(1.005, 1) == "1.0");
  CHECK(rb::h5::sig3(0.001234) == "0.00123");
  CHECK(rb::h5::sig3(7.754e-7) == "7.75e-07");
  CHECK(rb::h5::sig3(12.345) == "12.3");
  CHECK(rb::h5::sig3(4567.8) == "4568");
  CHECK(rb::h5::sig3(0) == "0");
}

TEST_CASE("records: inner then rank statistics, -1 and NaN missing, on rank 0 only") {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  rb::h5::PointsTable t(2);
  t.key("label", std::vector<std::string>{"a", "b"}, {"1", "label"});
  t.metric("time_s", {"s", "per iteration"}, {3});
  t.int_metric("wrong", {"1", "count"});
  // Rank r's iterations at point p: r + p + {1, 2, 10}: median r + p + 2.
  for (std::size_t p = 0; p < 2; ++p) {
    const double base = rank + static_cast<double>(p);
    t.set("time_s", p, std::vector<double>{base + 1, base + 10, base + 2});
  }
  t.set_int("wrong", 0, 1);  // point 1 stays -1: not checked
  using rb::h5::OverInner, rb::h5::OverRanks;
  const auto r = t.records({{"time_s", OverInner::Median, OverRanks::Max},
                            {"time_s", OverInner::Sum, OverRanks::Min},
                            {"wrong", OverInner::None, OverRanks::Sum}},
                           MPI_COMM_WORLD);
  if (rank != 0) {
    CHECK(r.empty());
    return;
  }
  REQUIRE(r.size() == 2);
  CHECK(r[1].text("label") == "b");
  CHECK(r[1].metrics[0].number == doctest::Approx(size - 1 + 1 + 2));
  CHECK(r[1].metrics[1].number == doctest::Approx(3 * 1 + 13));
  CHECK(r[0].metrics[2].number == doctest::Approx(size));
  CHECK(std::isnan(r[1].metrics[2].number));
  CHECK(r[0].metrics[0].statistic == "median over iterations, max over ranks");
}

TEST_CASE("records: the slowest rank's CV over iterations") {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  rb::h5::PointsTable t(1);
  t.metric("time_s", {"s", "per iteration"}, {3});
  // The highest rank is the slowest (largest median) and the steadiest (smallest CV).
  const double b = 10.0 * rank;
  t.set("time_s", 0, std::vector<double>{b + 1, b + 10, b + 2});
  using rb::h5::OverInner, rb::h5::OverRanks;
  const auto r = t.records(
      {{"time_s", OverInner::Cv, OverRanks::Slowest}, {"time_s", OverInner::Cv, OverRanks::Max}},
      MPI_COMM_WORLD);
  if (rank != 0) return;
  const auto cv = [](double base) {
    const double m = base + 13.0 / 3;
    const double ss = (base + 1 - m) * (base + 1 - m) + (base + 10 - m) * (base + 10 - m) +
                      (base + 2 - m) * (base + 2 - m);
    return std::sqrt(ss / 2) / m;
  };
  CHECK(r[0].metrics[0].number == doctest::Approx(cv(10.0 * (size - 1))));
  CHECK(r[0].metrics[1].number == doctest::Approx(cv(0)));  // rank 0's is the largest CV
  CHECK(r[0].metrics[0].statistic == "cv over iterations, the slowest rank's (largest median)");
}
