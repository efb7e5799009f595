#include "actors/reads/replica_route.hpp"

#include <algorithm>

#include <pqxx/except>

#include "actors/support/log.hpp"
#include "actors/support/metrics.hpp"
#include "db/heartbeat.hpp"
#include "db/read_budget.hpp"
#include "db/replica_pool.hpp"

namespace waggle {

std::string_view to_string(route_reason r) {
  switch (r) {
    case route_reason::covered: return "covered";
    case route_reason::bounded: return "bounded";
    case route_reason::disabled: return "disabled";
    case route_reason::uninitialized: return "uninitialized";
    case route_reason::stale: return "stale";
    case route_reason::reader_acquire_timeout: return "reader_acquire_timeout";
    case route_reason::reader_validation_error: return "reader_validation_error";
    case route_reason::reader_token_behind: return "reader_token_behind";
    case route_reason::community_share: return "community_share";
    case route_reason::community_reserve: return "community_reserve";
    case route_reason::replica_error: return "replica_error";
  }
  return "unknown";
}

read_shape shape_of(const std::vector<proto::filter>& filters, const history_page* page,
                    ring_entry::clock::time_point read_after) {
  read_shape shape;
  shape.read_after = read_after;
  std::optional<int64_t> upper;
  bool head = filters.empty();
  for (auto& f : filters) {
    if (!f.until) {
      head = true;
      continue;
    }
    upper = upper ? std::max(*upper, *f.until) : *f.until;
  }
  if (head)
    upper.reset();
  // A later page reads only at or below its horizon, whatever the filters say.
  if (page && page->started)
    upper = upper ? std::min(*upper, page->horizon_created_at) : page->horizon_created_at;
  shape.upper = upper;
  return shape;
}

namespace {

using clock = ring_entry::clock;

bool covers(const ring_entry& e, const read_shape& shape, std::optional<double> backfill) {
  // Every on-time row below the fence wall committed before the probe
  // sampled; late rows only if the last of them was inserted before the
  // sample (docs/replicas.md, "The proof").
  return shape.upper && static_cast<double>(*shape.upper) < e.fence_wall()
         && (!backfill || *backfill < e.fence_raw);
}

bool bounds(const ring_entry& e, const read_shape& shape, const route_settings& s,
            clock::time_point now) {
  return s.max_age.count() > 0 && now - e.sampled <= s.max_age && e.sampled >= shape.read_after;
}

// The decision a proof gives this read (nullopt: it proves nothing for it).
std::optional<route_decision> proved(const ring_entry& e, const read_shape& shape,
                                     const route_settings& s, clock::time_point now,
                                     std::optional<double> backfill) {
  if (covers(e, shape, backfill))
    return route_decision{true, route_reason::covered};
  if (bounds(e, shape, s, now))
    return route_decision{true, route_reason::bounded};
  return std::nullopt;
}

route_decision writer(route_reason r) { return {false, r}; }

}  // namespace

std::optional<route_decision> precheck(bool have_readers, const ring_snapshot& ring,
                                       const read_shape& shape, const route_settings& s,
                                       clock::time_point now, std::optional<double> backfill) {
  if (!have_readers)
    return writer(route_reason::disabled);
  auto* newest = ring.newest();
  if (!newest || now - newest->sampled > s.stale_after)
    return writer(route_reason::uninitialized);
  if (proved(*newest, shape, s, now, backfill))
    return std::nullopt;
  // A head read with bounded reads off has no predicate that could ever hold.
  if (!shape.upper && s.max_age.count() == 0)
    return writer(route_reason::disabled);
  return writer(route_reason::stale);
}

route_decision judge(const ring_snapshot& ring, const db::heartbeat_seen* seen,
                     const read_shape& shape, const route_settings& s, clock::time_point now,
                     std::optional<double> backfill) {
  if (!seen || seen->epoch != ring.epoch || seen->schema_version < s.schema_version)
    return writer(route_reason::reader_validation_error);
  auto* entry = ring.proof_for(seen->token);
  if (!entry)
    return writer(route_reason::reader_token_behind);
  if (auto d = proved(*entry, shape, s, now, backfill))
    return *d;
  return writer(route_reason::stale);
}

namespace {

// Every routed read is counted once, under the decision that served it, and
// logged at debug with the backend that read the page.
void count(route_context& ctx, const read_shape& shape, const route_decision& d,
           const std::string& reader, const std::string& backend) {
  if (ctx.stats)
    ctx.stats->count_route(shape.path, d.replica, to_string(d.reason));
  if (log::enabled(log::level::debug))
    log::debug("route", "read routed",
               {{"path", std::string{shape.path}},
                {"decision", d.replica ? "replica" : "writer"},
                {"reason", std::string{to_string(d.reason)}},
                {"reader", reader},
                {"backend", backend}});
}

}  // namespace

replica_set::share replica_set::take_share(int64_t community) {
  if (max_leases_per_community == 0 && reserved_connections == 0)
    return share::taken;
  std::lock_guard lock(share_mutex_);
  auto held = held_.find(community);
  size_t n = held == held_.end() ? 0 : held->second;
  if (max_leases_per_community > 0 && n >= max_leases_per_community)
    return share::community_full;
  if (n > 0 && reserved_connections > 0) {
    size_t capacity = 0;
    for (auto& p : pools)
      capacity += p->max_connections();
    if (held_total_ + 1 + reserved_connections > capacity)
      return share::reserved;
  }
  ++held_[community];
  ++held_total_;
  return share::taken;
}

void replica_set::give_share(int64_t community) {
  if (max_leases_per_community == 0 && reserved_connections == 0)
    return;
  std::lock_guard lock(share_mutex_);
  if (auto i = held_.find(community); i != held_.end()) {
    --held_total_;
    if (--i->second == 0)
      held_.erase(i);
  }
}

routed_outcome run_routed(route_context& ctx, const read_shape& shape, pqxx::connection& writer_conn,
                          const std::string& writer_backend, int64_t community_id,
                          std::chrono::milliseconds read_budget, const read_fn& read) {
  routed_outcome out;
  auto to_writer = [&](route_decision d) {
    out.decision = d;
    count(ctx, shape, d, "writer", writer_backend);
    return out;
  };
  bool have = ctx.replicas && !ctx.replicas->pools.empty() && ctx.ring;
  auto ring = have ? ctx.ring->snapshot() : std::make_shared<const ring_snapshot>();
  auto now = clock::now();
  // The watermark is read only when a covered read is possible at all.
  std::optional<double> backfill;
  if (have && shape.upper) {
    auto* newest = ring->newest();
    if (newest && static_cast<double>(*shape.upper) < newest->fence_wall())
      backfill = db::backfill_watermark(writer_conn, community_id);
  }
  if (auto d = precheck(have, *ring, shape, ctx.settings, now, backfill))
    return to_writer(*d);

  auto& set = *ctx.replicas;
  switch (set.take_share(community_id)) {
    case replica_set::share::taken: break;
    case replica_set::share::community_full:
      return to_writer(writer(route_reason::community_share));
    case replica_set::share::reserved:
      return to_writer(writer(route_reason::community_reserve));
  }
  struct give_back {
    replica_set& set;
    int64_t community;
    ~give_back() { set.give_share(community); }
  } share{set, community_id};
  auto& pool = *set.pools[set.next.fetch_add(1, std::memory_order_relaxed) % set.pools.size()];
  auto lease = pool.acquire(ctx.settings.acquire_budget);
  if (!lease)
    return to_writer(writer(route_reason::reader_acquire_timeout));
  const std::string backend = lease->backend();  // a discarded lease no longer has it
  route_decision d;
  try {
    auto seen = db::begin_replica_read(lease->conn());
    d = judge(*ring, seen ? &*seen : nullptr, shape, ctx.settings, clock::now(), backfill);
    if (!d.replica) {
      try {
        db::end_replica_read(lease->conn());
      } catch (const std::exception&) {
        lease->discard();
      }
      return to_writer(d);
    }
    if (ctx.after_proof)
      ctx.after_proof(backend);
    db::read_budget budget{read_budget};
    read(lease->conn(), &lease->prepared(), budget);
    db::end_replica_read(lease->conn());
    // The budget may have moved the session's statement_timeout (its
    // statements run outside pqxx transactions): the next lease must not
    // inherit it.
    budget.end(lease->conn());
    out.decision = d;
    out.backend = backend;
    count(ctx, shape, d, pool.name(), backend);
    return out;
  } catch (const pqxx::sql_error& e) {
    // Every replica error reruns on the writer, a cancelled statement
    // (57014) too: a replica may wait on a lock its replay still holds long
    // after the writer released it, or an operator may cancel it; the writer
    // is the authority on whether the read is too wide (red-team findings 2
    // and 3, docs/replicas.md).
    lease->discard();
    log::warn("route", "replica read failed, read again on the writer",
              {{"reader", pool.name()}, {"sqlstate", e.sqlstate()}, {"error", e.what()}});
  } catch (const std::exception& e) {
    // A broken connection (a stopped standby, the watchdog's shutdown, a
    // recovery conflict that ended the session), a spent budget, anything.
    lease->discard();
    log::warn("route", "replica read failed, read again on the writer",
              {{"reader", pool.name()}, {"error", e.what()}});
  }
  return to_writer(writer(route_reason::replica_error));
}

}  // namespace waggle
