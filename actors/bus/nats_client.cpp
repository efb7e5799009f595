#include "actors/bus/nats_client.hpp"

#include <algorithm>
#include <map>
#include <mutex>

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>
#include <caf/actor_control_block.hpp>
#include <nats/nats.h>

#include "actors/bus/nats_subject.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

namespace {

// What libnats's threads share with the facade. Callbacks hold it through
// heap-held shared pointers that libnats gives back to them (a
// subscription's until its completion callback, the connection's until its
// closed callback), so it outlives every callback whatever libnats does
// after the facade is gone.
struct nats_gate {
  std::mutex mtx;
  bool open = true;
  caf::weak_actor_ptr facade;
  std::shared_ptr<metrics> stats;
  std::map<int64_t, uint64_t> missed;       // by sid: dropped since its last delivery
  std::map<int64_t, int64_t> lib_dropped;  // by sid: libnats's own drop count seen
  size_t in_flight = 0;
  size_t in_flight_bytes = 0;
  size_t max_in_flight = 0;
  size_t max_in_flight_bytes = 0;
  int64_t reconnect_min_ms = 100;
  int64_t reconnect_max_ms = 2000;

  template <class Message>
  void send_locked(Message&& msg) {
    if (!open)
      return;
    if (auto ptr = facade.lock())
      caf::anon_send(caf::actor_cast<nats_bus_actor>(ptr), std::forward<Message>(msg));
  }
};
using gate_ptr = std::shared_ptr<nats_gate>;

nats_gate& gate_of(void* closure) {
  return **static_cast<gate_ptr*>(closure);
}

void release_gate(void* closure) {
  delete static_cast<gate_ptr*>(closure);
}

void on_message(natsConnection*, natsSubscription* sub, natsMsg* m, void* closure) {
  auto& g = gate_of(closure);
  int64_t delivered = 0;
  natsSubscription_GetDelivered(sub, &delivered);
  nats_delivery d;
  d.sid = natsSubscription_GetID(sub);
  d.seq = static_cast<uint32_t>(delivered);
  d.no_responders = natsMsg_IsNoResponders(m);
  auto subject = bus_subject_of(natsMsg_GetSubject(m) ? natsMsg_GetSubject(m) : "");
  const char* reply = natsMsg_GetReply(m);
  std::optional<std::string> reply_to = std::string{};
  if (reply && *reply)
    reply_to = bus_subject_of(reply);
  if (auto len = natsMsg_GetDataLength(m); len > 0)
    d.msg.payload.assign(natsMsg_GetData(m), static_cast<size_t>(len));
  natsMsg_Destroy(m);
  if (!subject || !reply_to) {
    if (g.stats)
      g.stats->bus.count_dropped("undecodable");
    return;
  }
  d.msg.subject = std::move(*subject);
  d.msg.reply_to = std::move(*reply_to);
  auto bytes = d.msg.payload.size();
  std::lock_guard guard{g.mtx};
  // The facade is behind: drop here rather than queue without bound in its
  // mailbox; its subscribers hear of the gap with the next message.
  if (g.in_flight >= g.max_in_flight || g.in_flight_bytes + bytes > g.max_in_flight_bytes) {
    ++g.missed[d.sid];
    if (g.stats)
      g.stats->bus.count_dropped("slow_consumer");
    return;
  }
  if (auto i = g.missed.find(d.sid); i != g.missed.end()) {
    d.missed = i->second;
    g.missed.erase(i);
  }
  ++g.in_flight;
  g.in_flight_bytes += bytes;
  g.send_locked(std::move(d));
}

void on_disconnected(natsConnection*, void* closure) {
  auto& g = gate_of(closure);
  std::lock_guard guard{g.mtx};
  g.send_locked(nats_link_event{false, {}});
}

void on_reconnected(natsConnection*, void* closure) {
  auto& g = gate_of(closure);
  std::lock_guard guard{g.mtx};
  g.send_locked(nats_link_event{true, {}});
}

void on_error(natsConnection* nc, natsSubscription* sub, natsStatus err, void* closure) {
  auto& g = gate_of(closure);
  if (err == NATS_SLOW_CONSUMER && sub) {
    // libnats dropped messages its pending limits had no room for.
    int64_t dropped = 0;
    if (natsSubscription_GetDropped(sub, &dropped) != NATS_OK)
      return;
    auto sid = natsSubscription_GetID(sub);
    std::lock_guard guard{g.mtx};
    auto& seen = g.lib_dropped[sid];
    if (dropped > seen) {
      g.missed[sid] += static_cast<uint64_t>(dropped - seen);
      if (g.stats)
        g.stats->bus.count_dropped("slow_consumer", static_cast<uint64_t>(dropped - seen));
      seen = dropped;
    }
    return;
  }
  std::lock_guard guard{g.mtx};
  g.send_locked(nats_link_event{natsConnection_Status(nc) == NATS_CONN_STATUS_CONNECTED,
                                natsStatus_GetText(err)});
}

int64_t reconnect_delay(natsConnection*, int attempts, void* closure) {
  auto& g = gate_of(closure);
  auto shift = std::clamp(attempts - 1, 0, 20);
  return std::min(g.reconnect_min_ms << shift, g.reconnect_max_ms);
}

// The URL as errors may show it: a password in it is not for logs.
std::string shown(const std::string& url) {
  auto scheme = url.find("://");
  auto at = url.rfind('@');
  if (scheme == std::string::npos || at == std::string::npos || at < scheme)
    return url;
  return url.substr(0, scheme + 3) + "***" + url.substr(at);
}

caf::error unavailable(const std::string& what, natsStatus s) {
  return make_error(bus_errc::unavailable, what + ": " + natsStatus_GetText(s));
}

}  // namespace

struct nats_client::impl {
  nats_bus_settings settings;
  gate_ptr gate;
  natsOptions* opts = nullptr;
  natsConnection* nc = nullptr;
  std::map<int64_t, natsSubscription*> subs;

  ~impl() {
    {
      // Closed first: a callback running now finishes its send before this
      // returns, and every later one sends nothing.
      std::lock_guard guard{gate->mtx};
      gate->open = false;
      gate->facade.reset();
    }
    // What libnats still buffers of this node's publishes goes out first
    // (a short-lived client publishes and leaves at once).
    if (nc && natsConnection_Status(nc) == NATS_CONN_STATUS_CONNECTED)
      natsConnection_FlushTimeout(nc, settings.flush_timeout.count());
    if (nc)
      natsConnection_Close(nc);
    for (auto& [sid, sub] : subs)
      natsSubscription_Destroy(sub);
    if (nc)
      natsConnection_Destroy(nc);
    if (opts)
      natsOptions_Destroy(opts);
  }
};

nats_client::nats_client(std::unique_ptr<impl> p) : impl_(std::move(p)) {
}

nats_client::~nats_client() = default;

caf::expected<std::unique_ptr<nats_client>> nats_client::connect(const nats_bus_settings& s,
                                                                 std::shared_ptr<metrics> stats) {
  auto p = std::make_unique<impl>();
  p->settings = s;
  p->gate = std::make_shared<nats_gate>();
  p->gate->stats = std::move(stats);
  p->gate->max_in_flight = s.max_in_flight;
  p->gate->max_in_flight_bytes = s.max_in_flight_bytes;
  p->gate->reconnect_min_ms = s.reconnect_min.count();
  p->gate->reconnect_max_ms = std::max(s.reconnect_max, s.reconnect_min).count();
  if (auto st = natsOptions_Create(&p->opts); st != NATS_OK)
    return unavailable("libnats options", st);
  // The connection's callbacks share one holder, released by the closed
  // callback (the last one libnats makes for a connection).
  auto* held = new gate_ptr(p->gate);
  auto* o = p->opts;
  natsStatus st = natsOptions_SetURL(o, s.url.c_str());
  if (st == NATS_OK)
    st = natsOptions_SetName(o, ("waggle-" + s.node_id).c_str());
  if (st == NATS_OK)
    st = natsOptions_SetTimeout(o, s.connect_timeout.count());
  if (st == NATS_OK)
    st = natsOptions_SetAllowReconnect(o, true);
  if (st == NATS_OK)
    st = natsOptions_SetMaxReconnect(o, -1);
  if (st == NATS_OK)
    st = natsOptions_SetCustomReconnectDelay(o, reconnect_delay, held);
  if (st == NATS_OK)
    st = natsOptions_SetReconnectBufSize(o, s.reconnect_buffer);
  if (st == NATS_OK)
    st = natsOptions_SetPingInterval(o, s.ping_interval.count());
  if (st == NATS_OK)
    st = natsOptions_SetMaxPingsOut(o, s.max_pings_out);
  if (st == NATS_OK)
    st = natsOptions_SetMaxPendingMsgs(o, s.pending_msgs);
  // One pool of delivery threads for every subscription, not a thread each
  // (order per subscription is kept).
  if (st == NATS_OK)
    st = natsOptions_UseGlobalMessageDelivery(o, true);
  if (st == NATS_OK)
    st = natsOptions_SetErrorHandler(o, on_error, held);
  if (st == NATS_OK)
    st = natsOptions_SetDisconnectedCB(o, on_disconnected, held);
  if (st == NATS_OK)
    st = natsOptions_SetReconnectedCB(o, on_reconnected, held);
  if (st == NATS_OK)
    st = natsOptions_SetClosedCB(o, [](natsConnection*, void* c) { release_gate(c); }, held);
  if (st != NATS_OK) {
    delete held;
    return unavailable("libnats options", st);
  }
  if (st = natsConnection_Connect(&p->nc, o); st != NATS_OK) {
    // libnats makes no callback for a connection that never connected (the
    // closed callback comes only after a connection existed; LeakSanitizer
    // found the holder left here), so it is ours to free.
    p->nc = nullptr;
    delete held;
    return unavailable("cannot connect to NATS at " + shown(s.url), st);
  }
  auto max = natsConnection_GetMaxPayload(p->nc);
  if (max < static_cast<int64_t>(bus_max_payload))
    return make_error(bus_errc::unavailable,
                      "the NATS server at " + shown(s.url) + " takes at most " + std::to_string(max) +
                        " bytes in a message; the bus needs " + std::to_string(bus_max_payload) +
                        " (set max_payload in its configuration)");
  return std::unique_ptr<nats_client>{new nats_client(std::move(p))};
}

void nats_client::attach(caf::strong_actor_ptr facade) {
  std::lock_guard guard{impl_->gate->mtx};
  impl_->gate->facade.reset(facade.get());
}

bool nats_client::connected() const {
  return natsConnection_Status(impl_->nc) == NATS_CONN_STATUS_CONNECTED;
}

int64_t nats_client::max_payload() const {
  return natsConnection_GetMaxPayload(impl_->nc);
}

caf::error nats_client::publish(const std::string& subject, const std::string& reply,
                                const std::string& payload) {
  auto len = static_cast<int>(payload.size());
  auto st = reply.empty()
              ? natsConnection_Publish(impl_->nc, subject.c_str(), payload.data(), len)
              : natsConnection_PublishRequest(impl_->nc, subject.c_str(), reply.c_str(),
                                              payload.data(), len);
  switch (st) {
    case NATS_OK: return {};
    case NATS_MAX_PAYLOAD:
      return make_error(bus_errc::payload_too_large,
                        "the NATS server takes at most " + std::to_string(max_payload()) +
                          " bytes in a message");
    case NATS_INSUFFICIENT_BUFFER:
      return unavailable("NATS is reconnecting and its buffer is full", st);
    default: return unavailable("NATS publish", st);
  }
}

caf::expected<int64_t> nats_client::subscribe(const std::string& subject, const std::string& queue) {
  natsSubscription* sub = nullptr;
  auto* held = new gate_ptr(impl_->gate);
  auto st = queue.empty()
              ? natsConnection_Subscribe(&sub, impl_->nc, subject.c_str(), on_message, held)
              : natsConnection_QueueSubscribe(&sub, impl_->nc, subject.c_str(), queue.c_str(),
                                              on_message, held);
  if (st != NATS_OK) {
    delete held;
    return unavailable("NATS subscribe", st);
  }
  if (natsSubscription_SetOnCompleteCB(sub, release_gate, held) != NATS_OK) {
    // Closed already (the connection went): its callbacks are over.
    natsSubscription_Destroy(sub);
    delete held;
    return unavailable("NATS subscribe", NATS_INVALID_SUBSCRIPTION);
  }
  natsSubscription_SetPendingLimits(sub, impl_->settings.pending_msgs,
                                    impl_->settings.pending_bytes);
  auto sid = natsSubscription_GetID(sub);
  impl_->subs.emplace(sid, sub);
  return sid;
}

void nats_client::unsubscribe(int64_t sid) {
  auto i = impl_->subs.find(sid);
  if (i == impl_->subs.end())
    return;
  natsSubscription_Unsubscribe(i->second);
  natsSubscription_Destroy(i->second);
  impl_->subs.erase(i);
  std::lock_guard guard{impl_->gate->mtx};
  impl_->gate->missed.erase(sid);
  impl_->gate->lib_dropped.erase(sid);
}

caf::error nats_client::flush() {
  if (auto st = natsConnection_FlushTimeout(impl_->nc, impl_->settings.flush_timeout.count());
      st != NATS_OK)
    return unavailable("the NATS server did not answer", st);
  return {};
}

uint32_t nats_client::position(int64_t sid) {
  auto i = impl_->subs.find(sid);
  if (i == impl_->subs.end())
    return 0;
  int pending = 0;
  int64_t delivered = 0;
  natsSubscription_GetStats(i->second, &pending, nullptr, nullptr, nullptr, &delivered, nullptr);
  return static_cast<uint32_t>(delivered) + static_cast<uint32_t>(pending);
}

void nats_client::taken(size_t bytes) {
  std::lock_guard guard{impl_->gate->mtx};
  impl_->gate->in_flight -= std::min<size_t>(impl_->gate->in_flight, 1);
  impl_->gate->in_flight_bytes -= std::min(impl_->gate->in_flight_bytes, bytes);
}

}  // namespace waggle
