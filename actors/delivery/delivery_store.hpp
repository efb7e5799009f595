#pragma once

// The delivery store: the one actor that touches a delivery queue's tables
// (detached, its own connection). The supervisor asks it to claim rows and
// to complete them; what the rows are (operator listeners' outbox, later the
// push outbox) is its delivery_source's business, so the supervisor and its
// slots are the same for every queue (docs/delivery.md).

#include <memory>
#include <string>
#include <vector>

#include <pqxx/connection>

#include "actors/support/env.hpp"
#include "db/session.hpp"
#include "messages/interfaces.hpp"

namespace waggle {

// One queue's SQL, as the store runs it. Throws pqxx exceptions.
class delivery_source {
 public:
  virtual ~delivery_source() = default;
  // Claims up to `req.max_rows` due rows as jobs (url and body built), at
  // most `req.per_route_max` out at once per route counting
  // `req.busy_routes`, and when fewer were due, when the next pending row a
  // claim could take is.
  virtual delivery_claim_reply claim(pqxx::connection& conn, const delivery_claim_request& req) = 0;
  virtual delivery_completion complete(pqxx::connection& conn,
                                       const delivery_complete_request& req) = 0;
  // Statements each new connection of the store runs after its own settings
  // (plans a queue wants made before its first claim).
  virtual std::vector<std::string> session_setup() const { return {}; }
  // Several completions; a queue that can writes them in one transaction.
  virtual std::vector<delivery_completion>
  complete_batch(pqxx::connection& conn, const std::vector<delivery_complete_request>& reqs) {
    std::vector<delivery_completion> out;
    for (const auto& r : reqs)
      out.push_back(complete(conn, r));
    return out;
  }
};

struct delivery_store_state;
using delivery_store_ptr = delivery_store_actor::stateful_pointer<delivery_store_state>;

struct delivery_store_state {
  static inline const char* name = "delivery_store";

  delivery_store_ptr self = nullptr;
  std::unique_ptr<db::session> session;
  std::shared_ptr<delivery_source> source;
  node_env env;

  void init(delivery_store_ptr self_ptr, std::string database_url, std::string role,
            std::shared_ptr<delivery_source> s, node_env e);
  delivery_claim_reply on_claim(const delivery_claim_request& req);
  delivery_complete_reply on_complete(const delivery_complete_request& req);
  delivery_complete_batch_reply on_complete_batch(const delivery_complete_batch& req);
};

delivery_store_actor::behavior_type
delivery_store_actor_impl(delivery_store_ptr self, std::string database_url, std::string role,
                          std::shared_ptr<delivery_source> source, node_env env);

}  // namespace waggle
