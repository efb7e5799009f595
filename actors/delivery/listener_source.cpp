#include "actors/delivery/listener_source.hpp"

#include <cmath>
#include <string_view>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "actors/support/log.hpp"

namespace waggle {

listener_source::listener_source(std::map<std::string, std::string> listeners,
                                 db::claim_settings settings)
  : urls_(std::move(listeners)), settings_(settings) {
  for (const auto& [key, url] : urls_)
    keys_.push_back(key);
}

std::string listener_delivery_body(const db::claimed_delivery& row) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w{buf};
  w.StartObject();
  w.Key("v");
  w.Int(1);
  w.Key("delivery_id");
  w.String(row.delivery_id);
  w.Key("listener");
  w.String(row.listener);
  w.Key("target");
  w.String(row.target);
  w.Key("community");
  w.String(row.community_host);
  w.Key("event");
  // Stored events are canonical JSON already: embedded as they are, so the
  // listener can check the signature over exactly what was signed.
  w.RawValue(row.event_raw.data(), row.event_raw.size(), rapidjson::kObjectType);
  w.EndObject();
  return {buf.GetString(), buf.GetSize()};
}

delivery_claim_reply listener_source::claim(pqxx::connection& conn,
                                            const delivery_claim_request& req) {
  delivery_claim_reply reply;
  const uint32_t n = req.max_rows;
  if (keys_.empty() || n == 0)
    return reply;
  std::map<std::string_view, uint32_t> busy;
  for (const auto& r : req.busy_routes)
    ++busy[r];
  std::vector<db::listener_room> rooms;
  std::vector<std::string> with_room;
  for (const auto& key : keys_) {
    uint32_t room = n;
    if (req.per_route_max > 0) {
      auto out = busy.count(key) ? busy[key] : 0;
      room = out >= req.per_route_max ? 0 : std::min(n, req.per_route_max - out);
    }
    if (room == 0)
      continue;
    rooms.push_back({key, room});
    with_room.push_back(key);
  }
  if (rooms.empty())
    return reply;  // every listener is at its cap: a slot that frees claims again
  auto rows = db::claim_deliveries(conn, rooms, n, settings_);
  for (const auto& row : rows) {
    delivery_job job;
    job.community_id = row.community_id;
    job.row_id = row.id;
    job.claim_id = row.claim_id;
    job.delivery_id = row.delivery_id;
    job.route = row.listener;
    job.url = urls_.at(row.listener);  // claimed only for keys_ (claim_deliveries)
    job.body = listener_delivery_body(row);
    job.attempts = row.attempts;
    job.created_at = row.created_at;
    reply.jobs.push_back(std::move(job));
  }
  if (rows.empty()) {
    // Only a claim that found nothing reads when the next row is due: after
    // one that found rows, each of them frees a slot and claims again, and
    // that claim reads it. So a lone mention's jobs go out after one
    // transaction, not two (the read was a third of the OK-to-listener
    // latency, docs/benchmarks.md). It cannot lose a claimed job either:
    // this runs before any are claimed, and a failure here only leaves the
    // next row to the idle poll.
    try {
      auto st = db::read_outbox_state(conn, keys_, settings_, &with_room);
      if (st.next_due_in_seconds)
        reply.next_due_ms = std::max<int64_t>(
          0, static_cast<int64_t>(std::ceil(*st.next_due_in_seconds * 1000.0)));
    } catch (const std::exception& e) {
      // A broken connection shows again at the store's next statement,
      // which resets the session.
      log::warn("delivery_store", "next-due reading failed after a claim", {{"error", e.what()}});
    }
  }
  return reply;
}

delivery_completion listener_source::complete(pqxx::connection& conn,
                                              const delivery_complete_request& req) {
  db::claimed_delivery row;
  row.community_id = req.job.community_id;
  row.id = req.job.row_id;
  row.claim_id = req.job.claim_id;
  row.attempts = req.job.attempts;
  db::completion how = db::completion::delivered;
  if (req.verdict == delivery_verdict::retry)
    how = db::completion::retry;
  else if (req.verdict == delivery_verdict::terminal || req.verdict == delivery_verdict::gone)
    how = db::completion::terminal;
  switch (db::complete_delivery(conn, row, how, std::chrono::milliseconds(req.retry_after_ms),
                                settings_)) {
    case db::completion_result::done: return delivery_completion::done;
    case db::completion_result::dropped: return delivery_completion::dropped;
    case db::completion_result::fenced: return delivery_completion::fenced;
  }
  return delivery_completion::failed;
}

}  // namespace waggle
