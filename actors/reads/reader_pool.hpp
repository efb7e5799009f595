#pragma once

// The reader pool: the one address connections send reads to. It holds the
// queue itself and hands a read to a session only when that session is idle
// (it said so with reader_idle), taking turns by community, then by
// requester within a community: one connection's backlog waits behind its
// own reads, never in front of another community's (docs/architecture.md,
// "reader pool"). It records the order it takes reads in (a replay feeds
// them in that order, and the queue decides the rest deterministically).
// Replica routing will live here.

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

#include "actors/support/env.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct reader_pool_state;
using reader_pool_ptr = reader_pool_actor::stateful_pointer<reader_pool_state>;

// One read waiting for a session: `run` delegates it (with the requester's
// promise) to a session; dropping it drops the promise, which in CAF 0.17
// sends nothing (a withdrawn read is never answered).
struct queued_read {
  int64_t community = 0;
  caf::actor_addr from;
  uint64_t request_id = 0;  // the requester's caf::message_id::request_id
  // A NIP-50 search or a NIP-45 COUNT: the costly kinds, which may each run
  // up to the statement ceiling (a count reads every match), with a lane of
  // their own.
  bool costly = false;
  std::function<void(size_t session)> run;
};

// The pool's queue, plain so that its order is tested without a mailbox.
// Reads are taken by turns: the community served longest ago first (one
// never served before any), then within it the requester served longest
// ago; a requester's own reads keep their order. A requester is remembered
// while it has reads queued or running, or while its last service places it
// behind someone waiting; a community for the node's life (there are few).
class fair_read_queue {
 public:
  void push(queued_read read);
  // The next read by turns, or nothing; it counts as running until finished().
  // Without `costly`, a requester whose next read is costly is passed over
  // (its later reads wait behind it: a requester's order never changes) and
  // the turn goes on to the next one that has a plain read. When the turn
  // comes to a costly read, costly reads take their own turn: the community
  // whose last costly read ran longest ago, so plain reads served past a
  // community's waiting search or count never send it to the back.
  std::optional<queued_read> pop(bool costly = true);
  void finished(int64_t community, const caf::actor_addr& from);
  // Removes the sender's queued reads (`all`, or those whose request id is
  // listed) and returns them, in arrival order.
  std::vector<queued_read> take_from(const caf::actor_addr& from, bool all,
                                     const std::vector<uint64_t>& request_ids);
  size_t size() const { return size_; }

 private:
  struct requester {
    std::deque<queued_read> reads;
    uint64_t last_served = 0;
    size_t running = 0;
  };
  struct community_queue {
    std::deque<caf::actor_addr> turn;  // requesters with queued reads, by last_served
    std::unordered_map<caf::actor_addr, requester> requesters;
    uint64_t last_served = 0;
    uint64_t last_costly_served = 0;  // the costly lane's own turn
    size_t prune_at = 64;             // remembered requesters before idle ones are pruned
  };
  void forget_if_idle(community_queue& c, const caf::actor_addr& from);
  void prune(community_queue& c);
  std::deque<int64_t> turn_;  // communities with queued reads, by last_served
  std::unordered_map<int64_t, community_queue> communities_;
  uint64_t served_ = 0;
  size_t size_ = 0;
};

struct reader_pool_state {
  static inline const char* name = "reader_pool";

  reader_pool_ptr self = nullptr;
  std::vector<reader_session_actor> sessions;
  std::vector<bool> busy;
  // Whose read each busy session runs (community, requester), for the turns.
  std::vector<std::pair<int64_t, caf::actor_addr>> running;
  // Searches and counts run on at most all sessions but one (one with a
  // single session): a flood of them, each up to its ceiling, leaves a
  // session to every other read (docs/search.md, "Cost").
  std::vector<bool> running_costly;
  size_t costly_running = 0;
  size_t max_costly = 1;
  fair_read_queue queue;
  node_env env;  // "reader_pool": records the order it takes reads in

  void init(reader_pool_ptr self_ptr, std::vector<reader_session_actor> all, node_env e);
  // Queues a read from the current sender and answers it through `promise`.
  template <class Reply, class Req>
  caf::typed_response_promise<Reply> take(Req&& req);
  void on_withdraw(const caf::actor_addr& from, const read_withdraw& msg);
  void on_idle(size_t session);

 private:
  void dispatch();
  void publish_gauges();
};

reader_pool_actor::behavior_type reader_pool_actor_impl(reader_pool_ptr self,
                                                        std::vector<reader_session_actor> sessions,
                                                        node_env env);

}  // namespace waggle
