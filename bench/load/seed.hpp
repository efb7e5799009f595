#pragma once

#include "bench/load/options.hpp"

namespace waggle::bench {

// `waggle-load seed`: creates channels through the relay (so membership and
// roster state are the relay's own), then writes signed channel posts
// straight through the relay's batch writer (db::write_batch), thousands per
// transaction. The rows are exactly what the relay would have stored.
int run_seed(const seed_options& options);

}  // namespace waggle::bench
