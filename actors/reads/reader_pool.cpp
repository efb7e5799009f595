#include "actors/reads/reader_pool.hpp"

#include <algorithm>
#include <type_traits>

#include "actors/trace/trace_recorder.hpp"

namespace waggle {

// -- fair_read_queue ------------------------------------------------------------

void fair_read_queue::push(queued_read read) {
  auto community = read.community;
  auto from = read.from;
  auto& c = communities_[community];
  auto& r = c.requesters[from];
  r.reads.push_back(std::move(read));
  ++size_;
  if (r.reads.size() > 1)
    return;  // already in its community's turn
  // Into the turn after everyone served no later than it: a requester that
  // was just served (or a newcomer, 0) goes where its last service says,
  // not to the front because its queue had run dry for a moment.
  auto pos = std::upper_bound(c.turn.begin(), c.turn.end(), r.last_served,
                              [&](uint64_t v, const caf::actor_addr& a) {
                                return v < c.requesters.at(a).last_served;
                              });
  c.turn.insert(pos, from);
  if (c.turn.size() > 1)
    return;  // the community is in the turn already
  auto cpos = std::upper_bound(turn_.begin(), turn_.end(), c.last_served,
                               [&](uint64_t v, int64_t id) {
                                 return v < communities_.at(id).last_served;
                               });
  turn_.insert(cpos, community);
}

std::optional<queued_read> fair_read_queue::pop(bool costly) {
  auto costly_front = [&](const community_queue& c, const caf::actor_addr& a) {
    return c.requesters.at(a).reads.front().costly;
  };
  auto runnable = [&](const community_queue& c, const caf::actor_addr& a) {
    return costly || !costly_front(c, a);
  };
  // The first community in the turn with a requester whose next read may
  // run, and in it the first such requester: with costly reads allowed, the
  // fronts of both turns.
  auto ci = turn_.begin();
  std::deque<caf::actor_addr>::iterator ri;
  for (; ci != turn_.end(); ++ci) {
    auto& c = communities_.at(*ci);
    ri = std::find_if(c.turn.begin(), c.turn.end(),
                      [&](const caf::actor_addr& a) { return runnable(c, a); });
    if (ri != c.turn.end())
      break;
  }
  if (ci == turn_.end())
    return std::nullopt;
  bool lane = costly_front(communities_.at(*ci), *ri);
  if (lane) {
    // The costly lane's turn: among the communities with a costly read at a
    // requester's front, the one whose costly read ran longest ago (the
    // turn's order breaks ties), and in it the first such requester. (With
    // costly reads allowed, ci and ri are the fronts of both turns.)
    for (auto cj = turn_.begin(); cj != turn_.end(); ++cj) {
      auto& c = communities_.at(*cj);
      if (cj == ci || c.last_costly_served >= communities_.at(*ci).last_costly_served)
        continue;
      auto rj = std::find_if(c.turn.begin(), c.turn.end(),
                             [&](const caf::actor_addr& a) { return costly_front(c, a); });
      if (rj != c.turn.end()) {
        ci = cj;
        ri = rj;
      }
    }
  }
  auto community = *ci;
  turn_.erase(ci);
  auto& c = communities_.at(community);
  auto from = *ri;
  c.turn.erase(ri);
  auto& r = c.requesters.at(from);
  auto read = std::move(r.reads.front());
  r.reads.pop_front();
  --size_;
  ++r.running;
  c.last_served = r.last_served = ++served_;
  if (lane)
    c.last_costly_served = served_;
  // Served last, so both go to the back of their turn if they still wait.
  if (!r.reads.empty())
    c.turn.push_back(from);
  if (!c.turn.empty())
    turn_.push_back(community);
  return read;
}

void fair_read_queue::finished(int64_t community, const caf::actor_addr& from) {
  auto c = communities_.find(community);
  if (c == communities_.end())
    return;
  auto r = c->second.requesters.find(from);
  if (r == c->second.requesters.end())
    return;
  if (r->second.running > 0)
    --r->second.running;
  forget_if_idle(c->second, from);
}

void fair_read_queue::forget_if_idle(community_queue& c, const caf::actor_addr& from) {
  auto r = c.requesters.find(from);
  if (r == c.requesters.end() || !r->second.reads.empty() || r->second.running != 0)
    return;
  // An idle requester is remembered while its last service still places it
  // behind someone waiting: one that reads one at a time (a history's
  // pages, COUNT after COUNT; a session says it is idle before its reply is
  // back) is idle between every two reads, and coming back as a newcomer,
  // "never served", it went in front of a requester with a backlog every
  // time (red team). Once the oldest waiting requester was served no
  // earlier, "never served" places it the same, and it is forgotten.
  if (!c.turn.empty() && r->second.last_served > c.requesters.at(c.turn.front()).last_served) {
    if (c.requesters.size() >= c.prune_at)
      prune(c);
    return;
  }
  c.requesters.erase(r);
}

void fair_read_queue::prune(community_queue& c) {
  uint64_t oldest = c.turn.empty() ? UINT64_MAX : c.requesters.at(c.turn.front()).last_served;
  std::erase_if(c.requesters, [&](const auto& kv) {
    const requester& r = kv.second;
    return r.reads.empty() && r.running == 0 && r.last_served <= oldest;
  });
  // Doubling: a prune that frees little is not repeated at every read.
  c.prune_at = std::max<size_t>(64, 2 * c.requesters.size());
}

std::vector<queued_read> fair_read_queue::take_from(const caf::actor_addr& from, bool all,
                                                    const std::vector<uint64_t>& request_ids) {
  std::vector<queued_read> out;
  for (auto& [id, c] : communities_) {
    auto r = c.requesters.find(from);
    if (r == c.requesters.end() || r->second.reads.empty())
      continue;
    auto& reads = r->second.reads;
    for (auto i = reads.begin(); i != reads.end();) {
      bool listed = std::find(request_ids.begin(), request_ids.end(), i->request_id)
                    != request_ids.end();
      if (all || listed) {
        out.push_back(std::move(*i));
        i = reads.erase(i);
        --size_;
      } else {
        ++i;
      }
    }
    if (reads.empty()) {
      std::erase(c.turn, from);
      forget_if_idle(c, from);
      if (c.turn.empty())
        std::erase(turn_, id);
    }
  }
  return out;
}

// -- reader_pool_state ----------------------------------------------------------

void reader_pool_state::init(reader_pool_ptr self_ptr, std::vector<reader_session_actor> all,
                             node_env e) {
  self = self_ptr;
  sessions = std::move(all);
  busy.assign(sessions.size(), false);
  running.resize(sessions.size());
  running_costly.assign(sessions.size(), false);
  max_costly = std::max<size_t>(1, sessions.size() - 1);
  env = std::move(e);
  for (size_t k = 0; k < sessions.size(); ++k) {
    self->link_to(sessions[k]);
    self->send(sessions[k], reader_attach{k});
  }
}

template <class Reply, class Req>
caf::typed_response_promise<Reply> reader_pool_state::take(Req&& req) {
  // Sender and request id first: make_response_promise moves them out of the
  // current message (CAF 0.17), leaving current_sender() null.
  queued_read read;
  read.community = req.community_id;
  read.from = caf::actor_cast<caf::actor_addr>(self->current_sender());
  read.request_id = self->current_message_id().request_id().integer_value();
  if constexpr (std::is_same_v<std::decay_t<Req>, count_request> ||
                std::is_same_v<std::decay_t<Req>, sync_items_request>)
    read.costly = true;
  else if constexpr (std::is_same_v<std::decay_t<Req>, history_request>)
    read.costly = std::any_of(req.filters.begin(), req.filters.end(),
                              [](const proto::filter& f) { return f.search.has_value(); });
  auto promise = self->make_response_promise<Reply>();
  // Delegated: the session answers the requester directly (and records the
  // exchange as its own, as before the pool held a queue).
  read.run = [this, promise, req = std::move(req)](size_t k) mutable {
    promise.delegate(sessions[k], std::move(req));
  };
  queue.push(std::move(read));
  dispatch();
  return promise;
}

void reader_pool_state::dispatch() {
  // The lowest idle session first: which session serves which read is then
  // a function of the order of reads and replies alone, as a replay needs.
  for (size_t k = 0; k < sessions.size() && queue.size() > 0; ++k) {
    if (busy[k])
      continue;
    auto read = queue.pop(costly_running < max_costly);
    if (!read)
      break;  // only costly reads wait, and their sessions are taken
    busy[k] = true;
    running[k] = {read->community, read->from};
    running_costly[k] = read->costly;
    costly_running += read->costly ? 1 : 0;
    read->run(k);
  }
  publish_gauges();
}

void reader_pool_state::on_idle(size_t session) {
  if (session >= sessions.size() || !busy[session])
    return;
  busy[session] = false;
  if (running_costly[session]) {
    running_costly[session] = false;
    --costly_running;
  }
  queue.finished(running[session].first, running[session].second);
  running[session] = {};
  dispatch();
}

void reader_pool_state::on_withdraw(const caf::actor_addr& from, const read_withdraw& msg) {
  auto reads = queue.take_from(from, msg.all, msg.requests);
  if (env.stats && !reads.empty())
    env.stats->reads_withdrawn += reads.size();
  // A withdrawn costly read may have held plain reads of its requester
  // behind it while a session sat idle: they may run now (red team).
  dispatch();
}

void reader_pool_state::publish_gauges() {
  if (!env.stats)
    return;
  env.stats->reads_queued = static_cast<int64_t>(queue.size());
  env.stats->readers_busy = std::count(busy.begin(), busy.end(), true);
}

reader_pool_actor::behavior_type reader_pool_actor_impl(reader_pool_ptr self,
                                                        std::vector<reader_session_actor> sessions,
                                                        node_env env) {
  self->state.init(self, std::move(sessions), std::move(env));
  // Each read is recorded as the pool takes it, then queued; a session takes
  // the next one when it says it is idle.
  return {
    // -- reads ------------------------------------------------------------------
    [self](history_request& req) {
      trace_section section{self->state.env};
      trace_reader_in(self->state.env, self->current_sender(), req);
      return self->state.take<history_reply>(std::move(req));
    },
    [self](count_request& req) {
      trace_section section{self->state.env};
      trace_reader_in(self->state.env, self->current_sender(), req);
      return self->state.take<count_reply>(std::move(req));
    },
    [self](sync_items_request& req) {
      trace_section section{self->state.env};
      trace_reader_in(self->state.env, self->current_sender(), req);
      return self->state.take<sync_items_reply>(std::move(req));
    },
    [self](access_request& req) {
      trace_section section{self->state.env};
      trace_reader_in(self->state.env, self->current_sender(), req);
      return self->state.take<access_reply>(std::move(req));
    },
    // -- withdrawal -------------------------------------------------------------
    [self](const read_withdraw& msg) {
      self->state.on_withdraw(caf::actor_cast<caf::actor_addr>(self->current_sender()), msg);
    },
    // -- sessions ---------------------------------------------------------------
    [self](const reader_idle& msg) {
      // Recorded: when the pool learns a session is free decides which read
      // it deals next, so a replay feeds it at this point (docs/traces.md).
      auto& env = self->state.env;
      trace_section section{env};
      if (env.trace && env.trace->node_level())
        env.trace->record(env.actor, "reader_idle",
                          trace_fields{}.str("type", std::to_string(msg.index)));
      self->state.on_idle(msg.index);
    },
  };
}

}  // namespace waggle
