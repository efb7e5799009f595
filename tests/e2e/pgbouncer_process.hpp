#pragma once

// A real PgBouncer (Debian's `pgbouncer`) in front of the test PostgreSQL,
// for tests of what a pooler does to the node's connections. One process per
// object: pool_mode transaction unless told otherwise, auth_type trust (the
// test cluster trusts loopback; PgBouncer still wants the user in its
// auth_file), listening on a free loopback port, every database name passed
// through to the upstream server. Its config, auth file and log live in a
// temporary directory removed with the object.
//
// PgBouncer refuses to run as root, so when the test is root it is started
// with its own `-u postgres` (it drops to that user after reading its config)
// and the directory is handed to that user. Started in the foreground, so the
// pid we hold is PgBouncer's own and the destructor ends exactly it.
//
// Not installed: ok() is false and error() says so; callers fail, never skip.

#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>

#include "tests/support/free_port.hpp"

extern char** environ;

namespace waggle::e2e {

class pgbouncer_process {
 public:
  // `upstream_host`/`upstream_port`/`user`: the PostgreSQL it pools for.
  pgbouncer_process(const std::string& upstream_host, const std::string& upstream_port,
                    const std::string& user, const std::string& pool_mode = "transaction") {
    binary_ = find_binary();
    if (binary_.empty()) {
      error_ = "pgbouncer is not installed (Debian package `pgbouncer`; ./scripts/test installs "
               "it from WAGGLE_APT_PACKAGES in scripts/lib.sh)";
      return;
    }
    char tmpl[] = "/tmp/waggle-pgbouncer-XXXXXX";
    if (!::mkdtemp(tmpl)) {
      error_ = "mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    port_ = free_port();
    {
      std::ofstream ini(dir_ / "pgbouncer.ini");
      ini << "[databases]\n"
          << "* = host=" << upstream_host << " port=" << upstream_port << "\n"
          << "[pgbouncer]\n"
          << "listen_addr = 127.0.0.1\n"
          << "listen_port = " << port_ << "\n"
          << "unix_socket_dir =\n"
          << "auth_type = trust\n"
          << "auth_file = " << (dir_ / "userlist.txt").string() << "\n"
          << "pool_mode = " << pool_mode << "\n"
          << "pidfile = " << (dir_ / "pgbouncer.pid").string() << "\n";
      std::ofstream users(dir_ / "userlist.txt");
      users << '"' << user << "\" \"\"\n";
    }
    std::vector<std::string> args = {binary_};
    if (::geteuid() == 0) {
      struct passwd* pw = ::getpwnam("postgres");
      if (!pw) {
        error_ = "running as root and there is no `postgres` OS user for PgBouncer to run as";
        return;
      }
      for (const auto& p : {dir_, dir_ / "pgbouncer.ini", dir_ / "userlist.txt"})
        if (::chown(p.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
          error_ = "chown " + p.string() + " failed";
          return;
        }
      args.insert(args.end(), {"-u", "postgres"});
    }
    args.push_back((dir_ / "pgbouncer.ini").string());
    start(args);
  }

  ~pgbouncer_process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);  // immediate shutdown in PgBouncer 1.18
      if (!reaped(std::chrono::seconds(5))) {
        ::kill(pid_, SIGKILL);
        reaped(std::chrono::seconds(5));
      }
    }
    std::error_code ec;
    if (!dir_.empty())
      std::filesystem::remove_all(dir_, ec);
  }
  pgbouncer_process(const pgbouncer_process&) = delete;
  pgbouncer_process& operator=(const pgbouncer_process&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  uint16_t port() const { return port_; }
  // A libpq URL of `database` through this PgBouncer.
  std::string url(const std::string& user, const std::string& database) const {
    return "postgresql://" + user + "@127.0.0.1:" + std::to_string(port_) + "/" + database;
  }
  // Everything PgBouncer logged so far (stderr; timestamps in UTC).
  std::string log() const {
    std::ifstream in(dir_ / "pgbouncer.log");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  static std::string find_binary() {
    std::vector<std::string> dirs;
    if (const char* path = std::getenv("PATH")) {
      std::stringstream ss(path);
      for (std::string d; std::getline(ss, d, ':');)
        dirs.push_back(d);
    }
    dirs.insert(dirs.end(), {"/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"});
    for (const auto& d : dirs) {
      auto p = std::filesystem::path(d) / "pgbouncer";
      if (!d.empty() && ::access(p.c_str(), X_OK) == 0)
        return p.string();
    }
    return {};
  }

  void start(std::vector<std::string> args) {
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    // Its log timestamps are compared with the node's (UTC).
    std::vector<std::string> env_store{"TZ=UTC"};
    for (char** e = environ; *e; ++e)
      if (std::string_view{*e}.rfind("TZ=", 0) != 0)
        env_store.emplace_back(*e);
    std::vector<char*> envp;
    for (auto& e : env_store)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    auto log_path = (dir_ / "pgbouncer.log").string();
    posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    int rc = ::posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
      pid_ = 0;
      error_ = "could not start " + binary_;
      return;
    }
    // Ready when it accepts connections; a PgBouncer that exits (bad config,
    // port taken) is reported with its log. Bounded: a failure detector.
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < until) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        error_ = "pgbouncer exited at start-up:\n" + log();
        return;
      }
      if (accepts())
        return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    error_ = "pgbouncer did not listen on 127.0.0.1:" + std::to_string(port_) + " within 10 s:\n" +
             log();
  }

  bool accepts() const {
    boost::asio::io_context io;
    boost::asio::ip::tcp::socket s(io);
    boost::system::error_code ec;
    s.connect({boost::asio::ip::make_address("127.0.0.1"), port_}, ec);
    return !ec;
  }

  bool reaped(std::chrono::seconds within) {
    auto until = std::chrono::steady_clock::now() + within;
    while (std::chrono::steady_clock::now() < until) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  std::string binary_;
  std::filesystem::path dir_;
  uint16_t port_ = 0;
  pid_t pid_ = 0;
  std::string error_;
};

}  // namespace waggle::e2e
