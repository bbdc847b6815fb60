#include "app/interrupts.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <stdexcept>

namespace rb {
namespace {

constexpr int kSignals[] = {SIGTERM, SIGINT, SIGUSR1};
constexpr unsigned char kStop = 0;  // not a signal number: the watch thread's end

// The pipe's write end: a signal handler can reach nothing else (one SignalWatch at a time).
std::atomic<int> g_write_fd{-1};
struct sigaction g_previous[sizeof kSignals / sizeof kSignals[0]];

// Async-signal-safe: one write(2) of the number, errno kept for the interrupted code.
extern "C" void on_signal_received(int signo) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(signo);
  const int fd = g_write_fd.load();
  if (fd >= 0) {
    const ssize_t n = ::write(fd, &byte, 1);
    (void)n;  // a full pipe already holds a signal to act on
  }
  errno = saved;
}

}  // namespace

std::string signal_name(int signo) {
  switch (signo) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGUSR1:
      return "SIGUSR1";
    default:
      return "signal " + std::to_string(signo);
  }
}

SignalWatch::SignalWatch(std::function<void(int)> on_signal) : on_signal_(std::move(on_signal)) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("cannot watch for signals: pipe: ") +
                             std::strerror(errno));
  read_fd_ = fds[0];
  ::fcntl(fds[1], F_SETFL, O_NONBLOCK);  // a handler never blocks on a full pipe
  g_write_fd.store(fds[1]);
  thread_ = std::thread([this] { loop(); });
  struct sigaction sa {};
  sa.sa_handler = on_signal_received;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // the main thread's system calls go on; the watch thread acts
  for (std::size_t i = 0; i < sizeof kSignals / sizeof kSignals[0]; ++i)
    ::sigaction(kSignals[i], &sa, &g_previous[i]);
}

SignalWatch::~SignalWatch() {
  for (std::size_t i = 0; i < sizeof kSignals / sizeof kSignals[0]; ++i)
    ::sigaction(kSignals[i], &g_previous[i], nullptr);
  const int fd = g_write_fd.exchange(-1);
  const unsigned char stop = kStop;
  while (::write(fd, &stop, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
  ::close(fd);
  ::close(read_fd_);
}

void SignalWatch::loop() {
  for (;;) {
    unsigned char byte = kStop;
    const ssize_t n = ::read(read_fd_, &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || byte == kStop) return;
    on_signal_(byte);
  }
}

}  // namespace rb
