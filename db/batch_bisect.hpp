#pragma once

// Batch retry and bisection around write_batch (docs/write-path.md): what a
// failed batch means for each of its events. The write policy, a plugin's
// verdict on each event before it is written, is elsewhere (actors/policy/).

#include <string>
#include <vector>

#include <pqxx/connection>
#include <pqxx/except>

#include "db/event_store.hpp"
#include "messages/values.hpp"

namespace waggle::db {

// write_batch plus the failure policy: SQLSTATE classes 22, 23 and 54 bisect
// the batch so only the poison event is rejected; serialization failures and
// deadlocks (40001, 40P01) retry a few times; a broken connection or an
// unknown commit outcome marks every item `failed` (never a false OK) and
// rethrows pqxx::broken_connection so the owner can reconnect.
std::vector<write_result> write_batch_bisecting(pqxx::connection& conn,
                                                const std::vector<ingest_item>& items,
                                                const write_options& opts = {});

// What write_batch_bisecting throws when the connection broke or a COMMIT's
// outcome is unknown (pqxx::in_doubt_error is converted to this, too). It IS a
// pqxx::broken_connection, so `catch (const pqxx::broken_connection&)` keeps
// working; results() holds one result per item, in input order: `failed`
// ("database unavailable") for every item not known to be committed, and the
// real outcome for sub-batches that committed before the break (bisection).
class batch_unavailable : public pqxx::broken_connection {
 public:
  batch_unavailable(std::vector<write_result> results, const std::string& what)
    : pqxx::broken_connection(what), results_(std::move(results)) {}
  const std::vector<write_result>& results() const { return results_; }

 private:
  std::vector<write_result> results_;
};

}  // namespace waggle::db
