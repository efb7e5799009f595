#include "actors/reads/reader_session.hpp"

#include <pqxx/except>

#include "actors/support/log.hpp"
#include "actors/trace/trace_recorder.hpp"
#include "db/event_store.hpp"
#include "db/group_store.hpp"
#include "db/heartbeat.hpp"
#include "db/membership_store.hpp"
#include "db/read_budget.hpp"

namespace waggle {

namespace {

// Read access to the community, then to every channel in `access`, or the
// refusal of the first that may not be read (docs/communities.md,
// proto::nip29::may_read).
access_reply check_access(pqxx::connection& conn, int64_t community_id, const read_access& access,
                          db::read_budget& budget) {
  access_reply reply;
  auto facts = db::read_community_access(conn, community_id, access.pubkeys, &budget);
  reply.community = {true, facts.policy == community_policy::open, std::move(facts.members),
                     std::move(facts.guests)};
  if (!facts.exists || !reply.community.allows()) {
    reply.err = {ec::restricted, "not a member of this community"};
    return reply;
  }
  if (access.channels.empty())
    return reply;
  for (auto& a : db::read_channel_access(conn, community_id, access.channels, access.pubkeys,
                                           &budget)) {
    if (auto st = proto::nip29::may_read(a.view, a.members.size()); !st.ok()) {
      reply.err = {st.code, st.reason + " (" + a.channel + ")"};
      reply.grants.clear();
      return reply;
    }
    reply.grants.push_back({a.channel, a.view.open, std::move(a.members)});
  }
  return reply;
}

}  // namespace

std::vector<std::string> reader_session_setup(int64_t statement_timeout_ms) {
  if (statement_timeout_ms <= 0)
    return {};
  return {"SET statement_timeout = " + std::to_string(statement_timeout_ms)};
}

void reader_session_state::init(reader_session_ptr self_ptr, std::string database_url,
                                std::string role, proto::filter_limits l,
                                int64_t statement_timeout_ms, node_env e,
                                std::shared_ptr<route_context> r) {
  self = self_ptr;
  routing = std::move(r);
  env = e.for_actor(role);
  session = std::make_unique<db::session>(std::move(database_url), std::move(role),
                                          reader_session_setup(statement_timeout_ms),
                                          log::session_report);
  limits = l;
  statement_timeout = std::chrono::milliseconds(statement_timeout_ms);
}

template <class Reply, class Fn>
Reply reader_session_state::run_read(Fn&& fn) {
  Reply reply;
  auto* conn = session->get();
  if (!conn) {
    reply.err = {ec::unavailable, "database unavailable"};
    return reply;
  }
  // The read's whole time in the database, from here: each of its
  // statements gets what is left of it (db/read_budget.hpp).
  db::read_budget budget{statement_timeout};
  try {
    fn(*conn, reply, budget);
  } catch (const db::read_budget_spent&) {
    log::warn("reader", "query took too long", {});
    reply.err = query_too_long();
  } catch (const pqxx::broken_connection&) {
    session->reset();
    reply.err = {ec::unavailable, "database unavailable"};
  } catch (const pqxx::sql_error& e) {
    // 57014 query_canceled: our statement_timeout, as the budget armed it
    // (nobody else cancels a reader's query). Said as such, so a client with
    // too wide a read knows.
    if (e.sqlstate() == "57014") {
      log::warn("reader", "query took too long", {});
      reply.err = query_too_long();
    } else {
      log::error("reader", "query failed", {{"error", e.what()}});
      reply.err = {ec::internal, "query failed"};
    }
  } catch (const std::exception& e) {
    log::error("reader", "query failed", {{"error", e.what()}});
    reply.err = {ec::internal, "query failed"};
  }
  // The statements ran outside a transaction: a budget that armed one set
  // the session's statement_timeout, which the next read must not inherit.
  if (budget.changed_session() && session->connected()) {
    try {
      budget.end(*conn);
    } catch (const std::exception&) {
      session->reset();  // a fresh connection starts from the setup value
    }
  }
  return reply;
}

// NIP-40's "now" for a read: this session's wall clock, read at the moment
// the query is built, so an event stops being served the second it expires
// (docs/expiration.md says why not the database's clock). Read from the
// source, not through env.unix_now(): a trace records a session's request and
// reply, and a replay answers them from the trace with a stand-in that never
// reads a clock, so a recorded reading here would be one the replay misses.
void reader_session_state::idle() {
  if (pool)
    caf::anon_send(pool, reader_idle{index});
}

int64_t reader_session_state::read_clock() const { return env.sources.unix_now(); }

namespace {

bool any_search(const std::vector<proto::filter>& filters) {
  for (auto& f : filters)
    if (f.search)
      return true;
  return false;
}

ring_entry::clock::time_point steady_at(int64_t ns) {
  return ring_entry::clock::time_point{std::chrono::nanoseconds{ns}};
}

}  // namespace

void reader_session_state::routed(const read_shape& shape, pqxx::connection& conn,
                                  int64_t community_id, db::read_budget& budget,
                                  const read_fn& read) {
  if (!routing) {
    read(conn, &prepared, budget);
    return;
  }
  if (log::enabled(log::level::debug) && identified != &conn) {
    backend = db::backend_identity(conn);
    identified = &conn;
  }
  auto out = run_routed(*routing, shape, conn, backend, community_id, statement_timeout, read);
  if (out.decision.replica)
    return;
  // The writer answers; after a replica that failed mid-read, with the
  // whole budget again (nothing of the replica's page was kept).
  if (out.decision.reason == route_reason::replica_error)
    budget.restart();
  read(conn, &prepared, budget);
}

history_reply reader_session_state::on_history(const history_request& req) {
  return run_read<history_reply>([&](pqxx::connection& conn, history_reply& reply,
                                     db::read_budget& budget) {
    // Checked again here, after the subscription was registered with the
    // hub: a removal that committed since the first check is seen now, and
    // one that commits later reaches the subscription as a channel_revoked
    // through the hub.
    auto access = check_access(conn, req.community_id, req.access, budget);
    if (!access.err.ok()) {
      reply.err = access.err;
      return;
    }
    reply.grants = std::move(access.grants);
    reply.community = std::move(access.community);
    auto shape = shape_of(req.filters, &req.page, steady_at(req.read_after_ns));
    shape.path = any_search(req.filters) ? "search" : "history";
    db::history_page_result page;
    routed(shape, conn, req.community_id, budget,
           [&](pqxx::connection& c, db::prepared_reads* p, db::read_budget& b) {
             page = db::query_events_page(c, req.community_id, req.filters, limits, read_clock(),
                                          req.page, &b, p);
           });
    reply.raws = std::move(page.raws);
    reply.more = page.more;
    reply.next = std::move(page.next);
  });
}

count_reply reader_session_state::on_count(const count_request& req) {
  return run_read<count_reply>([&](pqxx::connection& conn, count_reply& reply,
                                   db::read_budget& budget) {
    if (auto access = check_access(conn, req.community_id, req.access, budget); !access.err.ok()) {
      reply.err = access.err;
      return;
    }
    auto shape = shape_of(req.filters, nullptr, steady_at(req.read_after_ns));
    shape.path = any_search(req.filters) ? "search" : "count";
    routed(shape, conn, req.community_id, budget,
           [&](pqxx::connection& c, db::prepared_reads* p, db::read_budget& b) {
             reply.count = db::count_events(c, req.community_id, req.filters, read_clock(), &b, p,
                                            limits);
           });
  });
}

sync_items_reply reader_session_state::on_sync_items(const sync_items_request& req) {
  return run_read<sync_items_reply>([&](pqxx::connection& conn, sync_items_reply& reply,
                                        db::read_budget& budget) {
    if (auto access = check_access(conn, req.community_id, req.access, budget); !access.err.ok()) {
      reply.err = access.err;
      return;
    }
    auto shape = shape_of(req.filters, nullptr, steady_at(req.read_after_ns));
    shape.path = "sync";
    db::sync_items_result items;
    routed(shape, conn, req.community_id, budget,
           [&](pqxx::connection& c, db::prepared_reads* p, db::read_budget& b) {
             items = db::sync_items(c, req.community_id, req.filters, read_clock(),
                                    req.max_items, &b, p);
           });
    reply.packed = std::move(items.packed);
    reply.count = items.count;
    reply.too_many = items.too_many;
  });
}

access_reply reader_session_state::on_access(const access_request& req) {
  access_reply out;
  auto fallback = run_read<access_reply>([&](pqxx::connection& conn, access_reply&,
                                             db::read_budget& budget) {
    out = check_access(conn, req.community_id, req.access, budget);
  });
  return fallback.err.ok() ? out : fallback;
}

reader_session_actor::behavior_type
reader_session_actor_impl(reader_session_ptr self, std::string database_url, std::string role,
                          proto::filter_limits limits, int64_t statement_timeout_ms, node_env env,
                          std::shared_ptr<route_context> routing) {
  // So trace records can name this session as the sender of its replies.
  if (env.trace)
    env.trace->spawned(role, caf::actor_cast<caf::actor>(self));
  self->state.init(self, std::move(database_url), std::move(role), limits, statement_timeout_ms,
                   std::move(env), std::move(routing));
  // Every read ends with reader_idle to the pool: it hands out the next one.
  return {
    // -- reads ------------------------------------------------------------------
    [self](history_request& req) -> history_reply {
      auto r = traced_exchange(self->state.env, req, [&] { return self->state.on_history(req); });
      self->state.idle();
      return r;
    },
    [self](count_request& req) -> count_reply {
      auto r = traced_exchange(self->state.env, req, [&] { return self->state.on_count(req); });
      self->state.idle();
      return r;
    },
    [self](sync_items_request& req) -> sync_items_reply {
      auto r = traced_exchange(self->state.env, req, [&] { return self->state.on_sync_items(req); });
      self->state.idle();
      return r;
    },
    [self](access_request& req) -> access_reply {
      auto r = traced_exchange(self->state.env, req, [&] { return self->state.on_access(req); });
      self->state.idle();
      return r;
    },
    // -- pool -------------------------------------------------------------------
    [self](const reader_attach& msg) {
      self->state.pool = caf::actor_cast<caf::actor>(self->current_sender());
      self->state.index = msg.index;
    },
  };
}

}  // namespace waggle
