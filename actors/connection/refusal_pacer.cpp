#include "actors/connection/refusal_pacer.hpp"

#include <algorithm>

#include "messages/proto/status.hpp"

namespace waggle {

double refusal_weight(std::string_view message, std::size_t frame_bytes) {
  auto colon = message.find(':');
  if (colon == std::string_view::npos)
    return 0;
  auto prefix = message.substr(0, colon);
  if (prefix == "invalid" || prefix == "restricted" || prefix == "blocked"
      || prefix == "rate-limited" || prefix == "pow" || prefix == "mute")
    return 1;
  if (prefix == "auth-required")
    return std::max(0.1, static_cast<double>(frame_bytes) / 16384.0);
  if (prefix == "duplicate")
    return 0.5;
  // The reader's answer to a read past its statement_timeout (reader_session):
  // the client chose the query, so it may not repeat it unpaced. Every other
  // error: is the node's trouble, and duplicate: is a normal resend.
  if (prefix == "error" && message == query_too_long().message())
    return 1;
  return 0;
}

double refusal_pacer::credit(bucket_clock::time_point now, const refusal_pacing& p) const {
  if (!used_)
    return p.burst;
  auto elapsed = std::max(0.0, std::chrono::duration<double>(now - last_).count());
  return std::min(p.burst, credit_ + elapsed * p.per_second);
}

std::chrono::milliseconds refusal_pacer::on_refusal(bucket_clock::time_point now,
                                                    const refusal_pacing& p, double weight) {
  using namespace std::chrono;
  if (p.off() || weight <= 0)
    return milliseconds{0};
  const double max_debt = p.per_second * duration<double>(p.max_pause).count();
  credit_ = std::max(-max_debt, credit(now, p) - weight);
  last_ = std::max(last_, now);
  used_ = true;
  if (credit_ >= -1e-9)  // tenths add up to a hair under the burst
    return milliseconds{0};
  auto until = now + duration_cast<bucket_clock::duration>(duration<double>(-credit_ / p.per_second));
  // Within a pause, asked again only once the debt outgrows it; once a pause
  // is over, the first refusal in debt pauses again at once.
  if (now < paused_until_ && until <= paused_until_ + milliseconds{100})
    return milliseconds{0};
  paused_until_ = until;
  // Rounded, not truncated: tenths leave the debt a hair off a whole pause.
  return std::max(milliseconds{1}, round<milliseconds>(until - now));
}

}  // namespace waggle
