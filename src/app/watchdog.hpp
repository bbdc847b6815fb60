#pragma once
// The hang guard (run.timeout_s, run.point_timeout_s, --timeout): one thread per rank that
// watches the run's and the current point's age (or, between points, the time since the last
// one ended: check() in watchdog.cpp says its limit). A rank stuck in a collective whose partner
// died (or hangs) never returns to the driver, so the guard cannot ask it to stop: past a
// limit it says what hung on stderr, aborts this rank's NCCL communicators (so the GPU work
// queued on them ends) and ends the process with kTimeoutExitCode. The program asks MPI only
// for MPI_THREAD_FUNNELED, so this thread may not call MPI_Abort; the launcher (mpirun, srun)
// ends the other ranks when one exits non-zero. Every sweep finished before is already
// flushed to the HDF5 file (the driver flushes after each sweep).
//
// Which rank the others wait for (a rank stopped with SIGSTOP, frozen, or on a node that is
// gone): its guard cannot speak, and the others cannot ask MPI (their main threads are blocked
// inside a collective, and this thread may not call MPI). So each rank's guard keeps a
// heartbeat: a 64-byte slot with a counter and the point the rank is in, rewritten every second
// into its node's shared memory, and copied by one rank per node into a small file beside the
// output (OUTPUT.heartbeat, which every rank can reach: the output is checked to be one shared
// file); app/heartbeat.hpp says how. A guard that fires reads the slots twice, kSilenceS apart,
// and names the ranks whose counter did not move (or that are at another point). Counters, not
// clocks: nodes' clocks need not agree. The beats are on a thread of their own so that a stuck
// file system stops the heartbeat (and so names that rank), never the guard itself; the reads
// at firing are bounded in time for the same reason.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace rb {

class NodeHeartbeat;

constexpr int kTimeoutExitCode = 124;  // as timeout(1)

// How long a point may go on after a signal before the run ends without it (the sweep's finished
// points then lost; the guard's limits apply as well): under Slurm's default KillWait of 30 s
// between SIGTERM and SIGKILL, with time left to write. SIGUSR1, Slurm's --signal warning, is
// followed by nothing of its own: the point may run to the guard's limits (or to the SIGTERM the
// time limit sends, which then starts this grace).
double interrupt_grace_s(int signo);

struct WatchdogLimits {
  double run_s = 0;                          // 0: no limit on the whole run
  double point_s = 0;                        // 0: no limit on one point
  std::string run_source = "run.timeout_s";  // or "--timeout": named in the message
  std::string point_source = "run.point_timeout_s";
  bool point_auto = false;  // the point limit is set per sweep (set_point_limit)
  bool any() const { return run_s > 0 || point_s > 0 || point_auto; }
};

class Watchdog {
 public:
  // Starts the thread; the run's clock starts now.
  Watchdog(int rank, WatchdogLimits limits, double poll_s = 0.1);
  ~Watchdog();  // stops and joins the thread
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // A point's clock runs from its point_started to the next one or to idle().
  void point_started(const std::string& sweep, std::size_t index, const std::string& label);
  // Between sweeps: no point is running (the run's limit still applies, and the point limit
  // to the time between points, at least kBetweenPointsMinS).
  void idle();
  // The limit of the points from now on (0: none) and how the message names it (run.point_timeout_s
  // auto: per sweep, from its estimate).
  void set_point_limit(double seconds, std::string source);
  // Starts this rank's beat thread on `beats` (made collectively by the driver) and keeps it.
  // Returns "" or beats' error (the rank still beats in its node's memory, it only never writes
  // the shared file).
  std::string start_heartbeat(std::unique_ptr<NodeHeartbeat> beats);
  // Stops the beat thread (the run ended normally; also the destructor's first step).
  void stop_heartbeat();
  // Collective over the node communicator, after stop_heartbeat: frees the node's shared memory.
  // Only the driver's normal end calls it: a rank ending alone must not wait in a collective.
  void release_heartbeat();
  // One path chooses how the run ends. The guard decides under its lock the moment a limit
  // passes (fired() is then true, for good, even if the slow point later ends); the main
  // thread claims the end with end_run() before it writes a status: false when the guard
  // decided first (the run then ends with the guard's exit code, the status left as it is),
  // else true, and the guard fires no more (nothing is left to time but the file's close).
  bool fired() const;
  bool end_run();

  // Where a run that ends from here (a time limit, a signal) records its end state:
  // OUTPUT.end (app/end_record.hpp); "" (the default): nowhere, before the output is claimed.
  void set_end_record(std::string path);
  // Rank 0, between claiming a new output and its first flush: the file there is no readable
  // HDF5 yet and would refuse the next run's claim, so a signal in that window removes it
  // (`path`; "" when the window closes).
  void set_unfinished_output(std::string path);
  // A signal asked the run to end (app/interrupts.hpp; called on the signal watch thread). The
  // same decision as a time limit, unless the run's end is decided already (the guard fired, or
  // the main thread claimed it). While the sweeps stop at point boundaries (stop_at_points), the
  // signal is only noted (stop_signal) and recorded in OUTPUT.end at once, in case a SIGKILL
  // follows: the ranks agree at the next point's start to stop there and keep the finished
  // points. A point that does not end within the signal's grace (interrupt_grace_s; the guard's
  // limits still apply) ends the run as any other time: this records 'interrupted: SIGNAL
  // during sweep S point P' in the end record, says so (the rank that wrote the record, else
  // rank 0), aborts the NCCL communicators and ends the process with interrupted_exit_code(signo),
  // without waiting for the other ranks: they are signalled too, or the launcher ends them when
  // this one exits.
  void interrupt(int signo);
  // Whether the main thread stops at the next point boundary for a signal (the sweep loop's
  // sweeps whose every rank starts every point), else a signal ends the run at once.
  void stop_at_points(bool on);
  // The signal that asked the run to stop and is waiting for a point boundary; 0: none.
  int stop_signal() const;
  // The ranks agreed to stop at a boundary: the main thread writes what finished and ends the
  // run, no longer at a boundary; the signal's grace still bounds it.
  void stop_agreed();

  // The heartbeat slot's text (exactly kSlotBytes, newline-terminated) and its reading back;
  // exposed for tests.
  static constexpr std::size_t kSlotBytes = 64;
  static std::string slot_text(unsigned long long beat, const std::string& sweep, std::size_t index,
                               bool in_point, bool fired);
  struct Beat {
    bool seen = false;        // the slot was ever written
    bool fired = false;       // its guard fired (it is not silent, it is stopping)
    bool node_quiet = false;  // on another node none of whose slots moved in the shared file
    unsigned long long count = 0;
    std::string where;  // "sweep S point N" or "between points"
  };
  static Beat parse_slot(const std::string& slot);
  // The line naming silent ranks (counter unchanged between `before` and `after`; a second
  // line for those of a node_quiet node, where the file system may be the one that lags), else
  // the ranks at another point than `self`'s; "" when every rank beats at the same point.
  static std::string silent_ranks_text(int self, const std::vector<Beat>& before,
                                       const std::vector<Beat>& after, double silence_s);

  // The stderr line for a limit passed (exposed for tests).
  static std::string message(int rank, const std::string& sweep, std::size_t index,
                             const std::string& label, double seconds, double limit,
                             const std::string& source);

 private:
  using Clock = std::chrono::steady_clock;
  void loop();
  void beat_loop();
  // The names line for fire(): reads the heartbeats twice (bounded in time); "" without them.
  std::string silent_ranks() const;
  // "" while within the limits, else what passed its limit ("sweep S point P (L) has run ...").
  std::string check(Clock::time_point now) const;
  [[noreturn]] void fire(const std::string& timeout);
  // "sweep S point P (LABEL)" or "between points"; called with mutex_ held.
  std::string where_locked() const;
  // Writes the end record (bounded in time); true when this rank's record is the one there.
  bool record_end(const std::string& status, const std::string& failure) const;
  // A signal waits for a point boundary: its OUTPUT.end now, and what comes next on stderr.
  void note_stop(int signo, const std::string& where);
  // The signal's end now: its record (unless written when it came), the message, the exit.
  [[noreturn]] void end_interrupted(int signo, const std::string& where, bool recorded);
  // Aborts the NCCL communicators (bounded in time) and ends the process with `code`.
  [[noreturn]] static void end_process(int code);

  int rank_;
  WatchdogLimits limits_;
  std::chrono::duration<double> poll_;
  Clock::time_point run_start_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool in_point_ = false;
  std::string sweep_, label_;
  std::size_t index_ = 0;
  Clock::time_point point_start_;
  Clock::time_point idle_start_;  // when the last point (or the run) ended: between points
  bool beat_stop_ = false;
  bool fired_ = false;           // the guard decided to end the run (set before it says so)
  bool ended_ = false;           // the main thread claimed the run's end first
  bool stop_at_points_ = false;  // a signal waits for the next point boundary
  int stop_signal_ = 0;          // the signal waiting for it (0: none)
  std::string stop_where_;       // where the run was when it came ("during sweep S point P (L)")
  bool stop_recorded_ = false;   // this rank's OUTPUT.end is the one there
  bool stop_agreed_ = false;     // the ranks agreed on it: the main thread is ending the run
  Clock::time_point stop_deadline_ = Clock::time_point::max();  // its grace ends
  std::string end_record_;
  std::string unfinished_output_;
  std::unique_ptr<NodeHeartbeat> beats_;  // set before beat_thread_ starts, kept to the end
  std::thread beat_thread_;
  std::thread thread_;
};

// The test-only hang hook: RINGBENCH_TEST_HANG_POINT=SWEEP:INDEX (sweep name, 0-based point
// index) makes that point sleep forever on every rank, so tests can trigger the guard.
// Returns whether (sweep, index) is the point named; an unset or malformed variable is none.
bool is_test_hang_point(const std::string& sweep, std::size_t index);
// The test-only signal hook: RINGBENCH_TEST_SIGNAL_POINT=SWEEP:INDEX makes every rank send itself
// SIGTERM as that point starts, as Slurm's time limit signals every task, so tests can stop a
// sweep after a known number of points.
bool is_test_signal_point(const std::string& sweep, std::size_t index);
// Whether `variable` (SWEEP:INDEX) names the point; unset or malformed: none.
bool is_test_point(const char* variable, const std::string& sweep, std::size_t index);

}  // namespace rb
