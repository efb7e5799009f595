#include "actors/node_supervisor.hpp"

#include <algorithm>

#include "actors/fanout_hub.hpp"
#include "actors/group_actor.hpp"
#include "actors/group_session.hpp"
#include "actors/ingest_actor.hpp"
#include "actors/log.hpp"
#include "actors/node.hpp"
#include "actors/reader_session.hpp"
#include "actors/writer_session.hpp"

namespace waggle {

namespace {

using self_ptr = supervisor_actor::stateful_pointer<supervisor_state>;

const char* child_name(child c) {
  switch (c) {
    case child::hub: return "fanout_hub";
    case child::ingest: return "ingest";
    case child::reader: return "reader_pool";
    case child::directory: return "community_directory";
    case child::group: return "group";
    default: return "?";
  }
}


template <class Handle>
void watch(self_ptr self, child which, const Handle& h) {
  self->monitor(h);
  self->state.addrs[static_cast<size_t>(which)] = h.address();
}

void spawn_child(self_ptr self, child which) {
  auto& st = self->state;
  auto& cfg = st.cfg;
  auto& sys = self->system();
  switch (which) {
    case child::hub: {
      st.handles.hub = sys.spawn(fanout_hub_impl, st.env.for_actor("hub"));
      watch(self, which, st.handles.hub);
      break;
    }
    case child::ingest: {
      std::vector<writer_actor> writers;
      for (size_t i = 0; i < cfg.writers; ++i)
        writers.push_back(sys.spawn<caf::detached>(writer_session_impl, cfg.database_url,
                                                   "writer-" + std::to_string(i), st.env));
      st.handles.ingest = sys.spawn(ingest_actor_impl, ingest_settings_for(cfg), std::move(writers),
                                    st.handles.hub, st.env.for_actor("ingest"));
      watch(self, which, st.handles.ingest);
      break;
    }
    case child::reader: {
      std::vector<reader_actor> sessions;
      for (size_t i = 0; i < cfg.readers; ++i)
        sessions.push_back(sys.spawn<caf::detached>(
          reader_session_impl, cfg.database_url, "reader-" + std::to_string(i), filter_limits_for(cfg),
          st.env));
      st.handles.reader = sys.spawn(reader_pool_impl, std::move(sessions),
                                    st.env.for_actor("reader_pool"));
      watch(self, which, st.handles.reader);
      break;
    }
    case child::directory: {
      st.directory = sys.spawn<caf::detached>(community_directory_impl, cfg.database_url,
                                              st.snapshot, caf::timespan{std::chrono::seconds(2)});
      watch(self, which, st.directory);
      break;
    }
    case child::group: {
      auto session = sys.spawn<caf::detached>(group_session_impl, cfg.database_url, st.signer,
                                              st.env);
      st.handles.group = sys.spawn(
        group_actor_impl, session, st.handles.hub, st.env.for_actor("group"), cfg.database_url,
        caf::timespan{std::chrono::seconds(cfg.ttl_reap_seconds)},
        st.restarts[static_cast<size_t>(child::group)] > 0);
      watch(self, which, st.handles.group);
      break;
    }
    default:
      return;
  }
  st.board->set(st.handles);
}

}  // namespace

supervisor_actor::behavior_type
node_supervisor_impl(supervisor_actor::stateful_pointer<supervisor_state> self, node_config cfg,
                     node_env env, db::relay_signer signer, std::shared_ptr<handle_board> board,
                     std::shared_ptr<community_snapshot> snapshot) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.env = std::move(env);
  st.signer = std::move(signer);
  st.board = std::move(board);
  st.snapshot = std::move(snapshot);
  // The hub first: ingest is spawned with its handle.
  for (auto which : {child::hub, child::ingest, child::reader, child::directory, child::group})
    spawn_child(self, which);
  self->set_down_handler([self](const caf::down_msg& msg) {
    auto& st = self->state;
    auto i = std::find(st.addrs.begin(), st.addrs.end(), msg.source);
    if (i == st.addrs.end())
      return;
    auto which = static_cast<child>(i - st.addrs.begin());
    *i = caf::actor_addr{};
    auto n = st.restarts[static_cast<size_t>(which)]++;
    auto delay = std::chrono::milliseconds(std::min(100 << std::min(n, 6), 5000));
    log::error("supervisor", "child exited; restarting",
               {{"child", child_name(which)}, {"reason", caf::to_string(msg.reason)},
                {"restart", std::to_string(n + 1)},
                {"delay_ms", std::to_string(delay.count())}});
    self->delayed_send(self, delay, restart_child{static_cast<uint8_t>(which)});
    // Ingest and the group actor send to the hub they were spawned with.
    if (which == child::hub)
      for (auto dependent : {child::ingest, child::group})
        if (auto h = caf::actor_cast<caf::actor>(st.addrs[static_cast<size_t>(dependent)]))
          self->send_exit(h, caf::exit_reason::user_shutdown);
  });
  self->set_exit_handler([self](const caf::exit_msg& msg) {
    // Shutting down: take the children with us.
    auto& st = self->state;
    for (auto& addr : st.addrs)
      if (auto h = caf::actor_cast<caf::actor>(addr))
        self->send_exit(h, caf::exit_reason::user_shutdown);
    self->quit(msg.reason);
  });
  return {
    [self](restart_child msg) {
      auto which = static_cast<child>(msg.which);
      auto& st = self->state;
      if ((which == child::ingest || which == child::group)
          && !st.addrs[static_cast<size_t>(child::hub)]) {
        self->delayed_send(self, std::chrono::milliseconds(100), msg);
        return;
      }
      spawn_child(self, which);
      log::info("supervisor", "child restarted", {{"child", child_name(which)}});
    },
  };
}

}  // namespace waggle
