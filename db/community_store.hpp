#pragma once

// Communities (tenants), chosen by the request's Host.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <pqxx/connection>

#include "messages/proto/status.hpp"

namespace waggle::db {

struct community {
  int64_t id = 0;
  std::string host;  // lowercase, no port
  std::string name;
  bool archived = false;
  bool operator==(const community&) const = default;
};

// Lowercases and strips a port (and IPv6 brackets are kept: "[::1]:7777" -> "[::1]").
std::string normalize_host(std::string_view host);

std::vector<community> load_communities(pqxx::connection& conn);
// Adds a community; adding an existing host returns the existing one.
result<community> add_community(pqxx::connection& conn, std::string_view host, std::string_view name);

}  // namespace waggle::db
