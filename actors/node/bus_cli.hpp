#pragma once

// `waggle bus publish|request SUBJECT PAYLOAD` (docs/operations.md, "The
// bus from the shell"): joins the cluster's bus as a short-lived client
// node (--bus postgres or caf, --database-url), publishes or asks once, prints
// the ack or the reply, and leaves; what `nats pub` and `nats req` are to NATS.
// Exit codes: 0 done, 1 the bus refused or nobody answered, 2 usage.

#include <string>
#include <vector>

namespace waggle {

int run_bus_cli(std::vector<std::string> args);

}  // namespace waggle
