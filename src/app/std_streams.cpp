#include "app/std_streams.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

namespace rb {
namespace {

struct Sink {
  int fd;
  std::atomic<bool> gone{false};
};

Sink out_sink{STDOUT_FILENO}, err_sink{STDERR_FILENO};

// fopencookie's write: all of `size` to the descriptor, or (after a failure) nothing; always
// "written", so the FILE never enters its error state and fwrite never comes back short.
ssize_t write_or_drop(void* cookie, const char* data, std::size_t size) {
  Sink& sink = *static_cast<Sink*>(cookie);
  std::size_t done = 0;
  while (!sink.gone.load() && done < size) {
    const ssize_t n = ::write(sink.fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const bool first = !sink.gone.exchange(true);
      if (first && sink.fd == STDOUT_FILENO) {
        const std::string note = std::string("ringbench: note: standard output is gone (") +
                                 std::strerror(errno) +
                                 "): nothing more is printed there; the "
                                 "run goes on and writes its output file in full\n";
        (void)!::write(STDERR_FILENO, note.data(), note.size());  // stderr may be gone too
      }
    } else {
      done += static_cast<std::size_t>(n);
    }
  }
  return static_cast<ssize_t>(size);
}

// A FILE over `sink`, buffered as the C library buffers that stream; null if none can be made.
std::FILE* stream_over(Sink& sink, int mode) {
  cookie_io_functions_t io{};
  io.write = write_or_drop;
  std::FILE* f = ::fopencookie(&sink, "w", io);
  if (f != nullptr) std::setvbuf(f, nullptr, mode, mode == _IONBF ? 0 : BUFSIZ);
  return f;
}

}  // namespace

void keep_running_without_readers() {
  std::signal(SIGPIPE, SIG_IGN);
  std::fflush(stdout);
  std::fflush(stderr);
  // glibc's stdout and stderr are variables a program may set; the old FILEs stay open (the
  // C++ streams still use them, and they fail quietly now that SIGPIPE is ignored).
  if (std::FILE* out = stream_over(out_sink, ::isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF))
    stdout = out;
  if (std::FILE* err = stream_over(err_sink, _IONBF)) stderr = err;
}

}  // namespace rb
