#include "bench/load/cpu_meter.hpp"

#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>

namespace waggle::bench {

namespace {

// utime + stime (seconds) and the parent of a process; false when it is gone.
bool proc_cpu(int pid, double& seconds, int& parent) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(in, text))
    return false;
  // The command may hold spaces and parentheses: the fields follow the last ')'.
  auto close = text.rfind(')');
  if (close == std::string::npos)
    return false;
  std::istringstream fields(text.substr(close + 2));
  std::string f;
  std::vector<std::string> v;
  while (fields >> f && v.size() < 13)
    v.push_back(f);
  if (v.size() < 13)
    return false;
  // After the command: state(0) ppid(1) ... utime(11) stime(12).
  parent = std::stoi(v[1]);
  static const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  seconds = (std::stod(v[11]) + std::stod(v[12])) / hz;
  return true;
}

}  // namespace

std::optional<std::vector<cpu_watch>> parse_cpu_watches(const std::string& text) {
  std::vector<cpu_watch> out;
  size_t at = 0;
  while (at <= text.size()) {
    auto comma = text.find(',', at);
    auto item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 >= item.size())
      return std::nullopt;
    cpu_watch w;
    w.name = item.substr(0, eq);
    auto pid = item.substr(eq + 1);
    if (pid.back() == '+') {
      w.children = true;
      pid.pop_back();
    }
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos ||
        w.name.find_first_of("/\"\\") != std::string::npos || w.name == "tool" ||
        w.name == "machine_busy")
      return std::nullopt;
    w.pid = std::stoi(pid);
    if (w.pid <= 0)
      return std::nullopt;
    out.push_back(w);
    if (comma == std::string::npos)
      break;
    at = comma + 1;
  }
  return out;
}

cpu_point cpu_now(const std::vector<cpu_watch>& watches) {
  cpu_point p;
  p.t_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
             .count();
  p.seconds.assign(watches.size(), 0);
  int parent = 0;
  proc_cpu(static_cast<int>(getpid()), p.tool_s, parent);
  bool any_children = false;
  for (size_t i = 0; i < watches.size(); ++i) {
    proc_cpu(watches[i].pid, p.seconds[i], parent);
    any_children = any_children || watches[i].children;
  }
  if (any_children) {
    // One pass over /proc for every watch that counts its children.
    if (DIR* d = opendir("/proc")) {
      while (auto* e = readdir(d)) {
        char* end = nullptr;
        long pid = std::strtol(e->d_name, &end, 10);
        if (*end != '\0' || pid <= 0)
          continue;
        double s = 0;
        if (!proc_cpu(static_cast<int>(pid), s, parent))
          continue;
        for (size_t i = 0; i < watches.size(); ++i)
          if (watches[i].children && parent == watches[i].pid)
            p.seconds[i] += s;
      }
      closedir(d);
    }
  }
  std::ifstream stat("/proc/stat");
  std::string cpu;
  stat >> cpu;  // "cpu": user nice system idle iowait irq softirq steal ...
  static const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  double v = 0;
  for (int i = 0; i < 8 && stat >> v; ++i) {
    p.machine_total_s += v / hz;
    if (i != 3 && i != 4)
      p.machine_busy_s += v / hz;
  }
  return p;
}

std::vector<std::pair<std::string, double>> cpu_between(const std::vector<cpu_watch>& watches,
                                                       const cpu_point& a, const cpu_point& b) {
  std::vector<std::pair<std::string, double>> out;
  double span = static_cast<double>(b.t_ns - a.t_ns) / 1e9;
  if (span <= 0)
    return out;
  for (size_t i = 0; i < watches.size() && i < a.seconds.size() && i < b.seconds.size(); ++i)
    out.emplace_back(watches[i].name, (b.seconds[i] - a.seconds[i]) / span);
  out.emplace_back("tool", (b.tool_s - a.tool_s) / span);
  double total = b.machine_total_s - a.machine_total_s;
  out.emplace_back("machine_busy", total > 0 ? (b.machine_busy_s - a.machine_busy_s) / total : 0);
  return out;
}

}  // namespace waggle::bench
