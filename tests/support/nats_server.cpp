#include "tests/support/nats_server.hpp"

#include "tests/support/free_port.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

extern char** environ;

namespace waggle::testing {

namespace {

std::string find_nats_server() {
  if (const char* given = std::getenv("WAGGLE_NATS_SERVER"); given && *given)
    return given;
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    for (std::string d; std::getline(ss, d, ':');)
      if (!d.empty())
        dirs.push_back(d);
  }
  dirs.insert(dirs.end(), {"/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"});
  for (const auto& d : dirs) {
    auto p = std::filesystem::path(d) / "nats-server";
    if (::access(p.c_str(), X_OK) == 0)
      return p.string();
  }
  return {};
}

sockaddr_in loopback(uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

bool accepts(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return false;
  auto addr = loopback(port);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

nats_test_server::nats_test_server(int64_t max_payload) {
  binary_ = find_nats_server();
  if (binary_.empty())
    throw std::runtime_error(
      "nats-server is not installed (Debian package `nats-server`; ./scripts/test installs it "
      "from WAGGLE_APT_PACKAGES in scripts/lib.sh): the NATS bus tests need it");
  char tmpl[] = "/tmp/waggle-nats-XXXXXX";
  if (!::mkdtemp(tmpl))
    throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  std::ofstream(dir_ / "nats.conf") << "max_payload: " << max_payload << "\n";
  // A port is free when chosen, not necessarily when the server binds it:
  // another process may take it in between, so a few tries.
  for (int attempt = 0;; ++attempt) {
    port_ = e2e::free_port();
    try {
      start();
      return;
    } catch (const std::exception&) {
      if (attempt == 4)
        throw;
    }
  }
}

nats_test_server::~nats_test_server() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void nats_test_server::stop() {
  if (pid_ <= 0)
    return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void nats_test_server::start() {
  if (pid_ > 0)
    return;
  std::vector<std::string> args = {binary_,
                                   "-c",
                                   (dir_ / "nats.conf").string(),
                                   "-a",
                                   "127.0.0.1",
                                   "-p",
                                   std::to_string(port_),
                                   "-l",
                                   (dir_ / "nats.log").string()};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  // fork and exec rather than posix_spawn, for PR_SET_PDEATHSIG: a test process that aborts
  // (a failed assertion in a fixture, a sanitizer's halt) takes its nats-server with it instead
  // of leaving it on a port the next run picks again. Between fork and exec only
  // async-signal-safe calls: the test process has threads. The signal follows the thread that
  // forked, which is the test's own, alive until the fixture stops the server.
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0)
    throw std::runtime_error("cannot start " + binary_);
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent)
      ::_exit(127);  // the test died before the prctl
    int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) {
      ::dup2(null, 1);
      ::dup2(null, 2);
    }
    ::execve(binary_.c_str(), argv.data(), environ);
    ::_exit(127);
  }
  pid_ = pid;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{10};
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("nats-server exited at start on port " + std::to_string(port_) +
                               ": " + log());
    }
    // Listening, and this server (not another process on the same port).
    if (accepts(port_) && log().find("Server is ready") != std::string::npos)
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
  stop();
  throw std::runtime_error("nats-server did not accept on port " + std::to_string(port_) +
                           " within 10 s: " + log());
}

std::string nats_test_server::log() const {
  std::ifstream in(dir_ / "nats.log");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace waggle::testing
