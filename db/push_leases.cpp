#include "db/push_store.hpp"

#include <pqxx/prepared_statement>
#include <pqxx/result>

#include "db/batch_bisect.hpp"
#include "db/sql_util.hpp"

// Lease acceptance and the gate (docs/push.md, "Leases" and "The gate"). The
// locking and the backfill live in migrations/0009 (waggle_accept_lease,
// waggle_push_gate), so each is one round trip and its statements see what
// committed while they waited for their locks.

namespace waggle::db {

using namespace sql;

namespace {

constexpr const char* stmt_accept = "waggle_push_accept";
constexpr const char* sql_accept = R"sql(
SELECT waggle_accept_lease($1::bigint, decode($2, 'hex'), $3::text, decode($4, 'hex'), $5::bigint,
                           $6::bigint, $7::text, decode($8, 'hex'), $9::text, $10::text[],
                           $11::int[], $12::text[], $13::bigint, $14::int, $15::int,
                           ARRAY(SELECT decode(x, 'hex') FROM unnest($16::text[]) AS x), $17::int)
)sql";

constexpr const char* stmt_gate = "waggle_push_gate";
constexpr const char* sql_gate = R"sql(
SELECT waggle_push_gate($1::bigint[], ARRAY(SELECT decode(x, 'hex') FROM unnest($2::text[]) AS x))
)sql";

constexpr const char* sql_live = R"sql(
SELECT DISTINCT l.community_id FROM push_leases l
 WHERE waggle_push_lease_live(l, extract(epoch FROM now())::bigint)
 ORDER BY 1
)sql";

std::string text_array(const std::vector<std::string>& v) {
  array_literal a;
  for (const auto& x : v)
    a.text(x);
  return a.str();
}

// The refusals of waggle_accept_lease, as protocol outcomes.
write_result refusal(const std::string& outcome) {
  if (outcome == "stale_generation")
    return {write_outcome::rejected,
            "push lease: generation must be greater than the lease's current one"};
  if (outcome == "expired")
    return {write_outcome::rejected, "push lease: already expired"};
  if (outcome == "quota")
    return {write_outcome::blocked, "push lease: this member holds the most leases allowed"};
  if (outcome == "endpoint_taken")
    return {write_outcome::rejected, "push lease: this endpoint is leased by another installation"};
  return {write_outcome::failed, "push lease: unexpected outcome " + outcome};
}

}  // namespace

write_result accept_lease_event(pqxx::connection& conn, const ingest_item& item,
                                const write_options& opts, const lease_settings& settings,
                                const std::vector<std::string>& skipped, int64_t now) {
  if (!item.ev)
    return {write_outcome::rejected, "no event"};
  auto parsed = proto::push::parse_lease(*item.ev, now);
  if (!parsed)
    return {write_outcome::rejected, parsed.error().reason};
  const auto& l = *parsed;
  write_options o = opts;
  o.accepting_lease = true;
  o.after_write = [&](pqxx::work& tx, std::vector<write_result>& results) {
    if (results.empty() || results[0].outcome != write_outcome::stored)
      return true;  // nothing written (a duplicate, an older version, a refusal)
    tx.conn().prepare(stmt_accept, sql_accept);
    array_literal kinds;
    for (auto k : l.kinds)
      kinds.integer(k);
    const auto& ev = *item.ev;
    auto r = tx.exec_prepared1(
      stmt_accept, item.community_id, ev.pubkey, l.installation_id, ev.id, ev.created_at,
      l.generation, l.endpoint_grant, l.endpoint_hash, l.app, text_array(l.channels), kinds.str(),
      text_array(l.mutes), l.expires_at, settings.quota,
      static_cast<int>(settings.backfill.count()), text_array(skipped),
      static_cast<int>(settings.created_at_window.count()));
    auto outcome = r[0].as<std::string>();
    if (outcome == "activated" || outcome == "renewed")
      return true;
    results[0] = refusal(outcome);
    return false;
  };
  auto results = write_batch_bisecting(conn, {item}, o);
  return results.empty() ? write_result{write_outcome::failed, "no result"} : results[0];
}

std::vector<int64_t> live_lease_communities(pqxx::connection& conn) {
  pqxx::read_transaction tx(conn);
  std::vector<int64_t> out;
  for (const auto& row : tx.exec(sql_live))
    out.push_back(row[0].as<int64_t>());
  return out;
}

size_t gate_push_jobs(pqxx::work& tx, const std::vector<gated_event>& inserted) {
  array_literal community, id;
  for (const auto& e : inserted) {
    if (!proto::push::is_push_kind(e.kind))
      continue;
    community.integer(e.community_id);
    id.text(e.id);
  }
  if (community.empty())
    return 0;
  tx.conn().prepare(stmt_gate, sql_gate);
  return tx.exec_prepared1(stmt_gate, community.str(), id.str())[0].as<size_t>();
}

}  // namespace waggle::db
