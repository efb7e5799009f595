#pragma once

// One write-policy plugin process and its pipes: not an actor, owned by the
// write-policy plugin actor. The child runs in its own process group with only
// stdin/stdout/stderr open; stdin is written without blocking (what the pipe
// does not take now stays buffered); one reader thread reads stdout and
// stderr line by line and hands each line to a callback (the actor's
// mailbox), so nothing here blocks on the plugin except reaping it.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <thread>

#include <sys/types.h>

#include "messages/proto/status.hpp"

namespace waggle {

class plugin_process {
 public:
  // Called from the reader thread: a complete line (without "\n"), and once,
  // when stdout ended (the child exited or closed it).
  using line_fn = std::function<void(bool is_stderr, std::string line)>;
  using gone_fn = std::function<void()>;

  // Longer lines are cut here (the rest up to the newline is dropped), so a
  // plugin cannot grow our memory without bound.
  static constexpr size_t max_line = 1 << 20;

  plugin_process() = default;
  plugin_process(const plugin_process&) = delete;
  plugin_process& operator=(const plugin_process&) = delete;
  ~plugin_process();

  // fork/exec `path` (no arguments). An error if it cannot be executed.
  status start(const std::string& path, line_fn on_line, gone_fn on_gone);

  // Queues `data` for stdin and writes what the pipe takes now. False if the
  // pipe is broken (the child is gone).
  bool write(std::string_view data);
  // Retries the queued bytes; false if the pipe is broken.
  bool flush();
  size_t pending_bytes() const { return out_.size(); }

  // Closes stdin, sends SIGTERM to the child's group and waits up to `grace`
  // for it to exit, then SIGKILL. Reaps it and joins the reader thread.
  void terminate(std::chrono::milliseconds grace);
  // SIGKILL to the group, reap, join: a hung or dead plugin.
  void kill() { terminate(std::chrono::milliseconds{0}); }

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }

 private:
  void read_loop(line_fn on_line, gone_fn on_gone);

  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;
  int cancel_rd_ = -1;  // the reader thread polls it; closing the write end stops it
  int cancel_wr_ = -1;
  std::string out_;  // bytes stdin has not taken yet
  std::thread reader_;
};

}  // namespace waggle
