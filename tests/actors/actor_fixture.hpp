#pragma once

// A GoogleTest fixture that drives CAF's test_coordinator directly
// (scheduler.policy = testing): every message is delivered when the test
// says run(), so actor interleavings are exact and nothing sleeps.

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <gtest/gtest.h>

#include "actors/support/env.hpp"
#include "gateway/socket_sink.hpp"
#include "messages/interfaces.hpp"
#include "messages/register_types.hpp"

namespace waggle::testing {

// Records what the connection actor sends to its socket.
struct recording_sink : socket_sink {
  std::vector<std::string> frames;
  std::optional<uint16_t> close_code;
  void send_text(std::string frame) override { frames.push_back(std::move(frame)); }
  void close(uint16_t code, std::string) override { close_code = code; }
  // Frames sent since the last call.
  std::vector<std::string> take() {
    auto out = std::move(frames);
    frames.clear();
    return out;
  }
};

// A fake ingest whose replies the test controls: it keeps each request's
// promise until the test tells it (with a "reply" message, so the promise is
// delivered from inside the actor, as CAF requires) to commit or fail it.
struct fake_ingest_log {
  struct held {
    ingest_request req;
    caf::typed_response_promise<ingest_reply> promise;
  };
  std::deque<held> held_requests;
};

inline caf::behavior fake_ingest(caf::event_based_actor* self,
                                 std::shared_ptr<fake_ingest_log> log) {
  return {
    [self, log](ingest_request& req) {
      auto promise = self->make_response_promise<ingest_reply>();
      log->held_requests.push_back({req, promise});
      return promise;
    },
    [log](caf::atom_value, int outcome, std::string& reason) {
      auto h = std::move(log->held_requests.front());
      log->held_requests.pop_front();
      h.promise.deliver(ingest_reply{static_cast<write_outcome>(outcome), std::move(reason)});
    },
  };
}

// A fake reader whose history replies the test controls the same way.
struct fake_reader_log {
  struct held {
    history_request req;
    caf::typed_response_promise<history_reply> promise;
  };
  std::deque<held> held_requests;
  uint64_t count = 0;
  struct held_access {
    access_request req;
    caf::typed_response_promise<access_reply> promise;
  };
  std::deque<held_access> access_requests;
  std::vector<read_withdraw> withdrawals;  // what the connection withdrew (it talks to a pool)
  // Counts are answered with `count` at once, or held while `hold_counts`.
  bool hold_counts = false;
  struct held_count {
    count_request req;
    caf::typed_response_promise<count_reply> promise;
  };
  std::deque<held_count> count_requests;
  // NIP-77 item reads: answered with `sync_reply` at once, or held while
  // `hold_syncs`; every request is kept in `sync_asked`.
  sync_items_reply sync_reply;
  bool hold_syncs = false;
  std::vector<sync_items_request> sync_asked;
  std::deque<caf::typed_response_promise<sync_items_reply>> sync_requests;
};

inline caf::behavior fake_reader(caf::event_based_actor* self,
                                 std::shared_ptr<fake_reader_log> log) {
  return {
    [self, log](history_request& req) {
      auto promise = self->make_response_promise<history_reply>();
      log->held_requests.push_back({req, promise});
      return promise;
    },
    [self, log](count_request& req) {
      auto promise = self->make_response_promise<count_reply>();
      if (log->hold_counts)
        log->count_requests.push_back({req, promise});
      else
        promise.deliver(count_reply{log->count, {}});
      return promise;
    },
    [self, log](sync_items_request& req) {
      auto promise = self->make_response_promise<sync_items_reply>();
      log->sync_asked.push_back(req);
      if (log->hold_syncs)
        log->sync_requests.push_back(promise);
      else
        promise.deliver(log->sync_reply);
      return promise;
    },
    [log](caf::atom_value, sync_items_reply& reply) {
      auto p = std::move(log->sync_requests.front());
      log->sync_requests.pop_front();
      p.deliver(std::move(reply));
    },
    [log](caf::atom_value, count_reply& reply) {
      auto h = std::move(log->count_requests.front());
      log->count_requests.pop_front();
      h.promise.deliver(std::move(reply));
    },
    [log](read_withdraw& w) { log->withdrawals.push_back(std::move(w)); },
    [](const reader_attach&) {},  // as a pool's session: the test says when it is idle
    [self, log](access_request& req) {
      auto promise = self->make_response_promise<access_reply>();
      log->access_requests.push_back({req, promise});
      return promise;
    },
    [log](caf::atom_value, access_reply& reply) {
      auto h = std::move(log->access_requests.front());
      log->access_requests.pop_front();
      h.promise.deliver(std::move(reply));
    },
    [log](caf::atom_value, std::vector<std::string>& raws) {
      auto h = std::move(log->held_requests.front());
      log->held_requests.pop_front();
      h.promise.deliver(history_reply{std::move(raws), {}, {}, {}, false, {}});
    },
    // One page of a paged history: `more` says another follows (its
    // request continues past a horizon the test can recognise).
    [log](caf::atom_value, std::vector<std::string>& raws, bool more) {
      auto h = std::move(log->held_requests.front());
      log->held_requests.pop_front();
      history_reply reply;
      reply.raws = std::move(raws);
      reply.more = more;
      if (more) {
        reply.next = h.req.page;
        reply.next.started = true;
        reply.next.horizon_created_at = 42;
        reply.next.horizon_id = std::string(64, 'c');
        reply.next.remaining = {7};
      }
      h.promise.deliver(std::move(reply));
    },
    // A page whose access re-check failed (a removal since the last page).
    [log](caf::atom_value, status& err) {
      auto h = std::move(log->held_requests.front());
      log->held_requests.pop_front();
      history_reply reply;
      reply.err = std::move(err);
      h.promise.deliver(std::move(reply));
    },
    // A history reply with the access re-check's grants, as the real reader
    // sends for a REQ naming channels.
    [log](caf::atom_value, std::vector<std::string>& raws, std::vector<channel_grant>& grants) {
      auto h = std::move(log->held_requests.front());
      log->held_requests.pop_front();
      h.promise.deliver(history_reply{std::move(raws), {}, std::move(grants), {}, false, {}});
    },
  };
}

// A fake group actor: holds NIP-29 commands until told to answer them.
struct fake_group_log {
  struct held {
    group_request req;
    caf::typed_response_promise<ingest_reply> promise;
  };
  std::deque<held> held_requests;
};

inline caf::behavior fake_group(caf::event_based_actor* self,
                                std::shared_ptr<fake_group_log> log) {
  return {
    [self, log](group_request& req) {
      auto promise = self->make_response_promise<ingest_reply>();
      log->held_requests.push_back({req, promise});
      return promise;
    },
    [log](caf::atom_value, int outcome, std::string& reason) {
      auto h = std::move(log->held_requests.front());
      log->held_requests.pop_front();
      h.promise.deliver(ingest_reply{static_cast<write_outcome>(outcome), std::move(reason)});
    },
  };
}

// Stands in for a connection actor where a test needs its handle (to
// subscribe at the hub): live events go to `on_live`, if set; the rest is
// dropped.
inline connection_actor::behavior_type
stand_in_connection(std::function<void(const live_event&)> on_live) {
  return {
    [](const socket_frame&) {},
    [](const socket_closed&) {},
    [](const socket_drained&) {},
    [](const history_stall_check&) {},
    [on_live](const live_event& ev) {
      if (on_live)
        on_live(ev);
    },
    [](const drain_request&) {},
    [](const channel_revoked&) {},
    [](const access_revoked&) {},
    [](const address_blocked&) {},
  };
}

class actor_test : public ::testing::Test {
 protected:
  actor_test() {
    register_types(cfg_);
    cfg_.set("scheduler.policy", caf::atom("testing"));
    cfg_.set("logger.verbosity", caf::atom("quiet"));
    cfg_.set("middleman.network-backend", caf::atom("testing"));
    sys_ = std::make_unique<caf::actor_system>(cfg_);
    sched_ = &dynamic_cast<caf::scheduler::test_coordinator&>(sys_->scheduler());
  }

  ~actor_test() override {
    // Fakes that hold response promises keep their actors alive in a cycle;
    // stop every actor the test spawned so the system can shut down.
    for (auto& a : spawned_)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    sched_->run();
    sys_->await_actors_before_shutdown(false);
  }

  // Spawns an actor that the fixture stops at teardown.
  template <class... Ts>
  auto spawn(Ts&&... xs) {
    auto handle = sys_->spawn(std::forward<Ts>(xs)...);
    spawned_.push_back(caf::actor_cast<caf::actor>(handle));
    return handle;
  }

  // Drops the fixture's own handle to an actor, for a test that checks what
  // else still references it once it is gone.
  void forget(const caf::actor_addr& who) {
    std::erase_if(spawned_, [&](const caf::actor& a) { return a.address() == who; });
  }

  // Delivers every pending message (and what they cause) until all idle.
  size_t run() { return sched_->run(); }

  caf::actor_system& sys() { return *sys_; }
  caf::scheduler::test_coordinator& sched() { return *sched_; }

  // A deterministic environment: fixed wall clock, counting challenges, and
  // the test coordinator's clock as the monotonic one (advance_time moves it).
  node_env test_env(int64_t now = 1'700'000'000) {
    node_env env;
    env.sources.steady_now = [this] { return sched_->clock().now(); };
    auto counter = std::make_shared<int>(0);
    env.sources.unix_now = [now] { return now; };
    env.sources.random_challenge = [counter] { return "challenge-" + std::to_string(++*counter); };
    env.stats = std::make_shared<waggle::metrics>();
    return env;
  }

 private:
  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  caf::scheduler::test_coordinator* sched_ = nullptr;
  std::vector<caf::actor> spawned_;
};

}  // namespace waggle::testing
