#pragma once

// The listen actor (docs/delivery.md, "Listen actor"): one dedicated
// connection outside every pool that LISTENs on the wake channels and tells
// the delivery supervisor (operator listeners' outbox) or the push matcher
// (match jobs, docs/push.md) at once on each notification. Notifications are
// delivered by PostgreSQL only after COMMIT, so a wake always means work a
// claim can see.
//
// Liveness: every `probe_interval` it NOTIFYs its own per-node channel from
// a second connection; if that has not come back on the LISTEN connection
// within `probe_timeout`, the listener is down (a half-open socket, or a
// pooler in transaction mode where LISTEN never delivers): waggle_listener_up
// 0, a WARNING once, the supervisor polls at its floor, and the connection
// is made again with backoff, LISTENs again and triggers one catch-up claim.
// It is up again when a probe comes back.
//
// Detached: its loop blocks up to `wait` in the socket for notifications,
// then sends itself the next listen_tick (with `self_loop`; tests send each
// tick by hand, so a test_coordinator steps it).

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "actors/support/env.hpp"
#include "db/listen_connection.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct listen_settings {
  std::string listen_url;  // the LISTEN connection (may go through a pooler)
  std::string probe_url;   // the probe's sender
  std::string node_id;     // names the probe channel: waggle_probe_<node_id>
  std::chrono::milliseconds probe_interval{2000};
  std::chrono::milliseconds probe_timeout{1000};
  std::chrono::milliseconds wait{100};  // one loop step's longest wait
  std::chrono::milliseconds reconnect_min{100};
  std::chrono::milliseconds reconnect_max{5000};
  bool self_loop = true;
};

struct listen_state {
  static inline const char* name = "listen_actor";

  using ptr = listen_actor::stateful_pointer<listen_state>;
  ptr self = nullptr;
  delivery_supervisor_actor supervisor;  // null: no operator listeners
  push_matcher_actor matcher;            // null: push is off
  listen_settings settings;
  node_env env;
  std::unique_ptr<db::listen_connection> listen;
  std::unique_ptr<pqxx::connection> prober;
  std::string probe_channel;
  std::optional<bool> up;  // unknown until the first probe's verdict
  bool warned = false;
  uint64_t probe_seq = 0;
  std::optional<steady_time> probe_sent;  // the outstanding probe
  steady_time next_probe{};
  steady_time next_connect{};
  std::chrono::milliseconds backoff{0};

  void init(ptr self_ptr, delivery_supervisor_actor sup, push_matcher_actor m, listen_settings s,
            node_env e);
  void on_tick();

 private:
  bool ensure_connected(steady_time now);
  void send_probe(steady_time now);
  void mark(bool is_up, const std::string& why);
  void drop(steady_time now, const std::string& why);
  void wake_all(bool catch_up);
};

listen_actor::behavior_type listen_actor_impl(listen_state::ptr self,
                                              delivery_supervisor_actor supervisor,
                                              listen_settings settings, node_env env,
                                              push_matcher_actor matcher);

}  // namespace waggle
