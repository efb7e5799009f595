#pragma once

// `waggle community member|admin|policy ...` (docs/management.md): the
// operator's membership commands. They work on the database directly, so on
// a stopped node or a running one (which sees them through the triggers'
// NOTIFY). Each change is audited via "cli" in its own transaction.
// Exit codes: 0 done, 1 refused or failed (unknown host, last owner), 2 usage.

#include <string>
#include <vector>

namespace waggle {

int run_community_admin(const std::string& verb, std::vector<std::string> args,
                        const std::string& database_url);

}  // namespace waggle
