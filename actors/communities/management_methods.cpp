#include "actors/communities/management_methods.hpp"

#include <functional>
#include <map>
#include <optional>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "db/management_store.hpp"
#include "db/membership_store.hpp"
#include "messages/proto/event.hpp"

namespace waggle {

namespace {

using writer = rapidjson::Writer<rapidjson::StringBuffer>;

constexpr size_t max_reason = 1000;

struct call {
  pqxx::transaction_base& tx;
  const management_caller& who;
  const rapidjson::Value& params;
  std::string error;

  // Params are positional; each accessor records the first problem.
  std::optional<std::string> hex64(size_t i, const char* what) {
    if (i >= params.Size() || !params[i].IsString())
      return fail(std::string("invalid: param ") + std::to_string(i) + " must be a " + what);
    std::string v{params[i].GetString(), params[i].GetStringLength()};
    if (!proto::is_lower_hex(v, 64))
      return fail(std::string("invalid: ") + what + " must be 64 lowercase hex characters");
    return v;
  }
  std::optional<std::string> text(size_t i, const char* what, size_t max, bool optional) {
    if (i >= params.Size()) {
      if (optional)
        return std::string{};
      return fail(std::string("invalid: param ") + std::to_string(i) + " (" + what + ") is missing");
    }
    if (!params[i].IsString())
      return fail(std::string("invalid: ") + what + " must be a string");
    std::string v{params[i].GetString(), params[i].GetStringLength()};
    if (v.size() > max)
      return fail(std::string("invalid: ") + what + " is longer than " + std::to_string(max)
                  + " bytes");
    return v;
  }
  std::optional<int32_t> kind(size_t i) {
    if (i >= params.Size() || !params[i].IsInt64() || params[i].GetInt64() < 0
        || params[i].GetInt64() > 65535) {
      fail("invalid: kind must be an integer from 0 to 65535");
      return std::nullopt;
    }
    return static_cast<int32_t>(params[i].GetInt64());
  }
  std::nullopt_t fail(std::string why) {
    if (error.empty())
      error = std::move(why);
    return std::nullopt;
  }
};

std::string json_true() { return "true"; }

std::string entries_json(const std::vector<db::reasoned_entry>& list, const char* key) {
  rapidjson::StringBuffer buf;
  writer w{buf};
  w.StartArray();
  for (const auto& e : list) {
    w.StartObject();
    w.Key(key);
    w.String(e.key.c_str());
    w.Key("reason");
    w.String(e.reason.c_str());
    w.EndObject();
  }
  w.EndArray();
  return {buf.GetString(), buf.GetSize()};
}

std::string kinds_json(const std::vector<int32_t>& kinds) {
  std::string out = "[";
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (i)
      out += ',';
    out += std::to_string(kinds[i]);
  }
  out += ']';
  return out;
}

template <class T>
method_outcome from(const result<T>& r, std::string json = json_true()) {
  if (!r)
    return {false, r.error().message(), {}, {}};
  return {true, {}, std::move(json), {}};
}

// Admins manage members; only an owner (or an operator) may take an owner
// out, so an admin cannot seize a community by removing its owners.
std::optional<method_outcome> owner_protected(call& c, const std::string& target) {
  auto role = db::role_of(c.tx, c.who.community_id, target);
  if (role && *role == member_role::owner && !c.who.owner_rights)
    return method_outcome{false, "restricted: only an owner may remove or ban an owner", {}, {}};
  return std::nullopt;
}

using handler = std::function<method_outcome(call&)>;

method_outcome text_change(call& c, std::string_view field, size_t max) {
  auto v = c.text(0, field == "name" ? "name" : field == "icon" ? "icon URL" : "description",
                  max, false);
  if (!v)
    return {false, c.error, {}, {}};
  if (field == "icon" && !v->empty() && v->rfind("https://", 0) != 0
      && v->rfind("http://", 0) != 0)
    return {false, "invalid: icon must be an http(s) URL", {}, {}};
  db::set_community_text(c.tx, c.who.community_id, field, *v);
  return {true, {}, json_true(), {}};
}

const std::map<std::string_view, handler>& handlers() {
  static const std::map<std::string_view, handler> all = {
    {"supportedmethods",
     [](call&) -> method_outcome {
       std::string out = "[";
       bool first = true;
       for (auto m : management_methods()) {
         out += (first ? "\"" : ",\"") + std::string(m) + "\"";
         first = false;
       }
       return {true, {}, out + "]", {}};
     }},
    {"banpubkey",
     [](call& c) -> method_outcome {
       auto pk = c.hex64(0, "pubkey");
       auto reason = c.text(1, "reason", max_reason, true);
       if (!pk || !reason)
         return {false, c.error, {}, {}};
       if (auto refused = owner_protected(c, *pk))
         return *refused;
       auto out = from(db::ban_pubkey(c.tx, c.who.community_id, *pk, *reason, c.who.pubkey));
       if (out.ok)
         out.revoked = *pk;
       return out;
     }},
    {"unbanpubkey",
     [](call& c) -> method_outcome {
       auto pk = c.hex64(0, "pubkey");
       if (!pk)
         return {false, c.error, {}, {}};
       db::unban_pubkey(c.tx, c.who.community_id, *pk);
       return {true, {}, json_true(), {}};
     }},
    {"listbannedpubkeys",
     [](call& c) -> method_outcome {
       return {true, {}, entries_json(db::list_banned_pubkeys(c.tx, c.who.community_id), "pubkey"), {}};
     }},
    {"allowpubkey",
     [](call& c) -> method_outcome {
       auto pk = c.hex64(0, "pubkey");
       auto reason = c.text(1, "reason", max_reason, true);
       if (!pk || !reason)
         return {false, c.error, {}, {}};
       // An owner or admin keeps the role: allowpubkey only lets a key in.
       if (!db::role_of(c.tx, c.who.community_id, *pk))
         db::add_member(c.tx, c.who.community_id, *pk, member_role::member, c.who.pubkey);
       return {true, {}, json_true(), {}};
     }},
    {"unallowpubkey",
     [](call& c) -> method_outcome {
       auto pk = c.hex64(0, "pubkey");
       if (!pk)
         return {false, c.error, {}, {}};
       if (auto refused = owner_protected(c, *pk))
         return *refused;
       auto out = from(db::remove_member(c.tx, c.who.community_id, *pk, c.who.pubkey));
       if (out.ok)
         out.revoked = *pk;
       return out;
     }},
    {"listallowedpubkeys",
     [](call& c) -> method_outcome {
       return {true, {}, entries_json(db::list_allowed_pubkeys(c.tx, c.who.community_id), "pubkey"), {}};
     }},
    {"banevent",
     [](call& c) -> method_outcome {
       auto id = c.hex64(0, "event id");
       auto reason = c.text(1, "reason", max_reason, true);
       if (!id || !reason)
         return {false, c.error, {}, {}};
       db::ban_event(c.tx, c.who.community_id, *id, *reason, c.who.pubkey);
       return {true, {}, json_true(), {}};
     }},
    {"unbanevent",
     [](call& c) -> method_outcome {
       auto id = c.hex64(0, "event id");
       if (!id)
         return {false, c.error, {}, {}};
       db::unban_event(c.tx, c.who.community_id, *id);
       return {true, {}, json_true(), {}};
     }},
    {"listbannedevents",
     [](call& c) -> method_outcome {
       return {true, {}, entries_json(db::list_banned_events(c.tx, c.who.community_id), "id"), {}};
     }},
    {"changerelayname", [](call& c) { return text_change(c, "name", 200); }},
    {"changerelaydescription", [](call& c) { return text_change(c, "description", 4000); }},
    {"changerelayicon", [](call& c) { return text_change(c, "icon", 2000); }},
    {"allowkind",
     [](call& c) -> method_outcome {
       auto k = c.kind(0);
       if (!k)
         return {false, c.error, {}, {}};
       db::set_kind_rule(c.tx, c.who.community_id, *k, true);
       return {true, {}, json_true(), {}};
     }},
    {"disallowkind",
     [](call& c) -> method_outcome {
       auto k = c.kind(0);
       if (!k)
         return {false, c.error, {}, {}};
       db::set_kind_rule(c.tx, c.who.community_id, *k, false);
       return {true, {}, json_true(), {}};
     }},
    {"listallowedkinds",
     [](call& c) -> method_outcome {
       return {true, {}, kinds_json(db::list_kinds(c.tx, c.who.community_id, true)), {}};
     }},
    {"listdisallowedkinds",
     [](call& c) -> method_outcome {
       return {true, {}, kinds_json(db::list_kinds(c.tx, c.who.community_id, false)), {}};
     }},
    {"blockip",
     [](call& c) -> method_outcome {
       auto ip = c.text(0, "ip", 64, false);
       auto reason = c.text(1, "reason", max_reason, true);
       if (!ip || !reason)
         return {false, c.error, {}, {}};
       return from(db::block_ip(c.tx, c.who.community_id, *ip, *reason, c.who.pubkey));
     }},
    {"unblockip",
     [](call& c) -> method_outcome {
       auto ip = c.text(0, "ip", 64, false);
       if (!ip)
         return {false, c.error, {}, {}};
       return from(db::unblock_ip(c.tx, c.who.community_id, *ip));
     }},
    {"listblockedips",
     [](call& c) -> method_outcome {
       return {true, {}, entries_json(db::list_blocked_ips(c.tx, c.who.community_id), "ip"), {}};
     }},
  };
  return all;
}

}  // namespace

const std::vector<std::string_view>& management_methods() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> out;
    for (const auto& [name, _] : handlers())
      out.push_back(name);
    return out;
  }();
  return names;
}

method_outcome run_management_method(pqxx::transaction_base& tx, const management_caller& who,
                                     std::string_view method, const rapidjson::Value& params) {
  auto it = handlers().find(method);
  if (it == handlers().end())
    return {false, "invalid: unknown method " + std::string(method), {}, {}};
  call c{tx, who, params, {}};
  return it->second(c);
}

}  // namespace waggle
