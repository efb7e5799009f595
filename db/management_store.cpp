#include "db/management_store.hpp"

#include <cstring>
#include <optional>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <pqxx/except>
#include <pqxx/result>

#include "db/membership_store.hpp"

namespace waggle::db {

namespace {

std::optional<std::string> nullable(const std::string& hex) {
  if (hex.empty())
    return std::nullopt;
  return hex;
}

std::vector<reasoned_entry> entries(const pqxx::result& r) {
  std::vector<reasoned_entry> out;
  out.reserve(r.size());
  for (const auto& row : r)
    out.push_back({row[0].as<std::string>(), row[1].as<std::string>()});
  return out;
}

// An address as the gateway spells a peer: no prefix, IPv4-mapped as IPv4,
// IPv6 in inet_ntop's (RFC 5952) form, which is also how Boost prints it.
// Checked here, not by a cast in the database: a failed statement would
// abort the caller's transaction, and with it the audit row.
result<std::string> canonical_ip(pqxx::transaction_base&, const std::string& ip) {
  auto bad = make_status(ec::invalid, "not an IP address (one IPv4 or IPv6 address, no prefix): "
                                        + ip.substr(0, 64));
  if (ip.empty() || ip.size() > 64)
    return bad;
  char text[INET6_ADDRSTRLEN] = {};
  in_addr v4{};
  if (inet_pton(AF_INET, ip.c_str(), &v4) == 1) {
    inet_ntop(AF_INET, &v4, text, sizeof(text));
    return std::string(text);
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, ip.c_str(), &v6) != 1)
    return bad;
  if (IN6_IS_ADDR_V4MAPPED(&v6)) {
    std::memcpy(&v4, v6.s6_addr + 12, 4);
    inet_ntop(AF_INET, &v4, text, sizeof(text));
  } else {
    inet_ntop(AF_INET6, &v6, text, sizeof(text));
  }
  return std::string(text);
}

}  // namespace

result<bool> ban_pubkey(pqxx::transaction_base& tx, int64_t community_id,
                        const std::string& pubkey, const std::string& reason,
                        const std::string& by) {
  auto removed = remove_member(tx, community_id, pubkey, by);
  if (!removed)
    return removed.error();
  auto r = tx.exec_params(
    "INSERT INTO community_banned_pubkeys (community_id, pubkey, reason, banned_by) "
    "VALUES ($1, decode($2, 'hex'), $3, decode($4, 'hex')) "
    "ON CONFLICT (community_id, pubkey) DO UPDATE SET reason = EXCLUDED.reason",
    community_id, pubkey, reason, nullable(by));
  return r.affected_rows() > 0;
}

bool unban_pubkey(pqxx::transaction_base& tx, int64_t community_id, const std::string& pubkey) {
  auto r = tx.exec_params(
    "DELETE FROM community_banned_pubkeys WHERE community_id = $1 AND pubkey = decode($2, 'hex')",
    community_id, pubkey);
  return r.affected_rows() > 0;
}

std::vector<reasoned_entry> list_banned_pubkeys(pqxx::transaction_base& tx, int64_t community_id) {
  return entries(tx.exec_params(
    "SELECT encode(pubkey, 'hex'), reason FROM community_banned_pubkeys "
    " WHERE community_id = $1 ORDER BY banned_at, pubkey",
    community_id));
}

std::vector<reasoned_entry> list_allowed_pubkeys(pqxx::transaction_base& tx,
                                                 int64_t community_id) {
  return entries(tx.exec_params(
    "SELECT encode(pubkey, 'hex'), role FROM community_members "
    " WHERE community_id = $1 AND removed_at IS NULL ORDER BY added_at, pubkey",
    community_id));
}

bool ban_event(pqxx::transaction_base& tx, int64_t community_id, const std::string& id,
               const std::string& reason, const std::string& by) {
  auto r = tx.exec_params(
    "INSERT INTO community_banned_events (community_id, event_id, reason, banned_by) "
    "VALUES ($1, decode($2, 'hex'), $3, decode($4, 'hex')) "
    "ON CONFLICT (community_id, event_id) DO UPDATE SET reason = EXCLUDED.reason",
    community_id, id, reason, nullable(by));
  tx.exec_params(
    "UPDATE events SET deleted_at = now() "
    " WHERE community_id = $1 AND id = decode($2, 'hex') AND deleted_at IS NULL",
    community_id, id);
  return r.affected_rows() > 0;
}

bool unban_event(pqxx::transaction_base& tx, int64_t community_id, const std::string& id) {
  auto r = tx.exec_params(
    "DELETE FROM community_banned_events WHERE community_id = $1 AND event_id = decode($2, 'hex')",
    community_id, id);
  return r.affected_rows() > 0;
}

std::vector<reasoned_entry> list_banned_events(pqxx::transaction_base& tx, int64_t community_id) {
  return entries(tx.exec_params(
    "SELECT encode(event_id, 'hex'), reason FROM community_banned_events "
    " WHERE community_id = $1 ORDER BY banned_at, event_id",
    community_id));
}

bool set_community_text(pqxx::transaction_base& tx, int64_t community_id, std::string_view field,
                        const std::string& value) {
  // The column comes from a fixed set, never from the caller's text.
  const char* sql = field == "name"          ? "UPDATE communities SET name = $2 WHERE id = $1"
                    : field == "description" ? "UPDATE communities SET description = $2 WHERE id = $1"
                    : field == "icon"        ? "UPDATE communities SET icon = $2 WHERE id = $1"
                                             : nullptr;
  if (!sql)
    return false;
  return tx.exec_params(sql, community_id, value).affected_rows() > 0;
}

void set_kind_rule(pqxx::transaction_base& tx, int64_t community_id, int32_t kind, bool allowed) {
  tx.exec_params(
    "INSERT INTO community_kinds (community_id, kind, allowed) VALUES ($1, $2, $3) "
    "ON CONFLICT (community_id, kind) DO UPDATE SET allowed = EXCLUDED.allowed",
    community_id, kind, allowed);
}

std::vector<int32_t> list_kinds(pqxx::transaction_base& tx, int64_t community_id, bool allowed) {
  auto r = tx.exec_params(
    "SELECT kind FROM community_kinds WHERE community_id = $1 AND allowed = $2 ORDER BY kind",
    community_id, allowed);
  std::vector<int32_t> out;
  for (const auto& row : r)
    out.push_back(row[0].as<int32_t>());
  return out;
}

result<bool> block_ip(pqxx::transaction_base& tx, int64_t community_id, const std::string& ip,
                      const std::string& reason, const std::string& by) {
  auto addr = canonical_ip(tx, ip);
  if (!addr)
    return addr.error();
  auto r = tx.exec_params(
    "INSERT INTO community_blocked_ips (community_id, ip, reason, blocked_by) "
    "VALUES ($1, $2::inet, $3, decode($4, 'hex')) "
    "ON CONFLICT (community_id, ip) DO UPDATE SET reason = EXCLUDED.reason",
    community_id, *addr, reason, nullable(by));
  return r.affected_rows() > 0;
}

result<bool> unblock_ip(pqxx::transaction_base& tx, int64_t community_id, const std::string& ip) {
  auto addr = canonical_ip(tx, ip);
  if (!addr)
    return addr.error();
  auto r = tx.exec_params(
    "DELETE FROM community_blocked_ips WHERE community_id = $1 AND ip = $2::inet", community_id,
    *addr);
  return r.affected_rows() > 0;
}

std::vector<reasoned_entry> list_blocked_ips(pqxx::transaction_base& tx, int64_t community_id) {
  return entries(tx.exec_params(
    "SELECT host(ip), reason FROM community_blocked_ips "
    " WHERE community_id = $1 ORDER BY blocked_at, ip",
    community_id));
}

std::map<int64_t, std::vector<std::string>> load_blocked_ips(pqxx::connection& conn) {
  pqxx::read_transaction tx(conn);
  std::map<int64_t, std::vector<std::string>> out;
  for (const auto& row : tx.exec("SELECT community_id, host(ip) FROM community_blocked_ips"))
    out[row[0].as<int64_t>()].push_back(row[1].as<std::string>());
  return out;
}

}  // namespace waggle::db
