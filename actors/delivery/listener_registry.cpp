#include "actors/delivery/listener_registry.hpp"

#include <pqxx/except>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "actors/support/log.hpp"
#include "db/membership_store.hpp"
#include "db/operator_outbox.hpp"

namespace waggle {

std::string json_error_body(std::string_view message) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w{buf};
  w.StartObject();
  w.Key("error");
  w.String(message.data(), static_cast<rapidjson::SizeType>(message.size()));
  w.EndObject();
  return {buf.GetString(), buf.GetSize()};
}

namespace {

listener_registration_reply json_error(uint16_t status, const std::string& why) {
  return {status, json_error_body(why)};
}

// Who may register in a community: what may read it. A closed community's
// events go only to its members, so a listener that is not one would learn
// them through its deliveries.
bool may_listen(pqxx::connection& conn, int64_t community_id, const std::string& listener) {
  auto access = db::read_community_access(conn, community_id, {listener});
  if (!access.exists)
    return false;
  if (!access.members.empty())
    return true;
  return access.policy == community_policy::open && !access.guests.empty();
}

}  // namespace

void listener_registry_state::init(ptr self_ptr, listener_registry_settings s, node_env e) {
  self = self_ptr;
  settings = std::move(s);
  env = std::move(e);
  session = std::make_unique<db::session>(settings.database_url, "listener-registry",
                                          std::vector<std::string>{}, log::session_report);
  if (settings.reap_interval.count() > 0)
    self->delayed_send(self, settings.reap_interval, listener_reap_tick{});
}

listener_registration_reply
listener_registry_state::on_request(const listener_registration_request& req) {
  std::vector<std::string> keys;
  std::string why;
  // The body first: a bad one is refused without touching the database.
  if (!req.list && !parse_listener_pubkeys(req.body, settings.max_pubkeys, keys, why))
    return json_error(400, "invalid: " + why);
  auto* conn = session->get();
  if (!conn)
    return json_error(503, "unavailable: database unavailable");
  try {
    if (!may_listen(*conn, req.community_id, req.listener))
      return json_error(403, "restricted: this listener is not a member of this community");
    rapidjson::StringBuffer buf;
    rapidjson::Writer<rapidjson::StringBuffer> w{buf};
    w.StartObject();
    if (req.list) {
      auto regs = db::list_listener_targets(*conn, req.community_id, req.listener);
      w.Key("pubkeys");
      w.StartArray();
      for (const auto& r : regs) {
        w.StartObject();
        w.Key("pubkey");
        w.String(r.target);
        w.Key("registered_at");
        w.Int64(r.registered_at);
        w.Key("expires_at");
        w.Int64(r.registered_at + settings.registration_ttl.count());
        w.EndObject();
      }
      w.EndArray();
    } else {
      auto n = db::register_listener_targets(*conn, req.community_id, req.listener, keys,
                                             settings.max_registrations);
      if (!n)
        return json_error(409, "rate-limited: a listener holds at most "
                                 + std::to_string(settings.max_registrations)
                                 + " registrations in a community; let some expire first");
      w.Key("registered");
      w.Uint64(*n);
    }
    w.EndObject();
    return {200, std::string{buf.GetString(), buf.GetSize()}};
  } catch (const pqxx::broken_connection&) {
    session->reset();
    return json_error(503, "unavailable: database unavailable");
  } catch (const std::exception& e) {
    log::error("listener_registry", "request failed", {{"error", e.what()}});
    return json_error(500, "error: registration failed");
  }
}

void listener_registry_state::on_reap() {
  if (settings.reap_interval.count() > 0)
    self->delayed_send(self, settings.reap_interval, listener_reap_tick{});
  auto* conn = session->get();
  if (!conn)
    return;
  try {
    auto regs = db::reap_listener_registrations(*conn, settings.registration_ttl);
    auto rows = db::reap_outbox(*conn, settings.outbox_retention);
    if (env.stats && rows > 0)
      env.stats->count_delivery("operator_listener", "expired", rows);
    if (regs > 0 || rows > 0)
      log::info("listener_registry", "reaped",
                {{"registrations", std::to_string(regs)}, {"outbox_rows", std::to_string(rows)}});
  } catch (const pqxx::broken_connection&) {
    session->reset();
  } catch (const std::exception& e) {
    log::error("listener_registry", "reap failed", {{"error", e.what()}});
  }
}

listener_registry_actor::behavior_type
listener_registry_actor_impl(listener_registry_state::ptr self, listener_registry_settings settings,
                             node_env env) {
  self->state.init(self, std::move(settings), std::move(env));
  return {
    [self](const listener_registration_request& req) { return self->state.on_request(req); },
    // -- timers -----------------------------------------------------------------
    [self](listener_reap_tick) { self->state.on_reap(); },
  };
}

}  // namespace waggle
