#include "actors/node/community_cli.hpp"

#include <iostream>
#include <optional>

#include <pqxx/connection>
#include <pqxx/transaction>

#include "db/community_store.hpp"
#include "db/management_store.hpp"
#include "db/membership_store.hpp"
#include "messages/proto/event.hpp"

namespace waggle {

namespace {

int usage_error(const std::string& what) {
  std::cerr << "waggle community: " << what << "\n"
            << "usage:\n"
               "  waggle community member add HOST PUBKEY [--role owner|admin|member]\n"
               "  waggle community member remove HOST PUBKEY\n"
               "  waggle community member list HOST\n"
               "  waggle community admin add|remove HOST PUBKEY\n"
               "  waggle community admin list HOST\n"
               "  waggle community policy HOST [open|closed|invite]\n";
  return 2;
}

std::optional<community> find(pqxx::connection& conn, const std::string& host) {
  auto wanted = normalize_host(host);
  for (auto& c : db::load_communities(conn))
    if (c.host == wanted)
      return c;
  return std::nullopt;
}

std::string params_json(const std::vector<std::string>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i)
    out += (i ? ",\"" : "\"") + values[i] + "\"";  // hex, hosts, role and policy names only
  return out + "]";
}

// Runs one change with its audit row in one transaction; `change` returns
// the refusal ("" when done).
template <class Fn>
int audited(pqxx::connection& conn, const community& c, const std::string& method,
            const std::vector<std::string>& params, Fn&& change) {
  pqxx::work tx(conn);
  std::string refusal = change(tx);
  db::audit(tx, c.id, {}, "cli", method, params_json(params), refusal.empty(), refusal);
  tx.commit();
  if (!refusal.empty()) {
    std::cerr << "waggle community " << method << ": " << refusal << "\n";
    return 1;
  }
  return 0;
}

int list(pqxx::connection& conn, const community& c, bool admins_only) {
  for (const auto& m : db::list_members(conn, c.id))
    if (!admins_only || m.role != member_role::member)
      std::cout << m.pubkey << '\t' << name_of(m.role) << '\n';
  return 0;
}

}  // namespace

int run_community_admin(const std::string& verb, std::vector<std::string> args,
                        const std::string& database_url) {
  std::string role_text = "member";
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--role" && i + 1 < args.size()) {
      role_text = args[i + 1];
      args.erase(args.begin() + i, args.begin() + i + 2);
      break;
    }
  }
  auto role = parse_member_role(role_text);
  if (!role)
    return usage_error("--role is owner, admin or member");
  std::string action;
  if (verb != "policy") {
    if (args.empty())
      return usage_error("missing action");
    action = args.front();
    args.erase(args.begin());
  }
  if (args.empty())
    return usage_error("missing HOST");
  const std::string host = args.front();
  args.erase(args.begin());
  const bool takes_key = action == "add" || action == "remove";
  if (takes_key && args.size() != 1)
    return usage_error(verb + " " + action + " takes HOST PUBKEY");
  if (takes_key && !proto::is_lower_hex(args[0], 64))
    return usage_error("PUBKEY must be 64 lowercase hex characters: " + args[0]);
  if (verb == "policy" && args.size() > 1)
    return usage_error("policy takes HOST [open|closed|invite]");
  if (verb == "policy" && args.size() == 1 && !parse_community_policy(args[0]))
    return usage_error("policy is open, closed or invite");

  pqxx::connection conn{database_url};
  auto c = find(conn, host);
  if (!c) {
    std::cerr << "waggle community: unknown community host " << host << "\n";
    return 1;
  }
  if (verb == "policy") {
    if (args.empty()) {
      std::cout << name_of(c->policy) << '\n';
      return 0;
    }
    return audited(conn, *c, "policy", {args[0]}, [&](pqxx::work& tx) {
      db::set_policy(tx, c->id, *parse_community_policy(args[0]));
      return std::string{};
    });
  }
  if (action == "list" && args.empty() && (verb == "member" || verb == "admin"))
    return list(conn, *c, verb == "admin");
  if (!takes_key || (verb != "member" && verb != "admin"))
    return usage_error("unknown command " + verb + " " + action);
  const auto& key = args[0];
  const std::string method = verb + " " + action;
  if (action == "add") {
    auto wanted = verb == "admin" ? member_role::admin : *role;
    return audited(conn, *c, method, {key, std::string(name_of(wanted))}, [&](pqxx::work& tx) {
      db::add_member(tx, c->id, key, wanted, {});
      return std::string{};
    });
  }
  if (verb == "admin")  // back to a plain member
    return audited(conn, *c, method, {key}, [&](pqxx::work& tx) -> std::string {
      auto current = db::role_of(tx, c->id, key);
      if (current != member_role::admin)
        return "not an admin of this community";
      db::add_member(tx, c->id, key, member_role::member, {});
      return {};
    });
  return audited(conn, *c, method, {key}, [&](pqxx::work& tx) -> std::string {
    auto removed = db::remove_member(tx, c->id, key, {});
    if (!removed)
      return removed.error().message();
    return *removed ? std::string{} : "not a member of this community";
  });
}

}  // namespace waggle
