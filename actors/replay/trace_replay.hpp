#pragma once

// Replays a recorded trace through the node's own actors under CAF's
// deterministic test_coordinator (docs/traces.md). The database sessions are
// stand-ins that answer from the trace; inputs are fed in recorded order,
// each run to quiescence; every output (frames out, database requests, clock
// and random readings) is checked against the trace, stream by stream. The
// first mismatch is reported with its sequence number and both sides.

#include <cstddef>
#include <istream>
#include <optional>
#include <string>

#include "actors/replay/replay_player.hpp"

namespace waggle {

struct replay_outcome {
  bool identical = false;
  std::optional<trace_divergence> divergence;
  std::string error;  // the trace could not be replayed at all (not a divergence)
  size_t records = 0;
  size_t inputs = 0;   // frames in, replies, timers, readings handed out
  size_t checked = 0;  // outputs compared
  bool torn_tail = false;  // the file ended in a partial line (a crash), left out
  std::string summary() const;
};

struct replay_options {
  // Also require every frame and reading to be made while replaying the last
  // input before its record: right for a trace of one client at a time
  // (each step waits for its answer), where it catches an output made too
  // early (a fan-out before COMMIT). A loaded trace interleaves independent
  // inputs, so it is replayed without it.
  bool strict = false;
};

replay_outcome replay_trace(std::istream& lines, replay_options options = {});
replay_outcome replay_trace_file(const std::string& path, replay_options options = {});

}  // namespace waggle
