#include "actors/bus/caf_bus.hpp"

#include <algorithm>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/io/middleman.hpp>

#include "actors/bus/bus_check.hpp"
#include "actors/bus/caf_bus_registry.hpp"
#include "actors/support/log.hpp"

namespace waggle {

namespace {

constexpr std::string_view inbox_prefix = "_INBOX.";

template <class T>
std::string encode(caf::actor_system& sys, T& value) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  if (auto err = sink(value))
    throw std::runtime_error("cannot serialise a bus frame: " + sys.render(err));
  return std::string(buf.begin(), buf.end());
}

template <class T>
bool decode(caf::actor_system& sys, const std::string& body, T& value) {
  caf::binary_deserializer source{sys, body.data(), body.size()};
  return !source(value) && source.remaining() == 0;
}

// The node an inbox belongs to: "_INBOX.<node>.<run>.<n>" -> "<node>"
// (node ids have no dots).
std::string inbox_node(const std::string& subject) {
  if (subject.compare(0, inbox_prefix.size(), inbox_prefix) != 0)
    return {};
  auto dot = subject.find('.', inbox_prefix.size());
  if (dot == std::string::npos || dot == inbox_prefix.size())
    return {};
  return subject.substr(inbox_prefix.size(), dot - inbox_prefix.size());
}

}  // namespace

void configure_caf_bus(caf::actor_system_config& cfg, int32_t protocol_version) {
  cfg.load<caf::io::middleman>();
  cfg.set("middleman.app-identifiers",
          std::vector<std::string>{"waggle-bus-v" + std::to_string(protocol_version)});
  // A half-open link (a peer's host gone without a FIN) would otherwise
  // hold its window, and every publish queued behind it, until TCP gives
  // up after many minutes: BASP heartbeats let the middleman drop a link
  // that has been silent for five seconds, and the bus reconnects.
  cfg.set("middleman.heartbeat-interval", caf::timespan{std::chrono::seconds{1}});
  cfg.set("middleman.connection-timeout", caf::timespan{std::chrono::seconds{5}});
}

bool bus_valid_node_id(const std::string& id) {
  if (id.empty() || id.size() > 64)
    return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_';
  });
}

bool caf_bus_state::local_sender() const {
  const auto& sender = self->current_sender();
  return sender && sender->node() == self->node();
}

void caf_bus_state::init(ptr self_ptr, caf_bus_settings s, node_env e) {
  self = self_ptr;
  settings = std::move(s);
  env = std::move(e);
  if (env.stats)
    env.stats->bus.driver = "caf";
  requests.emplace(settings.node_id);
}

std::set<caf_bus_state::interest_key> caf_bus_state::interest() const {
  std::set<interest_key> out;
  for (const auto& subject : table.subjects()) {
    if (!table.plain(subject).empty())
      out.emplace(subject, "");
    for (const auto& group : table.groups(subject))
      out.emplace(subject, group);
  }
  return out;
}

bus_peer_frame caf_bus_state::interest_frame() const {
  bus_interest i;
  for (const auto& [subject, group] : interest()) {
    i.subjects.push_back(subject);
    i.groups.push_back(group);
  }
  return bus_peer_frame{settings.node_id, bus_frame_interest, encode(self->home_system(), i)};
}

void caf_bus_state::add_peer(const std::string& node_id, caf_bus_actor handle,
                             caf::node_id node) {
  if (!handle)
    return;
  if (auto old = peers.find(node_id); old != peers.end()) {
    if (old->second.node == node)
      return;
    // The registry's address now reaches another process under this id: the
    // node restarted (its old link's end may not have been seen yet).
    log::info("bus", "peer came back as a new process", {{"peer", node_id}});
    self->demonitor(old->second.handle.address());
    peers.erase(old);
  }
  if (peers.size() >= settings.max_peers) {
    if (env.stats)
      env.stats->bus.count_dropped("too_many_peers");
    return;
  }
  self->monitor(handle);
  auto& p = peers[node_id];
  p.handle = handle;
  p.node = node;
  if (auto k = known.find(node_id); k != known.end()) {
    k->second.backoff = std::chrono::milliseconds{0};
    if (k->second.pending && k->second.pending->first == node)
      p.wants = std::move(k->second.pending->second);
    k->second.pending.reset();
  }
  if (env.stats)
    env.stats->bus.peers = static_cast<int64_t>(peers.size());
  log::info("bus", "peer connected", {{"peer", node_id}});
  send_interest(node_id, handle);
}

void caf_bus_state::send_interest(const std::string& id, const caf_bus_actor& to) {
  // The answer is the peer's own interest: a link made by this node's
  // connect learns what the peer wants even if the peer's own frame came
  // before this node could tell who it was.
  self->request(to, settings.interest_timeout, interest_frame())
    .then([this, id, to](bus_peer_frame& reply) { take_reply(id, to, reply); },
          [](caf::error&) {});
}

void caf_bus_state::take_reply(const std::string& id, const caf_bus_actor& from,
                               bus_peer_frame& reply) {
  auto p = peers.find(id);
  if (p == peers.end() || p->second.handle != from || reply.kind != bus_frame_interest)
    return;
  if (auto wants = decode_interest(reply)) {
    p->second.wants = std::move(*wants);
    release();
  }
}

std::optional<std::set<caf_bus_state::interest_key>> caf_bus_state::decode_interest(
  const bus_peer_frame& frame) {
  bus_interest i;
  if (!decode(self->home_system(), frame.body, i) || i.subjects.size() != i.groups.size() ||
      i.subjects.size() > settings.max_interest) {
    if (env.stats)
      env.stats->bus.count_dropped("undecodable");
    return std::nullopt;
  }
  std::set<interest_key> wants;
  for (size_t k = 0; k < i.subjects.size(); ++k)
    if (bus_valid_name(i.subjects[k]) && (i.groups[k].empty() || bus_valid_name(i.groups[k])))
      wants.emplace(i.subjects[k], i.groups[k]);
  return wants;
}

void caf_bus_state::connect(known_peer& k) {
  k.connecting = true;
  auto id = k.info.node_id;
  auto mm = self->home_system().middleman().actor_handle();
  self->request(mm, settings.connect_timeout, caf::connect_atom::value, k.info.address,
                k.info.port)
    .then(
      [this, id](const caf::node_id& node, caf::strong_actor_ptr& ptr,
                 const std::set<std::string>& ifs) {
        auto k = known.find(id);
        if (k != known.end())
          k->second.connecting = false;
        // The handle is cast only after its interface proved to be ours.
        if (!ptr || ifs != self->home_system().message_types<caf_bus_actor>()) {
          if (env.stats)
            env.stats->bus.count_dropped("peer_interface");
          log::warn("bus", "refused a peer whose bus interface differs", {{"peer", id}});
          return;
        }
        add_peer(id, caf::actor_cast<caf_bus_actor>(ptr), node);
        release();
      },
      [this, id](caf::error& err) {
        auto k = known.find(id);
        if (k == known.end())
          return;
        k->second.connecting = false;
        k->second.backoff = std::clamp(k->second.backoff * 2, settings.reconnect_min,
                                       settings.reconnect_max);
        k->second.next_attempt = env.steady_now() + k->second.backoff;
        log::warn("bus", "cannot reach peer",
                  {{"peer", id}, {"error", self->home_system().render(err)}});
      });
}

void caf_bus_state::update_peers(bus_peers& live) {
  std::set<std::string> listed;
  auto now = env.steady_now();
  for (auto& info : live.live) {
    if (!bus_valid_node_id(info.node_id) || info.node_id == settings.node_id)
      continue;
    listed.insert(info.node_id);
    if (info.protocol_version != settings.protocol_version) {
      if (warned_versions.insert(info.node_id).second) {
        if (env.stats)
          env.stats->bus.count_dropped("peer_version");
        log::warn("bus", "refused a peer of another bus protocol version",
                  {{"peer", info.node_id}, {"version", std::to_string(info.protocol_version)}});
      }
      continue;
    }
    auto& k = known[info.node_id];
    const bool moved = k.info.address != info.address || k.info.port != info.port;
    k.info = info;
    // Connect to a node not linked yet, to one that re-registered at another
    // address (it restarted), or to learn whether a process claiming its id
    // is the one the registry names.
    const bool wanted = !peers.count(info.node_id) || moved || k.pending;
    if (wanted && !k.connecting && now >= k.next_attempt)
      connect(k);
  }
  // Gone from the registry (expired): forget it unless a link still stands.
  for (auto k = known.begin(); k != known.end();)
    if (!listed.count(k->first) && !peers.count(k->first) && !k->second.connecting)
      k = known.erase(k);
    else
      ++k;
}

void caf_bus_state::peer_down(const caf::actor_addr& who) {
  for (auto p = peers.begin(); p != peers.end();) {
    if (p->second.handle.address() != who) {
      ++p;
      continue;
    }
    log::warn("bus", "peer lost; reconnecting while the registry lists it", {{"peer", p->first}});
    if (auto k = known.find(p->first); k != known.end()) {
      k->second.backoff = settings.reconnect_min;
      k->second.next_attempt = env.steady_now() + k->second.backoff;
    }
    p = peers.erase(p);
  }
  if (env.stats)
    env.stats->bus.peers = static_cast<int64_t>(peers.size());
  release();  // what waited for the lost peer's window goes to the others
}

void caf_bus_state::deliver_here(const bus_message& msg, bool plain,
                                 const std::vector<std::string>& groups) {
  std::vector<bus_subscriber_actor> recipients;
  if (plain)
    recipients = table.plain(msg.subject);
  for (const auto& group : groups) {
    if (auto member = table.next_member(msg.subject, group))
      recipients.push_back(std::move(member));
    else if (env.stats)
      env.stats->bus.count_dropped("no_subscriber");
  }
  if (env.stats)
    env.stats->bus.delivered += recipients.size();
  for (auto& r : recipients)
    self->send(r, msg);
}

void caf_bus_state::route(bus_message msg) {
  if (auto owner = inbox_node(msg.subject); !owner.empty()) {
    if (owner == settings.node_id) {
      requests->answer(msg);
    } else if (auto p = peers.find(owner); p != peers.end()) {
      send_forward(p->first, p->second,
                   bus_forward{msg.subject, msg.payload, msg.reply_to, true, {}});
    } else if (env.stats) {
      env.stats->bus.count_dropped("no_route");
    }
    return;
  }
  // Each group's message goes to one node with members, in turn.
  std::map<std::string, std::vector<std::string>> groups_for;  // node -> groups ("" = here)
  std::set<std::string> group_names;
  for (const auto& g : table.groups(msg.subject))
    group_names.insert(g);
  for (const auto& [id, p] : peers)
    for (const auto& [subject, group] : p.wants)
      if (subject == msg.subject && !group.empty())
        group_names.insert(group);
  for (const auto& group : group_names) {
    std::vector<std::string> nodes;  // "" is this node
    auto here = table.groups(msg.subject);
    if (std::find(here.begin(), here.end(), group) != here.end())
      nodes.push_back("");
    for (const auto& [id, p] : peers)
      if (p.wants.count({msg.subject, group}))
        nodes.push_back(id);
    auto& turn = turns[{msg.subject, group}];
    groups_for[nodes[turn++ % nodes.size()]].push_back(group);
  }
  deliver_here(msg, true, groups_for[""]);
  for (auto& [id, p] : peers) {
    bool plain = p.wants.count({msg.subject, ""}) > 0;
    auto g = groups_for.find(id);
    if (!plain && g == groups_for.end())
      continue;
    send_forward(id, p,
                 bus_forward{msg.subject, msg.payload, msg.reply_to, plain,
                             g == groups_for.end() ? std::vector<std::string>{} : g->second});
  }
}

void caf_bus_state::send_forward(const std::string& id, peer& p, const bus_forward& f) {
  // Forwards need no answer (at most once); the sender names this node's
  // handle, which the receiver checks against the node id in the frame.
  self->send(p.handle, bus_peer_forward{settings.node_id, encode(self->home_system(), f)});
  ++p.sent;
  if (p.sent - p.confirmed >= settings.window / 4)
    sync(id, p);
}

void caf_bus_state::sync(const std::string& id, peer& p) {
  if (p.syncing)
    return;
  p.syncing = true;
  auto mark = p.sent;
  auto handle = p.handle;
  auto settle = [this, id, handle](std::optional<uint64_t> taken) {
    auto it = peers.find(id);
    if (it == peers.end() || it->second.handle != handle)
      return;  // gone or replaced: its down or replacement released the rest
    auto& q = it->second;
    q.syncing = false;
    if (taken)
      q.confirmed = std::max(q.confirmed, *taken);
    else
      log::warn("bus", "a peer did not confirm its forwards in time", {{"peer", id}});
    if (q.sent - q.confirmed >= settings.window / 4)
      sync(id, q);
    release();
  };
  self->request(p.handle, settings.sync_timeout,
                bus_peer_frame{settings.node_id, bus_frame_sync, {}})
    .then([settle, mark](bus_peer_frame&) { settle(mark); },
          [settle](caf::error&) { settle(std::nullopt); });
}

bool caf_bus_state::blocked(const bus_message& msg) const {
  auto owner = inbox_node(msg.subject);
  for (const auto& [id, p] : peers) {
    if (!p.full(settings.window))
      continue;
    if (!owner.empty() ? owner == id
                       : std::any_of(p.wants.begin(), p.wants.end(),
                                     [&](const auto& w) { return w.first == msg.subject; }))
      return true;
  }
  return false;
}

caf::result<bus_ack> caf_bus_state::route_or_hold(bus_message msg, bool answer) {
  if (held.empty() && !blocked(msg)) {
    route(std::move(msg));
    return bus_ack{};
  }
  // A peer is behind: this publisher waits (its ack comes when the message
  // leaves), in order behind what waits already, rather than queueing
  // without bound in the peer's link.
  if (held.size() >= settings.max_held)
    return bus_refuse(env, make_error(bus_errc::overloaded));
  held_message h{std::move(msg), std::nullopt};
  caf::result<bus_ack> out = bus_ack{};
  if (answer) {
    h.ack = self->make_response_promise<bus_ack>();
    out = *h.ack;
  }
  held.push_back(std::move(h));
  return out;
}

void caf_bus_state::release() {
  while (!held.empty() && !blocked(held.front().msg)) {
    auto h = std::move(held.front());
    held.pop_front();
    route(std::move(h.msg));
    if (h.ack)
      h.ack->deliver(bus_ack{});
  }
}

caf::result<bus_ack> caf_bus_state::publish(bus_publish& msg) {
  if (auto err = bus_check(env, msg))
    return err;
  if (env.stats)
    ++env.stats->bus.published;
  return route_or_hold(
    bus_message{std::move(msg.subject), std::move(msg.payload), std::move(msg.reply_to)}, true);
}

caf::result<bus_subscription> caf_bus_state::subscribe(bus_subscribe& sub) {
  if (auto err = bus_check(env, sub))
    return err;
  const auto current = interest();
  const bool is_new = !current.count({sub.subject, sub.group});
  // Peers take at most max_interest pairs from a node and drop a larger
  // set whole: a pair beyond it is refused here, not silently unheard.
  if (is_new && current.size() >= settings.max_interest)
    return bus_refuse(env, make_error(bus_errc::overloaded, "interest pairs at their limit"));
  if (!table.holds(sub.subscriber.address()))
    self->monitor(sub.subscriber);
  bus_subscription reply{table.add(sub.subject, sub.group, sub.subscriber)};
  if (!is_new || peers.empty())
    return reply;
  // Answer once every peer has the new interest (or the wait ran out), so
  // what they publish after this answer reaches the new subscriber.
  auto promise = self->make_response_promise<bus_subscription>();
  auto pending = std::make_shared<size_t>(peers.size());
  auto frame = interest_frame();
  for (const auto& [id, p] : peers)
    self->request(p.handle, settings.interest_timeout, frame)
      .then([this, id = id, to = p.handle, promise, pending,
             reply](bus_peer_frame& theirs) mutable {
              take_reply(id, to, theirs);
              if (--*pending == 0)
                promise.deliver(reply);
            },
            [promise, pending, reply](caf::error&) mutable {
              if (--*pending == 0)
                promise.deliver(reply);
            });
  return promise;
}

void caf_bus_state::after_unsubscribe(const bus_table::entry& gone) {
  if (interest().count({gone.subject, gone.group}))
    return;
  for (const auto& [id, p] : peers)
    send_interest(id, p.handle);
}

void caf_bus_state::unsubscribe(uint64_t id) {
  auto gone = table.remove(id);
  if (!gone)
    return;
  if (!table.holds(gone->subscriber.address()))
    self->demonitor(gone->subscriber.address());
  after_unsubscribe(*gone);
}

void caf_bus_state::subscriber_down(const caf::actor_addr& who) {
  for (auto& gone : table.remove_subscriber(who))
    after_unsubscribe(gone);
}

caf::result<bus_message> caf_bus_state::request(bus_request& req) {
  if (auto err = bus_check(env, req))
    return err;
  bool responders = table.wants(req.subject);
  for (const auto& [id, p] : peers)
    for (const auto& [subject, group] : p.wants)
      responders = responders || subject == req.subject;
  if (!responders)
    return make_error(bus_errc::no_responders, req.subject);
  if (requests->size() >= settings.max_requests)
    return bus_refuse(env, make_error(bus_errc::overloaded));
  auto promise = self->make_response_promise<bus_message>();
  auto inbox = requests->open(promise);
  self->delayed_send(self, std::chrono::milliseconds{req.timeout_ms}, bus_request_expired{inbox});
  if (env.stats)
    ++env.stats->bus.published;
  auto routed =
    route_or_hold(bus_message{std::move(req.subject), std::move(req.payload), inbox}, false);
  if (routed.flag == caf::rt_error)
    requests->fail(inbox, std::move(routed.err));
  return promise;
}

bus_peer_frame caf_bus_state::receive(bus_peer_frame& frame) {
  // A peer's frame is input from another process: checked, decoded whole,
  // and dropped (counted) when it is not what it claims to be.
  auto sender = caf::actor_cast<caf_bus_actor>(self->current_sender());
  if (!bus_valid_node_id(frame.node_id) || frame.node_id == settings.node_id || !sender) {
    if (env.stats)
      env.stats->bus.count_dropped("undecodable");
    return {};
  }
  if (frame.kind == bus_frame_sync)
    return {};  // answered after every forward the peer sent before it
  if (frame.kind != bus_frame_interest) {
    // Forwards come as bus_peer_forward; any other kind is not a frame.
    if (env.stats)
      env.stats->bus.count_dropped("undecodable");
    return {};
  }
  auto wants = decode_interest(frame);
  if (!wants)
    return {};
  // A node id is bound to the process this node reached by its own connect
  // to the registry's address for it, never to whoever claims it: interest
  // from any other process waits for that connect to agree.
  if (auto p = peers.find(frame.node_id); p != peers.end() && p->second.node == sender->node()) {
    p->second.wants = std::move(*wants);
    release();
    return interest_frame();
  }
  auto k = known.find(frame.node_id);
  if (k == known.end()) {
    // Not listed (yet): dropped; once listed, this node connects and the
    // answer to its own interest frame carries the peer's.
    if (env.stats)
      env.stats->bus.count_dropped("unknown_peer");
    return {};
  }
  k->second.pending.emplace(sender->node(), std::move(*wants));
  if (!k->second.connecting)
    connect(k->second);
  return interest_frame();
}

void caf_bus_state::receive(bus_peer_forward& frame) {
  auto& sys = self->home_system();
  auto sender = caf::actor_cast<caf_bus_actor>(self->current_sender());
  bus_forward f;
  if (!sender || !bus_valid_node_id(frame.node_id) || !decode(sys, frame.body, f) ||
      !bus_valid_name(f.subject) || f.payload.size() > bus_max_payload ||
      (!f.reply_to.empty() && !bus_valid_name(f.reply_to))) {
    if (env.stats)
      env.stats->bus.count_dropped("undecodable");
    return;
  }
  // A forward counts only from the process this node connected to under
  // that id: a peer cannot speak for another node it is not.
  if (auto p = peers.find(frame.node_id); p == peers.end() || p->second.node != sender->node()) {
    if (env.stats)
      env.stats->bus.count_dropped("unknown_peer");
    return;
  }
  bus_message msg{std::move(f.subject), std::move(f.payload), std::move(f.reply_to)};
  if (inbox_node(msg.subject) == settings.node_id) {
    requests->answer(msg);
    return;
  }
  deliver_here(msg, f.plain, f.groups);
}

namespace {

caf_bus_actor::behavior_type caf_bus_impl(caf_bus_state::ptr self, caf_bus_settings settings,
                                          node_env env) {
  self->state.init(self, std::move(settings), std::move(env));
  self->set_down_handler([self](caf::down_msg& down) {
    self->state.peer_down(down.source);
    self->state.subscriber_down(down.source);
  });
  // The facade is published: any process past the handshake can send it
  // anything its interface names. Only the peer frames may come from
  // another process; the rest is this node's own (and must name a sender,
  // since an anonymous message could have come from anywhere).
  auto remote = [self] {
    if (self->state.local_sender())
      return false;
    if (self->state.env.stats)
      self->state.env.stats->bus.count_dropped("remote_local_only");
    return true;
  };
  auto refused = [] { return make_error(bus_errc::unavailable, "local only"); };
  return {
    [self, remote, refused](bus_publish& msg) -> caf::result<bus_ack> {
      if (remote())
        return refused();
      return self->state.publish(msg);
    },
    [self, remote, refused](bus_subscribe& sub) -> caf::result<bus_subscription> {
      if (remote())
        return refused();
      return self->state.subscribe(sub);
    },
    [self, remote](bus_unsubscribe u) {
      if (!remote())
        self->state.unsubscribe(u.id);
    },
    [self, remote, refused](bus_request& req) -> caf::result<bus_message> {
      if (remote())
        return refused();
      return self->state.request(req);
    },
    [self](bus_peer_frame& frame) { return self->state.receive(frame); },
    [self](bus_peer_forward& frame) { self->state.receive(frame); },
    [self, remote](bus_peers& live) {
      if (!remote())
        self->state.update_peers(live);
    },
    [self, remote](bus_request_expired& e) {
      if (!remote())
        self->state.requests->expire(e.inbox);
    },
  };
}

}  // namespace

caf::expected<caf_bus_actor> spawn_caf_bus(caf::actor_system& sys, caf_bus_settings settings,
                                           node_env env) {
  if (!bus_valid_node_id(settings.node_id))
    return make_error(bus_errc::bad_subject, "a node id is 1-64 of [A-Za-z0-9_-]");
  auto facade = sys.spawn(caf_bus_impl, settings, env.for_actor("bus"));
  auto port = sys.middleman().publish(facade, settings.port, settings.address.c_str(), true);
  if (!port) {
    caf::anon_send_exit(facade, caf::exit_reason::user_shutdown);
    return make_error(bus_errc::unavailable, "cannot publish the bus on " + settings.address +
                                               ":" + std::to_string(settings.port) + ": " +
                                               sys.render(port.error()));
  }
  settings.port = *port;
  sys.spawn<caf::detached>(caf_bus_registry_impl, settings, facade,
                           env.for_actor("bus-registry"));
  return facade;
}

}  // namespace waggle
