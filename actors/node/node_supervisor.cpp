#include "actors/node/node_supervisor.hpp"

#include <algorithm>

#include "actors/delivery/delivery_store.hpp"
#include "actors/delivery/delivery_supervisor.hpp"
#include "actors/delivery/listen_actor.hpp"
#include "actors/delivery/listener_registry.hpp"
#include "actors/delivery/listener_source.hpp"
#include "actors/delivery/push_source.hpp"
#include "actors/push/push_matcher.hpp"
#include "actors/fanout/hub_actor.hpp"
#include "actors/channels/group_actor.hpp"
#include "actors/channels/group_session.hpp"
#include "actors/communities/community_watcher.hpp"
#include "actors/communities/membership_actor.hpp"
#include "actors/ingest/ingest_actor.hpp"
#include "actors/support/log.hpp"
#include "actors/trace/trace_recorder.hpp"
#include "actors/node/node.hpp"
#include "actors/policy/write_policy_plugin.hpp"
#include "actors/reads/reader_pool.hpp"
#include "actors/reads/reader_session.hpp"
#include "actors/node/node_replicas.hpp"
#include "actors/ingest/writer_session.hpp"

namespace waggle {

namespace {

const char* child_name(child c) {
  switch (c) {
    case child::hub: return "fanout_hub";
    case child::ingest: return "ingest";
    case child::reader: return "reader_pool";
    case child::directory: return "community_directory";
    case child::group: return "group";
    case child::membership: return "membership";
    case child::expiry: return "expiration_reaper";
    case child::policy: return "write_policy";
    case child::registry: return "listener_registry";
    case child::delivery: return "delivery_supervisor";
    case child::prober: return "heartbeat_prober";
    default: return "?";
  }
}

}  // namespace

void node_supervisor_state::init(node_supervisor_ptr self_ptr, node_config config, node_env e,
                                 db::relay_signer relay_signer,
                                 std::shared_ptr<handle_board> handle_board_ptr,
                                 std::shared_ptr<community_snapshot> community_snapshot_ptr) {
  self = self_ptr;
  cfg = std::move(config);
  env = std::move(e);
  signer = std::move(relay_signer);
  board = std::move(handle_board_ptr);
  snapshot = std::move(community_snapshot_ptr);
  ring = std::make_shared<heartbeat_ring>();
  routing = make_routing(cfg, env, ring);
  // The hub first: ingest is spawned with its handle.
  for (auto which : {child::hub, child::ingest, child::reader, child::directory, child::group,
                     child::membership, child::expiry, child::registry, child::prober})
    spawn_child(which);
  if (!cfg.write_policy.empty())
    spawn_child(child::policy);
  // Delivery is spawned later, when the node serves (node::start_delivery).
  if (delivery_enabled(cfg)) {
    node_id = env.sources.random_challenge().substr(0, 16);
    http = gateway::make_http_client();
  }
}

template <class Handle>
void node_supervisor_state::watch(child which, const Handle& h) {
  self->monitor(h);
  addrs[static_cast<size_t>(which)] = h.address();
}

void node_supervisor_state::spawn_child(child which) {
  switch (which) {
    case child::hub:
      spawn_hub();
      break;
    case child::ingest:
      spawn_ingest();
      break;
    case child::reader:
      spawn_reader();
      break;
    case child::directory:
      spawn_directory();
      break;
    case child::group:
      spawn_group();
      break;
    case child::membership:
      spawn_membership();
      break;
    case child::expiry:
      spawn_expiry_reaper();
      break;
    case child::policy:
      spawn_policy();
      break;
    case child::registry:
      spawn_registry();
      break;
    case child::delivery:
      spawn_delivery();
      break;
    case child::prober:
      spawn_prober();
      break;
    default:
      return;
  }
  board->set(handles);
}

void node_supervisor_state::spawn_hub() {
  handles.hub = cfg.bus == "inproc"
                  ? self->system().spawn(hub_actor_impl, env.for_actor("hub"))
                  : self->system().spawn(clustered_hub_actor_impl, env.for_actor("hub"));
  watch(child::hub, handles.hub);
}

void node_supervisor_state::spawn_ingest() {
  auto& sys = self->system();
  std::vector<writer_session_actor> writers;
  for (size_t i = 0; i < cfg.writers; ++i)
    writers.push_back(sys.spawn<caf::detached>(writer_session_actor_impl, cfg.database_url,
                                               "writer-" + std::to_string(i), env,
                                               lease_settings_for(cfg)));
  handles.ingest = sys.spawn(ingest_actor_impl, ingest_settings_for(cfg), std::move(writers),
                             handles.hub, env.for_actor("ingest"));
  watch(child::ingest, handles.ingest);
}

void node_supervisor_state::spawn_reader() {
  auto& sys = self->system();
  std::vector<reader_session_actor> sessions;
  for (size_t i = 0; i < cfg.readers; ++i)
    sessions.push_back(sys.spawn<caf::detached>(
      reader_session_actor_impl, cfg.database_url, "reader-" + std::to_string(i),
      filter_limits_for(cfg), cfg.read_statement_timeout_ms, env, routing));
  handles.reader = sys.spawn(reader_pool_actor_impl, std::move(sessions),
                             env.for_actor("reader_pool"));
  watch(child::reader, handles.reader);
}

void node_supervisor_state::spawn_directory() {
  directory = self->system().spawn<caf::detached>(community_directory_actor_impl, cfg.database_url,
                                                  snapshot, caf::timespan{std::chrono::seconds(2)});
  watch(child::directory, directory);
}

void node_supervisor_state::spawn_group() {
  auto& sys = self->system();
  std::vector<group_session_actor> sessions;
  for (size_t i = 0; i < cfg.group_sessions; ++i)
    sessions.push_back(sys.spawn<caf::detached>(group_session_actor_impl, cfg.database_url, signer,
                                                env, group_session_name(i)));
  group_settings settings;
  settings.database_url = cfg.database_url;
  settings.reap_interval = caf::timespan{std::chrono::seconds(cfg.ttl_reap_seconds)};
  settings.repair_on_start = restarts[static_cast<size_t>(child::group)] > 0;
  settings.max_queue_per_community = cfg.max_group_queue_per_community;
  settings.roster_idle = caf::timespan{std::chrono::seconds(cfg.roster_idle_seconds)};
  settings.route_rosters = cfg.bus != "inproc" && cfg.roster_routing;
  handles.group = sys.spawn(group_actor_impl, std::move(sessions), handles.hub,
                            env.for_actor("group"), std::move(settings));
  watch(child::group, handles.group);
}

void node_supervisor_state::spawn_membership() {
  auto& sys = self->system();
  // The watcher is linked to the membership actor: they are one child, and
  // a restart of either (or of the hub they send to) restarts both.
  auto watcher = sys.spawn<caf::detached>(community_watcher_actor_impl, cfg.database_url, signer,
                                          handles.hub, directory, env,
                                          community_watcher_settings{});
  membership_settings membership_cfg;
  membership_cfg.invites = {cfg.max_open_invites_per_admin, cfg.max_open_invites_per_community};
  handles.membership = sys.spawn<caf::detached>(membership_actor_impl, cfg.database_url, signer,
                                                watcher, handles.hub, env, membership_cfg);
  caf::actor_cast<caf::abstract_actor*>(handles.membership)->attach_functor([watcher] {
    caf::anon_send_exit(watcher, caf::exit_reason::user_shutdown);
  });
  caf::actor_cast<caf::abstract_actor*>(watcher)->attach_functor(
    [membership = caf::actor_cast<caf::actor>(handles.membership)] {
      caf::anon_send_exit(membership, caf::exit_reason::kill);
    });
  watch(child::membership, handles.membership);
}

// Held by the supervisor like the directory: it needs nothing from any other
// child and nobody sends to it, so the supervisor's monitor and restart are
// all the care it needs. Not spawned when off: it would only hold a
// connection.
void node_supervisor_state::spawn_expiry_reaper() {
  if (cfg.expiry_reap_seconds <= 0)
    return;
  expiry_reaper = self->system().spawn<caf::detached>(
    expiration_reaper_actor_impl, cfg.database_url, env.for_actor("expiration_reaper"),
    caf::timespan{std::chrono::seconds(cfg.expiry_reap_seconds)}, db::reap_limits{});
  watch(child::expiry, expiry_reaper);
}

// Like the expiration reaper: nobody sends to it, the supervisor restarts it.
// Without replicas there is nothing to prove.
void node_supervisor_state::spawn_prober() {
  if (cfg.read_database_urls.empty())
    return;
  prober = self->system().spawn<caf::detached>(
    heartbeat_prober_actor_impl, cfg.database_url, ring, env.for_actor("heartbeat_prober"),
    caf::timespan{std::chrono::milliseconds(cfg.heartbeat_interval_ms)});
  watch(child::prober, prober);
}

void node_supervisor_state::spawn_policy() {
  // Detached: it reaps its plugin process (docs/write-policy.md). Restarting
  // the plugin itself is its own job; this restarts the actor if it dies.
  handles.policy = self->system().spawn<caf::detached>(
    write_policy_actor_impl, write_policy_settings_for(cfg), env.for_actor("write_policy"));
  watch(child::policy, handles.policy);
}

void node_supervisor_state::spawn_registry() {
  listener_registry_settings settings;
  settings.database_url = cfg.database_url;
  handles.listeners = self->system().spawn<caf::detached>(listener_registry_actor_impl, settings,
                                                          env.for_actor("listener_registry"));
  watch(child::registry, handles.listeners);
}

// The stores, the supervisors (with their slots), the push matcher and the
// listen actor are one child: each ends the others, and the lot is restarted
// together. Rows claimed by the dead ones are claimed again when their lease
// runs out.
void node_supervisor_state::spawn_delivery() {
  auto& sys = self->system();
  std::vector<caf::actor> parts;
  delivery = delivery_supervisor_actor{};
  if (!cfg.operator_listeners.empty()) {
    db::claim_settings claims;
    claims.lease = delivery_lease(std::chrono::milliseconds(cfg.delivery_timeout_ms));
    auto source = std::make_shared<listener_source>(cfg.operator_listeners, claims);
    auto store = sys.spawn<caf::detached>(delivery_store_actor_impl, cfg.database_url,
                                          std::string{"delivery-store"}, source,
                                          env.for_actor("delivery_store"));
    // The supervisor's reply_in records name the store that answered.
    if (env.trace)
      env.trace->spawned("delivery_store", caf::actor_cast<caf::actor>(store));
    delivery_settings ds;
    ds.slots = cfg.delivery_slots;
    ds.per_route = cfg.delivery_per_listener;
    ds.request_timeout = std::chrono::milliseconds(cfg.delivery_timeout_ms);
    ds.relay_secret = signer.secret;
    delivery = sys.spawn(delivery_supervisor_actor_impl, store, http, ds,
                         env.for_actor("delivery_supervisor"));
    parts.push_back(caf::actor_cast<caf::actor>(delivery));
    parts.push_back(caf::actor_cast<caf::actor>(store));
  }
  push_matcher_actor matcher;
  if (!cfg.push_gateway_url.empty()) {
    auto request_timeout = std::chrono::milliseconds(cfg.delivery_timeout_ms);
    push_delivery_settings pds{cfg.push_gateway_url, delivery_lease(request_timeout), 8};
    auto store = sys.spawn<caf::detached>(
      delivery_store_actor_impl, cfg.database_url, std::string{"push-store"},
      std::make_shared<push_source>(pds), env.for_actor("push_store"));
    if (env.trace)
      env.trace->spawned("push_store", caf::actor_cast<caf::actor>(store));
    delivery_settings ds;
    ds.queue = "push";
    ds.slots = cfg.push_slots;
    ds.per_route = 0;  // one gateway
    ds.request_timeout = request_timeout;
    ds.relay_secret = signer.secret;
    ds.claim_when_freed = false;  // first attempts arrive from the matcher
    ds.completion_delay = std::chrono::milliseconds(cfg.push_completion_delay_ms);
    auto push_delivery = sys.spawn(delivery_supervisor_actor_impl, store, http, ds,
                                   env.for_actor("push_delivery"));
    push_matcher_settings ms;
    ms.database_url = cfg.database_url;
    ms.gateway_url = cfg.push_gateway_url;
    ms.match.delivery_lease = pds.lease;
    ms.min_interval = std::chrono::milliseconds(cfg.push_match_interval_ms);
    matcher = sys.spawn<caf::detached>(push_matcher_actor_impl, ms, handles.ingest, push_delivery,
                                       env.for_actor("push_matcher"));
    parts.push_back(caf::actor_cast<caf::actor>(push_delivery));
    parts.push_back(caf::actor_cast<caf::actor>(store));
    parts.push_back(caf::actor_cast<caf::actor>(matcher));
  }
  listen_settings ls;
  ls.listen_url = cfg.listen_database_url.empty() ? cfg.database_url : cfg.listen_database_url;
  ls.probe_url = cfg.database_url;
  ls.node_id = node_id;
  ls.probe_interval = std::chrono::milliseconds(cfg.listener_probe_ms);
  ls.probe_timeout = std::chrono::milliseconds(cfg.listener_probe_timeout_ms);
  // Not traced: the LISTEN connection is a boundary that no replay runs (like a
  // database session); what it tells the supervisor is recorded there, as the
  // supervisor's inputs. Its clock readings, two per 100 ms step, would fill a
  // trace with records nothing reads.
  auto listen_env = env.for_actor("listen");
  listen_env.trace = nullptr;
  auto listener = sys.spawn<caf::detached>(listen_actor_impl, delivery, ls, std::move(listen_env),
                                           matcher);
  parts.push_back(caf::actor_cast<caf::actor>(listener));
  // One dies, all go (then restarted together through the first one's watch).
  for (auto& part : parts)
    caf::actor_cast<caf::abstract_actor*>(part)->attach_functor([parts, dying = part.address()] {
      for (auto& other : parts)
        if (other.address() != dying)
          caf::anon_send_exit(other, caf::exit_reason::kill);
    });
  watch(child::delivery, parts.front());
}

void node_supervisor_state::on_restart(restart_child msg) {
  auto which = static_cast<child>(msg.which);
  if ((which == child::ingest || which == child::group || which == child::membership)
      && !addrs[static_cast<size_t>(child::hub)]) {
    self->delayed_send(self, std::chrono::milliseconds(100), msg);
    return;
  }
  if (which == child::delivery && (!delivery_enabled(cfg) || addrs[static_cast<size_t>(which)]))
    return;  // off, or already running (start_delivery twice)
  spawn_child(which);
  // node::start_delivery uses this message for delivery's first start.
  if (restarts[static_cast<size_t>(which)] > 0)
    log::info("supervisor", "child restarted", {{"child", child_name(which)}});
}

void node_supervisor_state::on_down(const caf::down_msg& msg) {
  auto i = std::find(addrs.begin(), addrs.end(), msg.source);
  if (i == addrs.end())
    return;
  auto which = static_cast<child>(i - addrs.begin());
  *i = caf::actor_addr{};
  auto n = restarts[static_cast<size_t>(which)]++;
  auto delay = std::chrono::milliseconds(std::min(100 << std::min(n, 6), 5000));
  log::error("supervisor", "child exited; restarting",
             {{"child", child_name(which)}, {"reason", caf::to_string(msg.reason)},
              {"restart", std::to_string(n + 1)}, {"delay_ms", std::to_string(delay.count())}});
  self->delayed_send(self, delay, restart_child{static_cast<uint8_t>(which)});
  // Ingest and the group actor send to the hub they were spawned with.
  if (which == child::hub)
    for (auto dependent : {child::ingest, child::group, child::membership})
      if (auto h = caf::actor_cast<caf::actor>(addrs[static_cast<size_t>(dependent)]))
        self->send_exit(h, caf::exit_reason::user_shutdown);
}

void node_supervisor_state::on_exit(const caf::exit_msg& msg) {
  // Shutting down: take the children with us.
  for (auto& addr : addrs)
    if (auto h = caf::actor_cast<caf::actor>(addr))
      self->send_exit(h, caf::exit_reason::user_shutdown);
  self->quit(msg.reason);
}

node_supervisor_actor::behavior_type
node_supervisor_actor_impl(node_supervisor_ptr self, node_config cfg, node_env env,
                           db::relay_signer signer, std::shared_ptr<handle_board> board,
                           std::shared_ptr<community_snapshot> snapshot) {
  self->state.init(self, std::move(cfg), std::move(env), std::move(signer), std::move(board),
                   std::move(snapshot));
  self->set_down_handler([self](const caf::down_msg& msg) { self->state.on_down(msg); });
  self->set_exit_handler([self](const caf::exit_msg& msg) { self->state.on_exit(msg); });
  return {
    // -- restarts ---------------------------------------------------------------
    [self](restart_child msg) { self->state.on_restart(msg); },
  };
}

}  // namespace waggle
