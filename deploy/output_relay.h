// OutputRelay: merges the output of many children into one stream, line by
// line, each line prefixed with who wrote it ("[worker 1] ", "[scheduler] ").
// Lines are forwarded only once complete, so lines of different children never
// interleave mid-line; an unterminated tail is forwarded (with a newline added)
// when its pipe closes, and an overlong line is cut into max_line_bytes pieces
// so memory stays bounded.
//
// Thread-safety: none; one thread polls.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"

namespace syncline::deploy {

// Receives one complete line per call, prefix included, ending in '\n'.
using LineSink = std::function<void(std::string_view line)>;

// A sink that writes each line to `fd` with as few write(2) calls as it takes
// (one, for lines under PIPE_BUF onto a pipe: atomic). A reader that went away
// (EPIPE) or an fd that stays unwritable for a second drops the line: the job's
// supervision must not stall on its log.
LineSink FdLineSink(int fd);

class OutputRelay {
 public:
  explicit OutputRelay(LineSink sink, size_t max_line_bytes = 64 * 1024);
  ~OutputRelay();  // Closes every source still open (tails are forwarded).
  OutputRelay(const OutputRelay&) = delete;
  OutputRelay& operator=(const OutputRelay&) = delete;

  // Adds a source. Takes ownership of `fd` and makes it non-blocking.
  void Add(int fd, std::string prefix);

  // Waits up to `timeout_ms` for output on any open source, then forwards all
  // complete lines that can be read without blocking. A source at end-of-file
  // gets its tail forwarded and is closed. With no open sources it just sleeps
  // `timeout_ms`, so a caller's poll loop never spins.
  Status PollOnce(int timeout_ms);

  // Keeps forwarding until every source has reached end-of-file or `deadline`
  // passes, then closes what is left (forwarding tails). Children that left a
  // grandchild holding their pipe open cannot make this wait past `deadline`.
  void DrainAndClose(Deadline deadline);

  size_t open_sources() const;

 private:
  struct Source {
    int fd;
    std::string prefix;
    std::string pending;  // bytes after the last newline seen
  };

  // Reads what is available; returns false at end-of-file or on a read error.
  bool ReadAvailable(Source& src);
  void ForwardCompleteLines(Source& src);
  void Emit(const Source& src, std::string_view text);
  void Close(Source& src);

  LineSink sink_;
  size_t max_line_bytes_;
  std::vector<Source> sources_;  // closed ones have fd == -1
};

}  // namespace syncline::deploy
