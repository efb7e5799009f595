#include "actors/delivery/listen_actor.hpp"

#include <algorithm>
#include <stdexcept>

#include <pqxx/except>

#include "actors/support/log.hpp"
#include "db/conninfo.hpp"
#include "db/operator_outbox.hpp"
#include "db/push_store.hpp"

namespace waggle {

namespace {

// A URL libpq cannot parse is left as it is: the connect then fails with
// libpq's own message, through the usual drop and backoff.
std::string guarded(const std::string& url, const std::string& name) {
  try {
    return db::guarded_conninfo(url, name, std::chrono::seconds(10));
  } catch (const std::invalid_argument&) {
    return url;
  }
}

}  // namespace

void listen_state::init(ptr self_ptr, delivery_supervisor_actor sup, push_matcher_actor m,
                        listen_settings s, node_env e) {
  self = self_ptr;
  supervisor = std::move(sup);
  matcher = std::move(m);
  settings = std::move(s);
  env = std::move(e);
  probe_channel = "waggle_probe_" + settings.node_id;
  std::vector<std::string> channels{probe_channel};
  if (supervisor)
    channels.push_back(db::delivery_wake_channel);
  if (matcher)
    channels.push_back(db::push_wake_channel);
  // Both connections bounded (db/conninfo.hpp): this actor's one thread runs
  // every connect, and a LISTEN server that went silent must not hold it for
  // the kernel's two minutes of SYN retries while no probe is judged.
  settings.listen_url = guarded(settings.listen_url, "listen");
  settings.probe_url = guarded(settings.probe_url, "listen-probe");
  listen = std::make_unique<db::listen_connection>(settings.listen_url, std::move(channels));
  if (settings.self_loop)
    self->send(self, listen_tick{});
}

void listen_state::mark(bool is_up, const std::string& why) {
  if (up == is_up)
    return;
  up = is_up;
  if (env.stats)
    env.stats->listener_up = is_up ? 1 : 0;
  if (supervisor)
    self->send(supervisor, listener_health{is_up});
  if (matcher)
    self->send(matcher, listener_health{is_up});
  if (is_up) {
    warned = false;
    log::info("listen", "listener up: notifications arrive");
  } else if (!warned) {
    warned = true;
    log::warn("listen", "listener down: deliveries fall back to polling", {{"why", why}});
  }
}

void listen_state::drop(steady_time now, const std::string& why) {
  listen->reset();
  probe_sent.reset();
  mark(false, why);
  backoff = std::clamp(backoff * 2, settings.reconnect_min, settings.reconnect_max);
  next_connect = now + backoff;
}

bool listen_state::ensure_connected(steady_time now) {
  if (listen->connected())
    return true;
  if (now < next_connect)
    return false;
  std::string error;
  if (!listen->connect(error)) {
    drop(now, "connect: " + error);
    return false;
  }
  // LISTEN holds from here: anything committed before it was missed, so one
  // claim catches up. Up is declared when the first probe comes back.
  wake_all(true);
  next_probe = now;
  return true;
}

void listen_state::send_probe(steady_time now) {
  try {
    if (!prober)
      prober = std::make_unique<pqxx::connection>(settings.probe_url);
    db::notify(*prober, probe_channel, std::to_string(++probe_seq));
    // The timeout runs from the probe's commit, not from the step's start:
    // connecting the LISTEN and probe connections came first, and a slow
    // connect (a remote pooler) must not eat the probe's time and declare a
    // healthy listener down.
    if (!probe_sent)
      probe_sent = env.steady_now();
  } catch (const std::exception& e) {
    // The probe cannot tell anything without its sender: no verdict, retry.
    prober.reset();
    log::warn("listen", "probe not sent", {{"error", e.what()}});
  }
  next_probe = now + settings.probe_interval;
}

void listen_state::on_tick() {
  auto now = env.steady_now();
  if (ensure_connected(now)) {
    if (now >= next_probe)
      send_probe(now);
    try {
      auto arrived = listen->wait(settings.wait);
      bool wake = false, push = false, probed = false;
      for (const auto& n : arrived) {
        if (n.channel == probe_channel)
          probed = true;
        else if (n.channel == db::push_wake_channel)
          push = true;
        else
          wake = true;
      }
      // Recorded where the supervisor and matcher take them (their inputs).
      if (wake && supervisor)
        self->send(supervisor, delivery_wake{false});
      if (push && matcher)
        self->send(matcher, push_match_wake{false});
      now = env.steady_now();
      if (probed) {
        probe_sent.reset();
        backoff = std::chrono::milliseconds{0};
        mark(true, "");
      } else if (probe_sent && now - *probe_sent > settings.probe_timeout) {
        drop(now, "probe did not come back within "
                    + std::to_string(settings.probe_timeout.count()) + " ms");
      }
    } catch (const pqxx::broken_connection& e) {
      drop(now, std::string{"connection lost: "} + e.what());
    } catch (const std::exception& e) {
      drop(now, e.what());
    }
  } else if (settings.self_loop) {
    // Waiting out the reconnect backoff without spinning.
    auto rest = std::min(std::chrono::duration_cast<std::chrono::milliseconds>(next_connect - now),
                         settings.wait);
    if (rest.count() > 0) {
      self->delayed_send(self, rest, listen_tick{});
      return;
    }
  }
  if (settings.self_loop)
    self->send(self, listen_tick{});
}

void listen_state::wake_all(bool catch_up) {
  if (supervisor)
    self->send(supervisor, delivery_wake{catch_up});
  if (matcher)
    self->send(matcher, push_match_wake{catch_up});
}

listen_actor::behavior_type listen_actor_impl(listen_state::ptr self,
                                              delivery_supervisor_actor supervisor,
                                              listen_settings settings, node_env env,
                                              push_matcher_actor matcher) {
  self->state.init(self, std::move(supervisor), std::move(matcher), std::move(settings),
                   std::move(env));
  return {
    [self](listen_tick) { self->state.on_tick(); },
  };
}

}  // namespace waggle
