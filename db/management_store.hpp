#pragma once

// The SQL of NIP-86 management (docs/management.md): bans of keys and
// events, kind rules, blocked IPs and a community's NIP-11 text. Every
// function runs inside the caller's transaction, so the management actor
// audits a call in the same transaction as its change. Arguments are
// validated by the caller (hex64 keys and ids, kind range); what only the
// database can judge (an inet) is checked here.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <pqxx/connection>
#include <pqxx/transaction>

#include "messages/proto/status.hpp"

namespace waggle::db {

struct reasoned_entry {
  std::string key;  // hex pubkey or event id, or an IP address
  std::string reason;
};

// Bans a key and soft-removes its membership (refused if it is the last owner).
result<bool> ban_pubkey(pqxx::transaction_base& tx, int64_t community_id,
                        const std::string& pubkey, const std::string& reason,
                        const std::string& by);
bool unban_pubkey(pqxx::transaction_base& tx, int64_t community_id, const std::string& pubkey);
std::vector<reasoned_entry> list_banned_pubkeys(pqxx::transaction_base& tx, int64_t community_id);
// Active members; the reason is their role.
std::vector<reasoned_entry> list_allowed_pubkeys(pqxx::transaction_base& tx, int64_t community_id);

// Bans an event id (a resend is refused) and soft-deletes the stored event.
bool ban_event(pqxx::transaction_base& tx, int64_t community_id, const std::string& id,
               const std::string& reason, const std::string& by);
// Removes the ban; a deleted event stays deleted.
bool unban_event(pqxx::transaction_base& tx, int64_t community_id, const std::string& id);
std::vector<reasoned_entry> list_banned_events(pqxx::transaction_base& tx, int64_t community_id);

// `field`: name, description or icon.
bool set_community_text(pqxx::transaction_base& tx, int64_t community_id, std::string_view field,
                        const std::string& value);

// allowed=true: allowkind, false: disallowkind (one row per kind, upserted).
void set_kind_rule(pqxx::transaction_base& tx, int64_t community_id, int32_t kind, bool allowed);
std::vector<int32_t> list_kinds(pqxx::transaction_base& tx, int64_t community_id, bool allowed);

// One address (IPv4 or IPv6, no prefix); ec::invalid when it is not one.
// IPv4-mapped IPv6 is stored as IPv4, the way the gateway reports peers.
result<bool> block_ip(pqxx::transaction_base& tx, int64_t community_id, const std::string& ip,
                      const std::string& reason, const std::string& by);
result<bool> unblock_ip(pqxx::transaction_base& tx, int64_t community_id, const std::string& ip);
std::vector<reasoned_entry> list_blocked_ips(pqxx::transaction_base& tx, int64_t community_id);
// Every community's blocked addresses, for the directory's snapshot.
std::map<int64_t, std::vector<std::string>> load_blocked_ips(pqxx::connection& conn);

}  // namespace waggle::db
