#include "bench/load/roles.hpp"

#include <algorithm>
#include <cmath>

#include <boost/asio/dispatch.hpp>

namespace waggle::bench {

namespace {

// "invalid: bad signature" -> "invalid"; a message without a prefix -> "other".
std::string reason_of(std::string_view message) {
  auto colon = message.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon > 24)
    return "other";
  return std::string{message.substr(0, colon)};
}

double ms_between(int64_t from_ns, int64_t to_ns) {
  return static_cast<double>(to_ns - from_ns) / 1e6;
}

}  // namespace

void outcome_counts::merge(const outcome_counts& o) {
  sent += o.sent;
  accepted += o.accepted;
  duplicate += o.duplicate;
  rejected += o.rejected;
  for (auto& [reason, n] : o.rejected_by_reason)
    rejected_by_reason[reason] += n;
}

// --- publisher -------------------------------------------------------------------

publisher::publisher(std::shared_ptr<nostr_client> client, std::span<const prepared_event> events,
                     size_t first_index, pacing pace, progress_counters& progress,
                     publish_clock* clock)
    : client_(std::move(client)), events_(events), first_index_(first_index), pace_(pace),
      progress_(progress), clock_(clock), limit_(events.size()) {
  pending_.reserve(pace.open_loop() ? 64 : pace.in_flight * 2);
  ack_ms.reserve(events.size());
}

void publisher::start(int64_t t0, int64_t deadline) {
  t0_ = t0;
  deadline_ = deadline;
  boost::asio::dispatch(client_->executor(), [self = shared_from_this()] {
    if (self->pace_.open_loop()) {
      self->timer_ = std::make_unique<boost::asio::steady_timer>(self->client_->executor());
      self->tick();
    } else {
      auto now = now_ns();
      while (self->next_ < self->limit_ && self->pending_.size() < self->pace_.in_flight)
        self->send(self->next_++, now);
    }
  });
}

void publisher::send(size_t k, int64_t started) {
  auto& ev = events_[k];
  pending_.emplace(ev.id, in_flight_event{started, k});
  ++counts.sent;
  progress_.sent.fetch_add(1, std::memory_order_relaxed);
  if (clock_)
    clock_->mark_sent(first_index_ + k, now_ns());
  client_->send(ev.frame);
}

void publisher::tick() {
  // Every event whose time has come goes now, stamped with its scheduled time.
  auto period_ns = pace_.rate > 0 ? 1e9 / pace_.rate : 0;
  auto now = now_ns();
  auto scheduled = [&](size_t k) {
    if (!pace_.at_ns.empty())
      return t0_ + pace_.at_ns[k];
    return t0_ + static_cast<int64_t>((static_cast<double>(k) + pace_.phase) * period_ns);
  };
  while (next_ < limit_ && scheduled(next_) <= now) {
    if (scheduled(next_) >= deadline_) {
      limit_ = next_;
      break;
    }
    send(next_, scheduled(next_));
    ++next_;
  }
  if (next_ >= limit_)
    return;
  timer_->expires_at(std::chrono::steady_clock::time_point{std::chrono::nanoseconds{scheduled(next_)}});
  timer_->async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (!ec)
      self->tick();
  });
}

void publisher::on_ok(std::string_view id, bool accepted, std::string_view message) {
  auto i = pending_.find(id);
  if (i == pending_.end())
    return;
  auto now = now_ns();
  last_answer_ns = now;
  progress_.answered.fetch_add(1, std::memory_order_relaxed);
  if (accepted) {
    if (message.rfind("duplicate:", 0) == 0) {
      ++counts.duplicate;
    } else {
      ++counts.accepted;
      progress_.accepted.fetch_add(1, std::memory_order_relaxed);
      ack_ms.push_back(ms_between(i->second.started, now));
      if (clock_)
        clock_->mark_accepted(first_index_ + i->second.index, now);
    }
  } else {
    ++counts.rejected;
    ++counts.rejected_by_reason[reason_of(message)];
    progress_.rejected.fetch_add(1, std::memory_order_relaxed);
  }
  pending_.erase(i);
  if (pace_.open_loop())
    return;
  if (now >= deadline_)
    limit_ = next_;
  else if (next_ == limit_ && pending_.empty())
    ran_out = true;
  while (next_ < limit_ && pending_.size() < pace_.in_flight)
    send(next_++, now);
}

// --- subscriber ------------------------------------------------------------------

subscriber::subscriber(std::shared_ptr<nostr_client> client, std::string filter_json,
                       const publish_clock* clock, progress_counters& progress)
    : client_(std::move(client)), filter_json_(std::move(filter_json)), clock_(clock),
      progress_(progress), received_ns_(clock ? clock->size() : 0) {
  delivery_ms.reserve(received_ns_.size());
}

void subscriber::subscribe() { client_->send("[\"REQ\",\"live\"," + filter_json_ + "]"); }

void subscriber::on_eose() {
  if (!ready_ && refused.empty())
    progress_.subscribed.fetch_add(1);
  ready_ = true;
}

void subscriber::on_closed(std::string_view message) {
  if (refused.empty())
    progress_.refused.fetch_add(1);
  refused = std::string{message};
}

void subscriber::on_event(std::string_view id) {
  if (frozen_)
    return;
  auto now = now_ns();
  auto k = clock_ ? clock_->index_of(id) : -1;
  if (k < 0) {
    ++foreign;
    return;
  }
  if (received_ns_[static_cast<size_t>(k)]) {
    ++duplicates;
    return;
  }
  received_ns_[static_cast<size_t>(k)] = now;
  ++distinct;
  last_ns = now;
  delivered_.store(distinct, std::memory_order_relaxed);
  if (auto sent = clock_->sent_at(static_cast<size_t>(k)); sent > 0)
    delivery_ms.push_back(ms_between(sent, now));
}

// --- querier ---------------------------------------------------------------------

querier::querier(std::shared_ptr<nostr_client> client, std::vector<std::string> filters,
                 size_t in_flight, progress_counters& progress)
    : client_(std::move(client)), filters_(std::move(filters)), in_flight_(in_flight),
      progress_(progress) {}

void querier::start(int64_t deadline) {
  deadline_ = deadline;
  boost::asio::dispatch(client_->executor(), [self = shared_from_this()] {
    while (self->pending_.size() < self->in_flight_)
      self->send_next();
  });
}

void querier::send_next() {
  std::string sub{"q"};
  sub.append(std::to_string(sequence_));
  auto& filter = filters_[sequence_ % filters_.size()];
  ++sequence_;
  pending_.emplace(sub, now_ns());
  ++counts.sent;
  progress_.sent.fetch_add(1, std::memory_order_relaxed);
  client_->send("[\"REQ\",\"" + sub + "\"," + filter + "]");
}

void querier::on_eose(std::string_view sub) {
  auto i = pending_.find(std::string{sub});
  if (i == pending_.end())
    return;
  auto now = now_ns();
  last_answer_ns = now;
  latency_ms.push_back(ms_between(i->second, now));
  ++counts.accepted;
  progress_.answered.fetch_add(1, std::memory_order_relaxed);
  progress_.accepted.fetch_add(1, std::memory_order_relaxed);
  client_->send("[\"CLOSE\",\"" + i->first + "\"]");
  pending_.erase(i);
  if (now >= deadline_)
    stopped_ = true;
  if (!stopped_)
    send_next();
}

void querier::on_closed(std::string_view sub, std::string_view message) {
  auto i = pending_.find(std::string{sub});
  if (i == pending_.end())
    return;
  ++counts.rejected;
  ++counts.rejected_by_reason[reason_of(message)];
  progress_.answered.fetch_add(1, std::memory_order_relaxed);
  progress_.rejected.fetch_add(1, std::memory_order_relaxed);
  pending_.erase(i);
  if (now_ns() >= deadline_)
    stopped_ = true;
  if (!stopped_)
    send_next();
}

}  // namespace waggle::bench
