#pragma once

// Reader sessions serve REQ history, COUNT and channel access checks, each on
// its own connection, spawned detached (libpqxx blocks). The reader pool
// (reader_pool.hpp) spreads requests over them.

#include <memory>
#include <string>
#include <vector>

#include "actors/reads/replica_route.hpp"
#include "actors/support/env.hpp"
#include "db/prepared_reads.hpp"
#include "db/session.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct reader_session_state;
using reader_session_ptr = reader_session_actor::stateful_pointer<reader_session_state>;

struct reader_session_state {
  static inline const char* name = "reader_session";

  reader_session_ptr self = nullptr;
  std::unique_ptr<db::session> session;
  proto::filter_limits limits;
  // The budget of one read, all its statements together (db/read_budget.hpp).
  std::chrono::milliseconds statement_timeout{0};
  // The history and count statements this session's connection has
  // prepared (bounded: their text follows the filter's shape).
  db::prepared_reads prepared;
  node_env env;  // named after the session ("reader-0"): its trace records
  caf::actor pool;  // from reader_attach: told reader_idle after every read
  uint64_t index = 0;
  // Replica routing, shared by every session of the node (docs/replicas.md);
  // null: every read runs here.
  std::shared_ptr<route_context> routing;
  // "addr:port pid" of this session's connection, for the routing debug log.
  const pqxx::connection* identified = nullptr;
  std::string backend;
  void idle();

  void init(reader_session_ptr self_ptr, std::string database_url, std::string role,
            proto::filter_limits l, int64_t statement_timeout_ms, node_env e,
            std::shared_ptr<route_context> r);
  history_reply on_history(const history_request& req);
  count_reply on_count(const count_request& req);
  sync_items_reply on_sync_items(const sync_items_request& req);
  access_reply on_access(const access_request& req);
  int64_t read_clock() const;

 private:
  template <class Reply, class Fn>
  Reply run_read(Fn&& fn);
  // Runs `read` on a proved replica or here; the access check before it
  // always runs here (it informs a permission).
  void routed(const read_shape& shape, pqxx::connection& conn, int64_t community_id,
              db::read_budget& budget, const read_fn& read);
};

// `statement_timeout_ms` (> 0) is set on the session's connection at every
// (re)connect, and bounds each read as a whole: every statement of a read
// gets what is left of it, so a read that runs longer is cancelled by
// PostgreSQL itself (or ended before its next statement) and answered
// `error: query took too long`.
reader_session_actor::behavior_type
reader_session_actor_impl(reader_session_ptr self, std::string database_url, std::string role,
                          proto::filter_limits limits, int64_t statement_timeout_ms, node_env env,
                          std::shared_ptr<route_context> routing);

// The SQL run on each new reader connection.
std::vector<std::string> reader_session_setup(int64_t statement_timeout_ms);

}  // namespace waggle
