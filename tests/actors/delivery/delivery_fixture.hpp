#pragma once

// Fakes for the delivery pipeline's actor tests: an HTTP client whose
// exchanges the test answers by hand, and a store whose queue is a vector.

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/delivery/delivery_supervisor.hpp"
#include "gateway/http_client.hpp"
#include "tests/actors/actor_fixture.hpp"

namespace waggle::testing {

// Every post waits until the test answers it (answer()).
class fake_http_client : public gateway::http_client {
 public:
  struct exchange {
    gateway::http_post request;
    std::function<void(gateway::http_result)> done;
  };
  void post(gateway::http_post request, std::function<void(gateway::http_result)> done) override {
    pending.push_back({std::move(request), std::move(done)});
    ++posted;
  }
  // Answers the first pending exchange for `url` (any when empty).
  bool answer(uint16_t status, const std::string& url = "") {
    for (auto it = pending.begin(); it != pending.end(); ++it) {
      if (!url.empty() && it->request.url != url)
        continue;
      auto done = std::move(it->done);
      pending.erase(it);
      done({status, status ? "" : "timeout", ""});
      return true;
    }
    return false;
  }
  size_t pending_for(const std::string& url) const {
    size_t n = 0;
    for (const auto& e : pending)
      n += e.request.url == url;
    return n;
  }
  std::deque<exchange> pending;
  size_t posted = 0;
};

// The store's queue: rows the test adds, claimed in order (skipping rows of
// a route at its per-route cap, as the real claim does); completions kept.
struct fake_queue {
  std::deque<delivery_job> due;
  std::vector<delivery_complete_request> completions;
  std::vector<uint32_t> claims;  // max_rows of each claim
  std::vector<std::vector<std::string>> busy_seen;  // busy_routes of each claim
  int64_t next_due_ms = -1;
  int64_t next_row = 1;
  int completion_batches = 0;
  void add(const std::string& url, int n = 1) {
    for (int i = 0; i < n; ++i) {
      delivery_job job;
      job.community_id = 1;
      job.row_id = next_row++;
      job.claim_id = "claim-" + std::to_string(job.row_id);
      job.delivery_id = "d-" + std::to_string(job.row_id);
      job.route = url;
      job.url = url;
      job.body = "{}";
      job.attempts = 1;
      due.push_back(std::move(job));
    }
  }
};

inline delivery_store_actor::behavior_type fake_store(delivery_store_actor::pointer,
                                                      std::shared_ptr<fake_queue> q) {
  return {
    [q](const delivery_claim_request& req) {
      q->claims.push_back(req.max_rows);
      q->busy_seen.push_back(req.busy_routes);
      std::map<std::string, uint32_t> out;
      for (const auto& r : req.busy_routes)
        ++out[r];
      delivery_claim_reply reply;
      for (auto it = q->due.begin(); it != q->due.end() && reply.jobs.size() < req.max_rows;) {
        if (req.per_route_max > 0 && out[it->route] >= req.per_route_max) {
          ++it;
          continue;
        }
        ++out[it->route];
        reply.jobs.push_back(std::move(*it));
        it = q->due.erase(it);
      }
      reply.next_due_ms = q->next_due_ms;
      return reply;
    },
    [q](const delivery_complete_request& req) {
      q->completions.push_back(req);
      return delivery_complete_reply{delivery_completion::done};
    },
    [q](const delivery_complete_batch& batch) {
      ++q->completion_batches;
      delivery_complete_batch_reply reply;
      for (const auto& req : batch.requests) {
        q->completions.push_back(req);
        reply.results.push_back({delivery_completion::done});
      }
      return reply;
    },
  };
}

}  // namespace waggle::testing
