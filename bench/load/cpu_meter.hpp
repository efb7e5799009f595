#pragma once

// CPU over the measured window of a run (--cpu-watch): of the processes named
// on the command line (a cluster's nodes, the postmaster with its backends,
// a NATS server), of the tool itself and of the whole machine, so a figure
// comes with what it cost and where the cores went. From /proc: the ticks of
// a process and its threads (utime + stime), and /proc/stat.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace waggle::bench {

struct cpu_watch {
  std::string name;
  int pid = 0;
  bool children = false;  // with its direct children (the postmaster's backends)
};

// "node0=123,pg=456+" -> the watches ('+': with the children); nullopt when malformed.
std::optional<std::vector<cpu_watch>> parse_cpu_watches(const std::string& text);

struct cpu_point {
  int64_t t_ns = 0;
  std::vector<double> seconds;  // per watch
  double tool_s = 0;
  double machine_busy_s = 0, machine_total_s = 0;
};

cpu_point cpu_now(const std::vector<cpu_watch>& watches);

// "name" -> cores used between a and b, each watch in order, then "tool" and
// "machine_busy" (share of all CPUs, 0..1).
std::vector<std::pair<std::string, double>> cpu_between(const std::vector<cpu_watch>& watches,
                                                       const cpu_point& a, const cpu_point& b);

}  // namespace waggle::bench
