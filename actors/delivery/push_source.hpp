#pragma once

// The push wake outbox as a delivery_source (docs/push.md, "Delivery"):
// retries and wakes whose claim lapsed, claimed with their revalidation in
// the claiming statement, each a POST of proto::push::gateway_body to the
// push gateway; completions set-wise (one transaction for a burst). First
// attempts do not come through here: the matcher hands them to the
// supervisor already claimed (push_jobs builds them).

#include <string>

#include "actors/delivery/delivery_store.hpp"
#include "db/push_store.hpp"

namespace waggle {

struct push_delivery_settings {
  std::string gateway_url;
  std::chrono::seconds lease{30};  // delivery_lease(request timeout)
  int max_attempts = 8;
};

class push_source : public delivery_source {
 public:
  explicit push_source(push_delivery_settings s) : settings_(std::move(s)) {}
  delivery_claim_reply claim(pqxx::connection& conn, const delivery_claim_request& req) override;
  delivery_completion complete(pqxx::connection& conn,
                               const delivery_complete_request& req) override;
  std::vector<delivery_completion>
  complete_batch(pqxx::connection& conn,
                 const std::vector<delivery_complete_request>& reqs) override;

 private:
  push_delivery_settings settings_;
};

// A wake as a delivery job: route "push", the gateway body, the wake's claim.
delivery_job push_job(const db::ready_wake& w, int64_t community_id, const std::string& host,
                      const std::string& gateway_url);

}  // namespace waggle
