#pragma once

// The management actor: NIP-86 JSON-RPC calls of one node
// (docs/management.md). The node's per-request actor checks NIP-98 first;
// this one decides whether the proved key may manage the community (an
// active owner or admin, or an operator key), validates the params, makes
// the change and audits the call in ONE transaction. Detached, with its own
// connection. The node runs a few (management_workers) and sends each call
// to the one its community hashes to, so a call stuck on a lock holds up
// only the communities of its worker, and only until its deadline: each
// call's transaction runs under a lock_timeout and a statement_timeout that
// end it before the caller stops waiting, and a call whose deadline passed
// is rolled back, never committed (answered 504).
// Changes reach the rest of the node through the triggers of
// migrations/0004 (NOTIFY 'waggle_community': the watcher and the
// directory re-read).

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "actors/communities/call_watchdog.hpp"
#include "actors/support/token_bucket.hpp"
#include "db/session.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

struct management_settings {
  std::string database_url;
  std::set<std::string> operator_pubkeys;  // hex; may manage every community
  // A stranger's refused call is audited with at most this many bytes of
  // its params, and at most `refusal_audits` rows a second per community
  // (burst `refusal_audit_burst`); refusals beyond are counted, not written
  // (docs/management.md, "Audit").
  size_t refused_params_bytes = 256;
  bucket_rate refusal_audits{2.0, 100.0};
  // What a call keeps for its commit after its statements: a call whose
  // statements end later than its deadline minus this is rolled back.
  std::chrono::milliseconds commit_margin{500};
};


struct management_state;
using management_ptr = management_actor::stateful_pointer<management_state>;

struct management_state {
  static inline const char* name = "management";

  management_ptr self = nullptr;
  std::unique_ptr<db::session> session;
  management_settings settings;
  std::unique_ptr<call_watchdog> watchdog;  // cancels a call's statement at its deadline
  std::map<int64_t, token_bucket> refusal_buckets;  // by community
  uint64_t refusals_unaudited = 0;

  void init(management_ptr self_ptr, management_settings cfg);
  manage_reply on_request(const manage_request& req);

 private:
  // Whether this refusal gets its audit row (the community's bucket pays).
  bool audit_refusal(int64_t community_id);
};

management_actor::behavior_type management_actor_impl(management_ptr self, management_settings cfg);

// The JSON body of an error answer: {"result": null, "error": "..."}.
std::string rpc_error_body(std::string_view message);

}  // namespace waggle
