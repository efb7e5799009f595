#pragma once

// Planner statistics on start-up. A database restored from a dump or
// upgraded with pg_upgrade has its rows but no statistics until autovacuum
// gets round to it; until then the planner guesses, and the generic plans the
// writer sessions make once and keep are made from those guesses
// (docs/write-path.md, "Plans on a fresh database").

#include <string>
#include <vector>

#include <pqxx/connection>

namespace waggle::db {

// What every writer session (actors/ingest/writer_session) sets on connecting.
// force_generic_plan: each batch statement is planned once per connection and
// kept (re-planning custom plans cost a fifth of PostgreSQL's CPU under load).
// enable_seqscan off: the writer reaches a batch's rows by key, and a kept
// generic plan must not hold a sequential scan chosen while a table was
// empty (analyzed empty, a probe of it is costed as free) that is still run
// once the table holds millions of rows. Tables without a usable index are
// still scanned (disabling only raises the cost).
const std::vector<std::string>& writer_session_settings();

// ANALYZEs every table of the current schema that holds data but has never
// been analyzed (pg_class.reltuples < 0), and returns their names. Empty
// tables are left alone on purpose: PostgreSQL plans a never-analyzed table as
// at least ten pages, which keeps index probes in the plans of a new
// database; analyzed while empty, it is planned as empty, and every generic
// plan made before the next ANALYZE scans it sequentially.
std::vector<std::string> analyze_missing_statistics(pqxx::connection& conn);

}  // namespace waggle::db
