#pragma once

// waggle sync URL [--filter JSON] [--dir down|up|both] [--community HOST]
//                 [--limit N] [--frame-limit BYTES] [--connect-to ADDR:PORT]
//                 [--database-url URL]
// Reconciles a local community with another relay by NIP-77 and moves the
// difference through the normal write paths: down through the import
// loader (signatures re-verified, rules applied), up as EVENTs the other
// relay judges (docs/negentropy.md, "waggle sync").

#include <string>
#include <vector>

namespace waggle {

// Exit status: 0 done, 3 done with events refused (listed on stderr), 1 failed, 2 usage.
int run_sync(std::vector<std::string> args, const std::string& database_url);

}  // namespace waggle
