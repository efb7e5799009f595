#pragma once

// How waggle's own connections to PostgreSQL are opened when a dead or silent
// server must not hold a thread for minutes: the replica pool's readers, the
// bus, and the listener's LISTEN and probe connections. libpq without a
// connect_timeout waits out the kernel's SYN retries (about two minutes) in
// PQconnectdb, and a half-open connection without keepalives is never noticed
// by a reader that only waits.

#include <chrono>
#include <string>

namespace waggle::db {

// `url` (URL or key=value form, parsed by libpq) plus connect_timeout=2, TCP
// keepalives (idle 5 s, interval 2 s, 3 probes), tcp_user_timeout (0 = the
// system's) and application_name=waggle-<name>, in key=value form. These
// settings replace any the URL gives. Throws std::invalid_argument when libpq
// cannot parse `url` (the message never quotes the URL: it may hold a
// password).
std::string guarded_conninfo(const std::string& url, const std::string& name,
                             std::chrono::milliseconds tcp_user_timeout);

}  // namespace waggle::db
