#include "actors/policy/plugin_process.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <mutex>

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

namespace waggle {

namespace {

void close_fd(int& fd) {
  if (fd >= 0)
    ::close(fd);
  fd = -1;
}

// In the child, between fork and exec: async-signal-safe calls only.
[[noreturn]] void exec_child(const char* path, int in, int out, int err, int report) {
  ::setpgid(0, 0);  // its own group, so a kill reaches whatever it started
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);  // main() blocks SIGTERM/SIGINT
  ::signal(SIGPIPE, SIG_DFL);                  // an ignored disposition survives exec
  ::dup2(in, 0);
  ::dup2(out, 1);
  ::dup2(err, 2);
  // Sockets, database connections: none of the node's descriptors reach the
  // plugin. CLOEXEC rather than closed, so the error pipe lives until exec.
  if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0)
    for (int fd = 3; fd < 65536; ++fd)
      if (fd != report)
        ::close(fd);
  ::execl(path, path, static_cast<char*>(nullptr));
  int e = errno;
  [[maybe_unused]] auto n = ::write(report, &e, sizeof(e));
  ::_exit(127);
}

}  // namespace

plugin_process::~plugin_process() {
  kill();
}

status plugin_process::start(const std::string& path, line_fn on_line, gone_fn on_gone) {
  // A write to a dead plugin's stdin must fail with EPIPE, not end the node.
  // main() ignores SIGPIPE already; a node embedded in a test may not.
  static std::once_flag ignore_sigpipe;
  std::call_once(ignore_sigpipe, [] { std::signal(SIGPIPE, SIG_IGN); });
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, report[2] = {-1, -1},
      cancel[2] = {-1, -1};
  auto fail = [&](const char* what) -> status {
    status st{ec::unavailable, std::string{what} + ": " + std::strerror(errno)};
    for (int* p : {in, out, err, report, cancel})
      for (int k = 0; k < 2; ++k)
        close_fd(p[k]);
    return st;
  };
  for (int* p : {in, out, err, report, cancel})
    if (::pipe2(p, O_CLOEXEC) != 0)
      return fail("pipe");
  pid_t pid = ::fork();
  if (pid < 0)
    return fail("fork");
  if (pid == 0)
    exec_child(path.c_str(), in[0], out[1], err[1], report[1]);
  for (int fd : {in[0], out[1], err[1], report[1]})
    ::close(fd);
  // EOF on the report pipe means exec succeeded (it was CLOEXEC); an errno
  // means it failed. Bounded: the child execs or exits at once.
  int child_errno = 0;
  ssize_t n;
  do
    n = ::read(report[0], &child_errno, sizeof(child_errno));
  while (n < 0 && errno == EINTR);
  ::close(report[0]);
  pid_ = pid;
  stdin_fd_ = in[1];
  stdout_fd_ = out[0];
  stderr_fd_ = err[0];
  cancel_rd_ = cancel[0];
  cancel_wr_ = cancel[1];
  ::fcntl(stdin_fd_, F_SETFL, ::fcntl(stdin_fd_, F_GETFL) | O_NONBLOCK);
  if (n > 0) {
    kill();
    return {ec::unavailable, "cannot execute " + path + ": " + std::strerror(child_errno)};
  }
  reader_ = std::thread([this, on_line = std::move(on_line), on_gone = std::move(on_gone)] {
    read_loop(on_line, on_gone);
  });
  return {};
}

bool plugin_process::write(std::string_view data) {
  out_.append(data);
  return flush();
}

bool plugin_process::flush() {
  while (!out_.empty() && stdin_fd_ >= 0) {
    auto n = ::write(stdin_fd_, out_.data(), out_.size());
    if (n > 0) {
      out_.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return true;  // the plugin is behind; the actor retries on its tick
    return false;
  }
  return stdin_fd_ >= 0;
}

void plugin_process::read_loop(line_fn on_line, gone_fn on_gone) {
  std::string buf[2];
  bool cut[2] = {false, false};
  int fds[2] = {stdout_fd_, stderr_fd_};
  bool open[2] = {true, true};
  bool gone_sent = false;
  char chunk[65536];
  auto emit = [&](int k) {
    std::string line;
    line.swap(buf[k]);
    on_line(k == 1, std::move(line));
  };
  while (open[0] || open[1]) {
    pollfd pfd[3] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}, {cancel_rd_, POLLIN, 0}};
    for (int k = 0; k < 2; ++k)
      if (!open[k])
        pfd[k].fd = -1;
    if (::poll(pfd, 3, -1) < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    if (pfd[2].revents)
      return;  // the owner stops us (terminate)
    for (int k = 0; k < 2; ++k) {
      if (!open[k] || !pfd[k].revents)
        continue;
      auto n = ::read(fds[k], chunk, sizeof(chunk));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        open[k] = false;
        if (!buf[k].empty())
          emit(k);
        continue;
      }
      std::string_view rest{chunk, static_cast<size_t>(n)};
      while (!rest.empty()) {
        auto nl = rest.find('\n');
        auto part = rest.substr(0, nl);
        if (!cut[k]) {
          auto room = max_line - buf[k].size();
          buf[k].append(part.substr(0, room));
          if (part.size() > room) {
            emit(k);  // what fits, as its own (bad) line; the rest is dropped
            cut[k] = true;
          }
        }
        if (nl == std::string_view::npos)
          break;
        if (!cut[k] && !buf[k].empty())
          emit(k);  // blank lines are no answers: skipped
        cut[k] = false;
        rest.remove_prefix(nl + 1);
      }
    }
    if (!open[0] && !gone_sent) {
      gone_sent = true;
      on_gone();
    }
  }
  if (!gone_sent)
    on_gone();
}

void plugin_process::terminate(std::chrono::milliseconds grace) {
  if (pid_ <= 0)
    return;
  close_fd(stdin_fd_);  // a plugin that reads until EOF exits on its own
  if (grace.count() > 0) {
    ::kill(-pid_, SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + grace;
    while (std::chrono::steady_clock::now() < deadline) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  if (pid_ > 0) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);  // in case it left its group
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }
  // Whatever else of its group still holds the pipes got the SIGKILL too;
  // the reader stops on the cancel pipe either way.
  close_fd(cancel_wr_);
  if (reader_.joinable())
    reader_.join();
  close_fd(cancel_rd_);
  close_fd(stdout_fd_);
  close_fd(stderr_fd_);
  out_.clear();
}

}  // namespace waggle
