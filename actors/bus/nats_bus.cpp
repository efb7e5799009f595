#include "actors/bus/nats_bus.hpp"

#include <algorithm>

#include "actors/bus/bus_check.hpp"
#include "actors/bus/caf_bus_settings.hpp"
#include "actors/bus/nats_subject.hpp"
#include "actors/support/log.hpp"

namespace waggle {

namespace {

// Carries the connection into the facade: spawn arguments are copied, and
// the facade takes it out, so that it ends with the facade's state.
struct nats_client_box {
  std::unique_ptr<nats_client> client;
};

bool live(const bus_table& table, const std::string& subject, const std::string& group) {
  if (group.empty())
    return !table.plain(subject).empty();
  auto groups = table.groups(subject);
  return std::find(groups.begin(), groups.end(), group) != groups.end();
}

}  // namespace

void nats_bus_state::init(ptr self_ptr, nats_bus_settings s, node_env e,
                          std::unique_ptr<nats_client> c) {
  self = self_ptr;
  settings = std::move(s);
  env = std::move(e);
  client = std::move(c);
  if (env.stats) {
    env.stats->bus.driver = "nats";
    env.stats->bus.peers = 1;
  }
  requests.emplace(settings.node_id);
  client->attach(caf::actor_cast<caf::strong_actor_ptr>(self));
  // Every inbox of this run in one subscription: "_INBOX.<node>.<run>.*"
  // (the inbox number is one token of digits).
  const auto& prefix = requests->prefix();
  auto sid = client->subscribe(nats_subject(prefix.substr(0, prefix.size() - 1)) + ".*", "");
  if (sid)
    inbox_sid = *sid;
  else
    log::error("bus", "cannot subscribe to this node's NATS inboxes: requests will be refused",
               {{"error", to_string(sid.error())}});
  if (auto err = client->flush())
    log::warn("bus", "the NATS server did not confirm the inbox subscription",
              {{"error", to_string(err)}});
}

caf::result<bus_ack> nats_bus_state::publish(bus_publish& msg) {
  if (auto err = bus_check(env, msg))
    return err;
  auto reply = msg.reply_to.empty() ? std::string{} : nats_subject(msg.reply_to);
  if (auto err = client->publish(nats_subject(msg.subject), reply, msg.payload))
    return bus_refuse(env, std::move(err));
  if (env.stats)
    ++env.stats->bus.published;
  return bus_ack{++published};
}

caf::result<bus_subscription> nats_bus_state::subscribe(bus_subscribe& sub) {
  if (auto err = bus_check(env, sub))
    return err;
  // While reconnecting, a subscribe would be answered before the server
  // has it: refused, as the PostgreSQL driver refuses when its database is down.
  if (!client->connected())
    return bus_refuse(env, make_error(bus_errc::unavailable, "not connected to NATS"));
  key k{sub.subject, sub.group};
  std::optional<uint32_t> joined;
  int64_t sid = 0;
  if (auto found = by_key.find(k); found != by_key.end()) {
    sid = found->second;
    // Shared with earlier subscribers. After the round trip, every message
    // published before this subscribe began has been read from the server
    // (a publish of this node's went out before the PING; the server
    // answers the PING after what it sent before): those are not this
    // subscriber's, though they may still be on their way to the facade.
    if (auto err = client->flush())
      return bus_refuse(env, std::move(err));
    joined = client->position(sid);
  } else {
    auto made =
      client->subscribe(nats_subject(sub.subject), sub.group.empty() ? "" : nats_queue(sub.group));
    if (!made)
      return bus_refuse(env, std::move(made.error()));
    // The server has the subscription before the answer: what anyone
    // publishes after the answer reaches it.
    if (auto err = client->flush()) {
      client->unsubscribe(*made);
      return bus_refuse(env, std::move(err));
    }
    sid = *made;
    by_key.emplace(k, sid);
    subs.emplace(sid, shared_sub{sub.subject, sub.group, {}});
  }
  if (!table.holds(sub.subscriber.address()))
    self->monitor(sub.subscriber);
  auto id = table.add(std::move(sub.subject), std::move(sub.group), std::move(sub.subscriber));
  if (joined)
    subs[sid].joined_at[id] = *joined;
  return bus_subscription{id};
}

void nats_bus_state::release(const bus_table::entry& gone) {
  auto k = by_key.find({gone.subject, gone.group});
  if (k == by_key.end())
    return;
  auto sid = k->second;
  subs[sid].joined_at.erase(gone.id);
  if (live(table, gone.subject, gone.group))
    return;
  // The last local subscriber of the pair: the server stops sending it
  // (what is on its way is dropped here: its id is no longer known).
  client->unsubscribe(sid);
  subs.erase(sid);
  by_key.erase(k);
}

void nats_bus_state::unsubscribe(uint64_t id) {
  auto gone = table.remove(id);
  if (!gone)
    return;
  if (!table.holds(gone->subscriber.address()))
    self->demonitor(gone->subscriber.address());
  release(*gone);
}

void nats_bus_state::subscriber_down(const caf::actor_addr& who) {
  for (auto& gone : table.remove_subscriber(who))
    release(gone);
}

caf::result<bus_message> nats_bus_state::request(bus_request& req) {
  if (auto err = bus_check(env, req))
    return err;
  if (requests->size() >= settings.max_requests)
    return bus_refuse(env, make_error(bus_errc::overloaded, "open requests at their limit"));
  if (inbox_sid == 0)
    return bus_refuse(env, make_error(bus_errc::unavailable, "no NATS inbox subscription"));
  auto promise = self->make_response_promise<bus_message>();
  auto inbox = requests->open(promise);
  asked.emplace(inbox, req.subject);
  self->delayed_send(self, std::chrono::milliseconds{req.timeout_ms}, bus_request_expired{inbox});
  // With a reply subject, a NATS 2.2+ server answers at once with a "no
  // responders" status when nobody subscribes to the subject.
  if (auto err = client->publish(nats_subject(req.subject), nats_subject(inbox), req.payload)) {
    requests->fail(inbox, bus_refuse(env, std::move(err)));
    asked.erase(inbox);
  } else if (env.stats) {
    ++env.stats->bus.published;
  }
  return promise;
}

void nats_bus_state::expired(const std::string& inbox) {
  requests->expire(inbox);
  asked.erase(inbox);
}

void nats_bus_state::answer(nats_delivery& d) {
  auto inbox = d.msg.subject;
  auto a = asked.find(inbox);
  if (a == asked.end())
    return;  // answered, expired, or not this run's: late replies are dropped
  if (d.no_responders)
    requests->fail(inbox, make_error(bus_errc::no_responders, a->second));
  else
    requests->answer(d.msg);
  asked.erase(a);
}

void nats_bus_state::lag(shared_sub& sh, uint64_t missed) {
  std::vector<bus_subscriber_actor> to;
  if (sh.group.empty())
    to = table.plain(sh.subject);
  else if (auto m = table.next_member(sh.subject, sh.group))
    to.push_back(std::move(m));
  for (auto& r : to)
    self->send(r, bus_lagged{sh.subject, missed});
  if (env.stats)
    env.stats->bus.lagged += to.size();
}

void nats_bus_state::receive(nats_delivery& d) {
  client->taken(d.msg.payload.size());
  if (d.sid == inbox_sid) {
    answer(d);
    return;
  }
  // A status message (no responders) sent to a reply subject someone here
  // subscribes to as a plain subject: the server's, not a message.
  if (d.no_responders)
    return;
  auto s = subs.find(d.sid);
  if (s == subs.end())
    return;  // unsubscribed since it was read
  auto& sh = s->second;
  // Joiners whose position this message is past take part from now on.
  for (auto j = sh.joined_at.begin(); j != sh.joined_at.end();)
    j = static_cast<int32_t>(d.seq - j->second) > 0 ? sh.joined_at.erase(j) : std::next(j);
  if (d.missed > 0)
    lag(sh, d.missed);
  auto accept = [&sh](uint64_t id) { return sh.joined_at.count(id) == 0; };
  std::vector<bus_subscriber_actor> to;
  if (sh.group.empty())
    to = table.plain(sh.subject, accept);
  else if (auto member = table.next_member(sh.subject, sh.group, accept))
    to.push_back(std::move(member));
  else if (env.stats)
    env.stats->bus.count_dropped("no_subscriber");
  if (env.stats)
    env.stats->bus.delivered += to.size();
  for (auto& r : to)
    self->send(r, d.msg);
}

void nats_bus_state::link(nats_link_event& e) {
  if (!e.error.empty())
    log::warn("bus", "NATS reports an error", {{"error", e.error}});
  if (e.connected == connected)
    return;
  connected = e.connected;
  if (env.stats)
    env.stats->bus.peers = connected ? 1 : 0;
  if (!connected) {
    log::warn("bus", "NATS connection lost; reconnecting");
    return;
  }
  log::info("bus", "NATS connection back; libnats has subscribed again");
  if (client->max_payload() < static_cast<int64_t>(bus_max_payload))
    log::error("bus", "this NATS server takes less than a bus payload: larger messages are refused",
               {{"max_payload", std::to_string(client->max_payload())}});
  // What was published while the link was down is gone (at most once):
  // every subscriber hears that it may have missed messages.
  for (auto& [sid, sh] : subs)
    lag(sh, 0);
}

namespace {

nats_bus_actor::behavior_type nats_bus_impl(nats_bus_state::ptr self, nats_bus_settings settings,
                                            node_env env, std::shared_ptr<nats_client_box> box) {
  self->state.init(self, std::move(settings), std::move(env), std::move(box->client));
  self->set_down_handler([self](caf::down_msg& down) { self->state.subscriber_down(down.source); });
  return {
    [self](bus_publish& msg) { return self->state.publish(msg); },
    [self](bus_subscribe& sub) { return self->state.subscribe(sub); },
    [self](bus_unsubscribe u) { self->state.unsubscribe(u.id); },
    [self](bus_request& req) { return self->state.request(req); },
    [self](bus_request_expired& e) { self->state.expired(e.inbox); },
    [self](nats_delivery& d) { self->state.receive(d); },
    [self](nats_link_event& e) { self->state.link(e); },
  };
}

}  // namespace

caf::expected<nats_bus_actor> spawn_nats_bus(caf::actor_system& sys, nats_bus_settings settings,
                                             node_env env) {
  if (!bus_valid_node_id(settings.node_id))
    return make_error(bus_errc::bad_subject, "a node id is 1-64 of [A-Za-z0-9_-]");
  auto client = nats_client::connect(settings, env.stats);
  if (!client)
    return std::move(client.error());
  auto box = std::make_shared<nats_client_box>();
  box->client = std::move(*client);
  return sys.spawn<caf::detached>(nats_bus_impl, std::move(settings), env.for_actor("bus"), box);
}

}  // namespace waggle
