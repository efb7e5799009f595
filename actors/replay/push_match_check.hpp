#pragma once

// The push matcher in a replay (docs/traces.md, "Push"): it is a database
// connection that no replay runs, but each batch's decision is pure
// (proto::push::match_wakes over what the batch loaded), and the trace holds
// both the loads and the decision (push_match_record, its "match" record).
// The replay runs the match again on the recorded loads and compares.

#include <optional>
#include <string>

namespace waggle {

struct match_check {
  bool ok = false;
  std::string recorded;  // the recorded wakes, or why the record is not one
  std::string replayed;  // what match_wakes decides on the recorded loads
};

// `msg`: the record's trace_codec JSON of a push_match_record.
match_check check_push_match(const std::string& msg);

}  // namespace waggle
