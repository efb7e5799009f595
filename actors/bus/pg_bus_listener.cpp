#include "actors/bus/pg_bus_listener.hpp"

#include <algorithm>

#include "db/conninfo.hpp"
#include "actors/support/log.hpp"

namespace waggle {

std::vector<std::string> bus_listener_state::channels() const {
  std::vector<std::string> out;
  for (auto s : wanted)
    out.push_back(db::bus::shard_channel(s));
  return out;
}

void bus_listener_state::drop(const std::string& why) {
  listen->reset();
  backoff = std::clamp(backoff * 2, std::chrono::milliseconds{50}, settings.reconnect_max);
  next_connect = env.steady_now() + backoff;
  log::warn("bus", "listener lost its connection; the fetcher polls meanwhile", {{"why", why}});
}

void bus_listener_state::want(const std::vector<int32_t>& shards) {
  std::set<int32_t> now(shards.begin(), shards.end());
  std::vector<int32_t> added;
  std::set_difference(now.begin(), now.end(), wanted.begin(), wanted.end(),
                      std::back_inserter(added));
  wanted = std::move(now);
  try {
    listen->set_channels(channels());
  } catch (const std::exception& e) {
    drop(e.what());
    return;
  }
  // What committed between the fetcher's snapshot and this LISTEN rang no
  // bell here.
  if (listen->connected() && !added.empty())
    self->send(fetcher, bus_shards{std::move(added)});
}

void bus_listener_state::step() {
  if (!listen->connected()) {
    auto now = env.steady_now();
    if (now < next_connect) {
      auto rest = std::chrono::duration_cast<std::chrono::milliseconds>(next_connect - now);
      self->delayed_send(self, std::min(rest, settings.listen_wait), bus_tick{});
      return;
    }
    std::string error;
    if (!listen->connect(error)) {
      drop(error);
      self->send(self, bus_tick{});
      return;
    }
    backoff = std::chrono::milliseconds{0};
    // Every shard may have news the bell did not bring while we were away.
    self->send(fetcher, bus_shards{});
  }
  try {
    auto arrived = listen->wait(settings.listen_wait);
    std::set<int32_t> rung;
    for (const auto& n : arrived)
      if (auto shard = db::bus::shard_of_channel(n.channel); shard >= 0)
        rung.insert(shard);
    if (!rung.empty())
      self->send(fetcher, bus_shards{std::vector<int32_t>(rung.begin(), rung.end())});
  } catch (const std::exception& e) {
    drop(e.what());
  }
  self->send(self, bus_tick{});
}

caf::result<bus_shards> bus_listener_state::listening() {
  try {
    bus_shards out;
    for (const auto& channel : listen->listening()) {
      auto shard = db::bus::shard_of_channel(channel);
      if (shard >= 0)
        out.shards.push_back(shard);
    }
    std::sort(out.shards.begin(), out.shards.end());
    return out;
  } catch (const std::exception& e) {
    return make_error(bus_errc::unavailable, e.what());
  }
}

bus_listener_actor::behavior_type bus_listener_impl(bus_listener_state::ptr self,
                                                    pg_bus_settings settings,
                                                    bus_fetcher_actor fetcher, node_env env) {
  auto& st = self->state;
  st.self = self;
  st.settings = std::move(settings);
  st.fetcher = std::move(fetcher);
  st.env = std::move(env);
  st.listen = std::make_unique<db::listen_connection>(
    db::guarded_conninfo(st.settings.database_url, "bus-listener", std::chrono::seconds{10}),
    std::vector<std::string>{});
  self->send(self, bus_tick{});
  return {
    [self](bus_shards& s) { self->state.want(s.shards); },
    [self](bus_tick) { self->state.step(); },
    [self](bus_listening) { return self->state.listening(); },
  };
}

}  // namespace waggle
