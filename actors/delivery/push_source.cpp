#include "actors/delivery/push_source.hpp"

#include "messages/proto/push.hpp"

namespace waggle {

delivery_job push_job(const db::ready_wake& w, int64_t community_id, const std::string& host,
                      const std::string& gateway_url) {
  delivery_job job;
  job.community_id = community_id;
  job.row_id = w.id;
  job.claim_id = w.claim_id;
  job.delivery_id = w.request_id;
  job.route = "push";
  job.url = gateway_url;
  job.body = proto::push::gateway_body(w.request_id, w.endpoint_grant, w.expires_at, host,
                                       w.event_id);
  job.attempts = w.attempts;
  job.created_at = w.created_at;
  return job;
}

delivery_claim_reply push_source::claim(pqxx::connection& conn, const delivery_claim_request& req) {
  delivery_claim_reply reply;
  for (auto& c : db::claim_wakes(conn, req.max_rows, settings_.lease, settings_.max_attempts))
    reply.jobs.push_back(push_job(c.wake, c.community_id, c.community_host, settings_.gateway_url));
  return reply;
}

delivery_completion push_source::complete(pqxx::connection& conn,
                                          const delivery_complete_request& req) {
  return complete_batch(conn, {req}).at(0);
}

std::vector<delivery_completion>
push_source::complete_batch(pqxx::connection& conn,
                            const std::vector<delivery_complete_request>& reqs) {
  std::vector<db::wake_complete> c;
  for (const auto& r : reqs) {
    db::wake_complete w;
    w.community_id = r.job.community_id;
    w.id = r.job.row_id;
    w.claim_id = r.job.claim_id;
    switch (r.verdict) {
      case delivery_verdict::delivered: w.how = db::wake_completion::delivered; break;
      case delivery_verdict::retry: w.how = db::wake_completion::retry; break;
      case delivery_verdict::terminal: w.how = db::wake_completion::failed; break;
      case delivery_verdict::gone: w.how = db::wake_completion::gone; break;
    }
    w.retry_after = std::chrono::milliseconds(r.retry_after_ms);
    c.push_back(std::move(w));
  }
  auto held = db::complete_wakes(conn, c, settings_.max_attempts);
  std::vector<delivery_completion> out;
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (!held[i])
      out.push_back(delivery_completion::fenced);
    else if (reqs[i].verdict == delivery_verdict::retry && reqs[i].job.attempts >= settings_.max_attempts)
      out.push_back(delivery_completion::dropped);
    else
      out.push_back(delivery_completion::done);
  }
  return out;
}

}  // namespace waggle
