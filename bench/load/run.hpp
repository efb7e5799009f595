#pragma once

#include "bench/load/options.hpp"

namespace waggle::bench {

// `waggle-load run`: sets up, drives the relay, reports. Exit code 0 when
// every event (or REQ) was accepted, answered and, with subscribers, delivered
// to all of them; 1 otherwise (the report is written either way).
int run_load(const load_options& options);

}  // namespace waggle::bench
