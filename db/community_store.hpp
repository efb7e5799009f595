#pragma once

// Communities (tenants), chosen by the request's Host.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <pqxx/connection>

#include "messages/proto/status.hpp"
#include "messages/values.hpp"

namespace waggle::db {

std::vector<community> load_communities(pqxx::connection& conn);
// Adds a community; adding an existing host returns the existing one
// (its name and policy untouched). New communities are closed unless told.
result<community> add_community(pqxx::connection& conn, std::string_view host,
                                std::string_view name,
                                community_policy policy = community_policy::closed);

}  // namespace waggle::db
