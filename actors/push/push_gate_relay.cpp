#include "actors/push/push_gate_relay.hpp"

#include <pqxx/pqxx>

#include "actors/support/log.hpp"
#include "db/bus_store.hpp"
#include "db/cluster_store.hpp"
#include "messages/proto/bus_payloads.hpp"

namespace waggle {

std::string push_gate_subject(const std::string& node_id) {
  return "waggle.node." + node_id + ".gate";
}

void push_gate_relay_state::init(ptr self_ptr, bus_actor b,
                                 std::function<ingest_actor()> ingest,
                                 push_gate_relay_settings s, node_env e) {
  self = self_ptr;
  bus = std::move(b);
  current_ingest = std::move(ingest);
  settings = std::move(s);
  env = std::move(e);
  subscribe();
  on_tick();
}

bool push_gate_relay_state::connect() {
  if (conn)
    return true;
  try {
    conn = db::bus::open(settings.database_url, "push-gate", std::chrono::seconds(10));
  } catch (const std::exception& e) {
    log::warn("push", "gate relay cannot reach the database", {{"error", e.what()}});
  }
  return conn != nullptr;
}

void push_gate_relay_state::subscribe() {
  if (subscribed || subscribing)
    return;
  subscribing = true;
  self
    ->request(bus, settings.answer_bound,
              bus_subscribe{push_gate_subject(settings.node_id), "", self})
    .then(
      [this](bus_subscription&) {
        subscribing = false;
        subscribed = true;
      },
      [this](caf::error& err) {
        subscribing = false;
        log::warn("push", "gate relay subscribe failed; retrying", {{"error", caf::to_string(err)}});
      });
}

void push_gate_relay_state::on_tick() {
  subscribe();
  auto ingest = current_ingest ? current_ingest() : ingest_actor{};
  bool fresh_ingest = ingest && ingest != attached;
  if (fresh_ingest) {
    self->send(ingest, push_gate_attach{self});
    attached = ingest;
  }
  auto now = env.steady_now();
  if (attached && (fresh_ingest || now - loaded_at >= settings.reload))
    load();
  self->delayed_send(self, settings.tick, push_gate_relay_tick{});
}

// Register first, then read: the order the lost-wake argument needs
// (migrations/0014). A failure leaves ingest gating what it gated (all,
// before its first load): it only ever errs towards gating.
void push_gate_relay_state::load() {
  if (!connect())
    return;
  try {
    db::cluster::announce(*conn, settings.node_id, settings.protocol_version);
    cluster_gate_loaded loaded{true, db::cluster::gate_communities(*conn)};
    self->send(attached, std::move(loaded));
    loaded_at = env.steady_now();
  } catch (const std::exception& e) {
    conn.reset();
    log::warn("push", "gate relay load failed", {{"error", e.what()}});
  }
}

caf::typed_response_promise<cluster_gate_done>
push_gate_relay_state::on_request(const cluster_gate_request& req) {
  auto promise = self->make_response_promise<cluster_gate_done>();
  std::vector<std::string> nodes;
  try {
    if (!connect())
      throw std::runtime_error("no connection");
    // The intent commits before the registry is read (migrations/0014).
    db::cluster::note_gate_intent(*conn, req.community_id);
    nodes = db::cluster::live_node_ids(*conn, settings.node_id, settings.node_ttl);
  } catch (const std::exception& e) {
    conn.reset();
    promise.deliver(cluster_gate_done{{}, {"(the node registry could not be read)"}});
    return promise;
  }
  if (nodes.empty()) {
    promise.deliver(cluster_gate_done{});
    return promise;
  }
  struct tally {
    size_t left;
    cluster_gate_done done;
  };
  auto t = std::make_shared<tally>(tally{nodes.size(), {}});
  auto payload = proto::gate_request_payload(req.community_id);
  for (auto& id : nodes) {
    auto settle = [t, promise, id](const bus_message* answer) mutable {
      if (answer)
        proto::append_gate_answer_ids(answer->payload, t->done.skipped);
      else
        t->done.unconfirmed.push_back(id);
      if (--t->left == 0)
        promise.deliver(std::move(t->done));
    };
    self
      ->request(bus, settings.answer_bound,
                bus_request{push_gate_subject(id), payload, settings.ask_timeout_ms})
      .then([settle](bus_message& answer) mutable { settle(&answer); },
            // Fail closed, no_responders included: a node that cannot say
            // it gates may be storing push events ungated.
            [settle](caf::error&) mutable { settle(nullptr); });
  }
  return promise;
}

void push_gate_relay_state::on_message(const bus_message& msg) {
  if (msg.reply_to.empty())
    return;
  auto community = proto::parse_gate_request(msg.payload);
  if (!community) {
    log::warn("push", "dropped a gate request of another shape", {});
    return;
  }
  auto ingest = current_ingest ? current_ingest() : ingest_actor{};
  if (!ingest)
    return;  // unanswered: the asking node refuses its lease
  auto reply_to = msg.reply_to;
  self->request(ingest, settings.answer_bound, push_gate_remote{*community})
    .then(
      [this, reply_to](push_gate_drained& drained) {
        self->request(bus, settings.answer_bound,
                      bus_publish{reply_to, proto::gate_answer_payload(drained.skipped), ""})
          .then([](bus_ack&) {}, [](caf::error&) {});
      },
      [](caf::error&) {});
}

push_gate_relay_actor::behavior_type push_gate_relay_impl(
  push_gate_relay_state::ptr self, bus_actor bus, std::function<ingest_actor()> current_ingest,
  push_gate_relay_settings settings, node_env env) {
  self->state.init(self, std::move(bus), std::move(current_ingest), std::move(settings),
                   std::move(env));
  return {
    [self](cluster_gate_request& req) { return self->state.on_request(req); },
    [self](bus_message& msg) { self->state.on_message(msg); },
    [self](bus_lagged&) {},
    [self](push_gate_relay_tick&) { self->state.on_tick(); },
  };
}

}  // namespace waggle
