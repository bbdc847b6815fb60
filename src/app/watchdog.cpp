#include "app/watchdog.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "app/end_record.hpp"
#include "app/estimate.hpp"
#include "app/heartbeat.hpp"
#include "app/interrupts.hpp"
#include "runtime/gpu.hpp"

namespace rb {

Watchdog::Watchdog(int rank, WatchdogLimits limits, double poll_s)
    : rank_(rank),
      limits_(std::move(limits)),
      poll_(poll_s),
      run_start_(Clock::now()),
      idle_start_(run_start_) {
  thread_ = std::thread([this] { loop(); });
}

namespace {

constexpr double kBeatS = 1.0;     // one heartbeat a second
constexpr double kSilenceS = 3.5;  // a rank whose counter does not move in this long is silent
constexpr std::size_t kMaxNamed = 16;
// The least time between points (setup, the output's claim, a flush) under a point limit: a slow
// file system's flush or NCCL's set-up over many nodes takes seconds to a minute.
constexpr double kBetweenPointsMinS = 60;

}  // namespace

Watchdog::~Watchdog() {
  stop_heartbeat();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::string Watchdog::start_heartbeat(std::unique_ptr<NodeHeartbeat> beats) {
  const std::string error = beats->error();
  beats_ = std::move(beats);
  beat_thread_ = std::thread([this] { beat_loop(); });
  return error;
}

void Watchdog::stop_heartbeat() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    beat_stop_ = true;
  }
  wake_.notify_all();
  if (beat_thread_.joinable()) beat_thread_.join();
}

void Watchdog::release_heartbeat() {
  stop_heartbeat();
  if (beats_ != nullptr) beats_->release();
}

std::string Watchdog::slot_text(unsigned long long beat, const std::string& sweep,
                                std::size_t index, bool in_point, bool fired) {
  // "COUNT FIRED IN_POINT INDEX SWEEP": 12 + 1 + 1 + 1 + 1 + 1 + 8 + 1 + 37 + newline = 64 B.
  std::string s = fmt::format("{:>12} {} {} {:>8} {:<37.37}", beat % 1000000000000ULL,
                              fired ? 'F' : '-', in_point ? 'P' : '-', in_point ? index : 0,
                              in_point && !sweep.empty() ? sweep : std::string("-"));
  s.resize(kSlotBytes - 1, ' ');
  s.push_back('\n');
  return s;
}

Watchdog::Beat Watchdog::parse_slot(const std::string& slot) {
  Beat b;
  std::istringstream in(slot);
  char fired = 0, in_point = 0;
  std::size_t index = 0;
  std::string sweep;
  if (!(in >> b.count >> fired >> in_point >> index >> sweep)) return b;
  b.seen = true;
  b.fired = fired == 'F';
  b.where = in_point == 'P' ? fmt::format("sweep {} point {}", sweep, index)
                            : std::string("between points");
  return b;
}

namespace {

// "rank R (last at WHERE), rank Q (...)" for the first kMaxNamed of `ranks`, then "and N more".
std::string rank_list(const std::vector<std::size_t>& ranks,
                      const std::vector<Watchdog::Beat>& after) {
  std::string text;
  for (std::size_t i = 0; i < ranks.size() && i < kMaxNamed; ++i) {
    const Watchdog::Beat& b = after[ranks[i]];
    text += fmt::format("{}rank {} ({})", text.empty() ? "" : ", ", ranks[i],
                        b.seen ? "last at " + b.where : "no heartbeat yet");
  }
  if (ranks.size() > kMaxNamed) text += fmt::format(" and {} more", ranks.size() - kMaxNamed);
  return text;
}

}  // namespace

std::string Watchdog::silent_ranks_text(int self, const std::vector<Beat>& before,
                                        const std::vector<Beat>& after, double silence_s) {
  std::vector<std::size_t> silent, quiet, elsewhere;
  const std::string here = self >= 0 && static_cast<std::size_t>(self) < after.size()
                               ? after[static_cast<std::size_t>(self)].where
                               : "";
  for (std::size_t r = 0; r < after.size() && r < before.size(); ++r) {
    if (static_cast<int>(r) == self || after[r].fired) continue;
    const Beat& b = after[r];
    if (!b.seen || b.count == before[r].count)
      (b.node_quiet ? quiet : silent).push_back(r);
    else if (b.where != here)
      elsewhere.push_back(r);
  }
  const std::string head =
      fmt::format("ringbench: rank {}: the rank(s) the others wait for: ", self);
  std::string text;
  if (!silent.empty())
    text += fmt::format(
        "{}{} sent no heartbeat for {:g} s: the process is stopped (SIGSTOP, a "
        "debugger), frozen, or its node is gone\n",
        head, rank_list(silent, after), silence_s);
  if (!quiet.empty())
    text += fmt::format(
        "{}{} sent no heartbeat for {:g} s, nor did any other rank of its node "
        "through the shared heartbeat file: the node is gone or frozen, its "
        "ranks are stopped, or the shared file system lags\n",
        head, rank_list(quiet, after), silence_s);
  if (!text.empty() || elsewhere.empty()) return text;
  std::string where;
  for (std::size_t i = 0; i < elsewhere.size() && i < kMaxNamed; ++i)
    where += fmt::format("{}rank {} at {}", where.empty() ? "" : ", ", elsewhere[i],
                         after[elsewhere[i]].where);
  if (elsewhere.size() > kMaxNamed)
    where += fmt::format(" and {} more", elsewhere.size() - kMaxNamed);
  return fmt::format("ringbench: rank {}: ranks at another point than this one: {}\n", self, where);
}

// Puts this rank's slot into its node's memory once a second and, when this rank is its node's
// writer, the node's slots into the shared file. A write that blocks (a stuck file system)
// stops the beats, and the other ranks then name this one.
void Watchdog::beat_loop() {
  unsigned long long beat = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!beat_stop_ && !stop_) {
    const std::string slot = slot_text(++beat, sweep_, index_, in_point_, fired_);
    lock.unlock();
    beats_->put(slot);
    beats_->publish(Clock::now());
    lock.lock();
    wake_.wait_for(lock, std::chrono::duration<double>(kBeatS),
                   [this] { return beat_stop_ || stop_; });
  }
}

// Puts this rank's fired slot at once (its node's writer carries it to the file within a beat),
// then compares every rank's counter over kSilenceS. Runs on a thread of its own; fire() bounds
// its time.
std::string Watchdog::silent_ranks() const {
  std::string slot;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (beats_ == nullptr) return "";
    slot = slot_text(0, sweep_, index_, in_point_, true);
  }
  beats_->put(slot);
  const std::vector<std::string> before = beats_->read();
  std::this_thread::sleep_for(std::chrono::duration<double>(kSilenceS));
  const std::vector<std::string> after = beats_->read();
  const std::vector<bool> quiet = quiet_node_ranks(*beats_, before, after);
  std::vector<Beat> then, now;
  for (std::size_t r = 0; r < after.size(); ++r) {
    then.push_back(parse_slot(before[r]));
    now.push_back(parse_slot(after[r]));
    now.back().node_quiet = quiet[r];
  }
  return silent_ranks_text(rank_, then, now, kSilenceS);
}

void Watchdog::point_started(const std::string& sweep, std::size_t index,
                             const std::string& label) {
  std::lock_guard<std::mutex> lock(mutex_);
  in_point_ = true;
  sweep_ = sweep;
  index_ = index;
  label_ = label;
  point_start_ = Clock::now();
}

void Watchdog::set_point_limit(double seconds, std::string source) {
  std::lock_guard<std::mutex> lock(mutex_);
  limits_.point_s = seconds;
  limits_.point_source = std::move(source);
}

bool Watchdog::fired() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return fired_;
}

bool Watchdog::end_run() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!fired_) ended_ = true;
  return !fired_;
}

void Watchdog::idle() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (in_point_) idle_start_ = Clock::now();
  in_point_ = false;
}

namespace {

std::string where_text(const std::string& sweep, std::size_t index, const std::string& label) {
  return sweep.empty() ? std::string("between points")
                       : fmt::format("sweep {} point {} ({})", sweep, index, label);
}

std::string timeout_text(const std::string& where, double seconds, double limit,
                         const std::string& source) {
  return fmt::format("{} has run {:.1f} s > limit {:g} s ({})", where, seconds, limit, source);
}

std::string timeout_message(int rank, const std::string& timeout) {
  return fmt::format("ringbench: rank {}: TIMEOUT: {}; stopping with exit code {}\n", rank, timeout,
                     kTimeoutExitCode);
}

}  // namespace

std::string Watchdog::message(int rank, const std::string& sweep, std::size_t index,
                              const std::string& label, double seconds, double limit,
                              const std::string& source) {
  return timeout_message(rank,
                         timeout_text(where_text(sweep, index, label), seconds, limit, source));
}

std::string Watchdog::where_locked() const {
  return where_text(in_point_ ? sweep_ : "", index_, label_);
}

// Called with mutex_ held. Between points (the set-up before the first one, the output's claim,
// each sweep's flushes) the ranks meet in collectives too: a rank stopped there (SIGSTOP, a lost
// node) held the others for good when only points were timed (issue #31, D5). That time does no
// measured work, so a point limit covers it too, at least kBetweenPointsMinS, or under auto at
// least kAutoPointFloorS (before the first sweep sets one).
std::string Watchdog::check(Clock::time_point now) const {
  if (in_point_ && limits_.point_s > 0) {
    const double s = std::chrono::duration<double>(now - point_start_).count();
    if (s > limits_.point_s)
      return timeout_text(where_locked(), s, limits_.point_s, limits_.point_source);
  }
  if (!in_point_ && (limits_.point_s > 0 || limits_.point_auto)) {
    const double floor = limits_.point_auto ? kAutoPointFloorS : kBetweenPointsMinS;
    const double limit = std::max(limits_.point_s, floor);
    const double s = std::chrono::duration<double>(now - idle_start_).count();
    if (s > limit)
      return timeout_text(
          where_locked(), s, limit,
          fmt::format("{}, at least {:g} s between points", limits_.point_source, floor));
  }
  if (limits_.run_s > 0) {
    const double s = std::chrono::duration<double>(now - run_start_).count();
    // The message names the point the run was in, but the age is the run's.
    if (s > limits_.run_s)
      return timeout_text(where_locked(), s, limits_.run_s, "the run, " + limits_.run_source);
  }
  return "";
}

void Watchdog::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, poll_);
    if (stop_) return;
    if (ended_ || fired_) continue;  // fired_: a signal is ending the run
    // A signal's point did not end within its grace, or no boundary is coming (a sweep that
    // cannot stop between points began): the run ends now, as the signal would have.
    if (stop_signal_ != 0 &&
        ((!stop_at_points_ && !stop_agreed_) || Clock::now() >= stop_deadline_)) {
      fired_ = true;
      const int signo = stop_signal_;
      const std::string where = stop_where_;
      const bool recorded = stop_recorded_;
      lock.unlock();
      end_interrupted(signo, where, recorded);
    }
    const std::string timeout = check(Clock::now());
    if (!timeout.empty()) {
      fired_ = true;  // decided here, under the lock end_run() takes
      lock.unlock();
      fire(timeout);
    }
  }
}

void Watchdog::set_end_record(std::string path) {
  std::lock_guard<std::mutex> lock(mutex_);
  end_record_ = std::move(path);
}

// On a thread of its own, like the other file work at the end: a file system that hangs must
// not keep the process from ending.
bool Watchdog::record_end(const std::string& status, const std::string& failure) const {
  std::string path;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    path = end_record_;
  }
  if (path.empty()) return false;
  auto text = std::make_shared<const std::string>(end_record_text(status, failure, rank_));
  auto result = std::make_shared<std::atomic<int>>(-1);
  std::thread([path, text, result] {
    result->store(write_end_record(path, *text) ? 1 : 0);
  }).detach();
  for (int i = 0; i < 20 && result->load() < 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return result->load() == 1;
}

void Watchdog::set_unfinished_output(std::string path) {
  std::lock_guard<std::mutex> lock(mutex_);
  unfinished_output_ = std::move(path);
}

double interrupt_grace_s(int signo) {
  return signo == SIGUSR1 ? std::numeric_limits<double>::infinity() : 20.0;
}

void Watchdog::stop_at_points(bool on) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_at_points_ = on;
  }
  wake_.notify_all();  // a signal waiting for a boundary that no longer comes ends the run now
}

void Watchdog::stop_agreed() {
  std::lock_guard<std::mutex> lock(mutex_);
  stop_agreed_ = true;
}

int Watchdog::stop_signal() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stop_signal_;
}

void Watchdog::interrupt(int signo) {
  std::string where;
  bool waits = false, first = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (fired_ || ended_) return;  // the run's end is decided already: that one stands
    where = (in_point_ ? "during " : "") + where_locked();
    waits = stop_at_points_;
    if (!waits) fired_ = true;
    // The first signal is the one the run ends for; a later one (Slurm's SIGTERM after its
    // SIGUSR1 warning, mpirun passing on one the rank got already) may only shorten the grace.
    first = waits && stop_signal_ == 0;
    if (first) {
      stop_signal_ = signo;
      stop_where_ = where;
    }
    const double grace = interrupt_grace_s(signo);
    if (waits && std::isfinite(grace))
      stop_deadline_ =
          std::min(stop_deadline_, Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                      std::chrono::duration<double>(grace)));
  }
  if (!waits) end_interrupted(signo, where, false);
  if (first) note_stop(signo, where);
  wake_.notify_all();
}

// The signal's record at once (a launcher's SIGKILL may come before the point ends) and, from the
// rank that wrote it, what happens next.
void Watchdog::note_stop(int signo, const std::string& where) {
  const bool recorded = record_end("interrupted", signal_name(signo) + " " + where);
  std::string record;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_recorded_ = recorded;
    record = end_record_;
  }
  if (!recorded) return;
  const double grace = interrupt_grace_s(signo);
  std::fputs(fmt::format("ringbench: rank {}: {} {}: the run stops before the next point ({}), "
                         "keeping the sweep's finished points; until then {} holds the end state\n",
                         rank_, signal_name(signo), where,
                         std::isfinite(grace) ? fmt::format("within {:g} s", grace)
                                              : std::string("within the hang guard's limits"),
                         record)
                 .c_str(),
             stderr);
  std::fflush(stderr);
}

void Watchdog::end_interrupted(int signo, const std::string& where, bool recorded) {
  std::string record, unfinished;
  bool waited = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    record = end_record_;
    unfinished = unfinished_output_;
    waited = stop_signal_ != 0;
  }
  const int code = interrupted_exit_code(signo);
  const std::string name = signal_name(signo);
  if (!recorded) recorded = record_end("interrupted", name + " " + where);
  const bool removed = !unfinished.empty() && ::unlink(unfinished.c_str()) == 0;
  if (removed)
    std::fputs(fmt::format("ringbench: removed the unfinished output '{}'\n", unfinished).c_str(),
               stderr);
  if (recorded || (rank_ == 0 && record.empty())) {
    std::fputs(
        fmt::format(
            "ringbench: rank {}: interrupted by {} {}{}; stopping with exit code {}{}\n", rank_,
            name, where,
            waited ? "; no point boundary came in time to keep the sweep's finished points" : "",
            code,
            !recorded ? ""
            : removed ? "; the end state is in " + record +
                            " (an output file that --force was to replace is left as it was)"
                      : "; the end state is in " + record +
                            " (the output's /run status stays 'running'; the sweeps finished "
                            "before are complete in it)")
            .c_str(),
        stderr);
  }
  end_process(code);
}

// Says why, records the end, names the silent ranks, aborts the NCCL communicators and ends the
// process.
void Watchdog::fire(const std::string& timeout) {
  std::fputs(timeout_message(rank_, timeout).c_str(), stderr);
  std::fflush(stderr);
  record_end("timeout", timeout);  // first: a launcher's SIGKILL may follow the first exit
  auto names = std::make_shared<std::string>();
  auto named = std::make_shared<std::atomic<bool>>(false);
  std::thread([this, names, named] {
    *names = silent_ranks();
    named->store(true);
  }).detach();
  for (int i = 0; i < static_cast<int>((kSilenceS + 3) * 10) && !named->load(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (named->load() && !names->empty()) {
    std::fputs(names->c_str(), stderr);
    std::fflush(stderr);
  }
  end_process(kTimeoutExitCode);
}

// The abort runs on a thread of its own with a grace period: if it blocks too, the process
// still ends.
void Watchdog::end_process(int code) {
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread([done] {
    abort_live_nccl_comms();
    done->store(true);
  }).detach();
  for (int i = 0; i < 100 && !done->load(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::fflush(stdout);
  std::fflush(stderr);
  // _Exit: no destructors or atexit handlers, which could block on the hung main thread
  // (MPI_Finalize, HDF5 close would wait for the other ranks).
  std::_Exit(code);
}

bool is_test_hang_point(const std::string& sweep, std::size_t index) {
  return is_test_point("RINGBENCH_TEST_HANG_POINT", sweep, index);
}

bool is_test_signal_point(const std::string& sweep, std::size_t index) {
  return is_test_point("RINGBENCH_TEST_SIGNAL_POINT", sweep, index);
}

bool is_test_point(const char* variable, const std::string& sweep, std::size_t index) {
  const char* env = std::getenv(variable);
  if (env == nullptr) return false;
  const std::string v = env;
  const auto colon = v.rfind(':');
  if (colon == std::string::npos || v.substr(0, colon) != sweep) return false;
  const std::string number = v.substr(colon + 1);
  if (number.empty() || number.find_first_not_of("0123456789") != std::string::npos) return false;
  // Checked at start-up (app/environment.cpp): an index that does not fit is refused there.
  try {
    return std::stoull(number) == index;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace rb
