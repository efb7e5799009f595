#include "actors/connection/refusal_pacer.hpp"

#include <algorithm>

namespace waggle {

double refusal_pacer::credit(bucket_clock::time_point now, const refusal_pacing& p) const {
  if (!used_)
    return p.burst;
  auto elapsed = std::max(0.0, std::chrono::duration<double>(now - last_).count());
  return std::min(p.burst, credit_ + elapsed * p.per_second);
}

std::chrono::milliseconds refusal_pacer::on_refusal(bucket_clock::time_point now,
                                                    const refusal_pacing& p) {
  using namespace std::chrono;
  if (p.off())
    return milliseconds{0};
  const double max_debt = p.per_second * duration<double>(p.max_pause).count();
  credit_ = std::max(-max_debt, credit(now, p) - 1);
  last_ = std::max(last_, now);
  used_ = true;
  if (credit_ >= 0)
    return milliseconds{0};
  auto until = now + duration_cast<bucket_clock::duration>(duration<double>(-credit_ / p.per_second));
  // Within a pause, asked again only once the debt outgrows it; once a pause
  // is over, the first refusal in debt pauses again at once.
  if (now < paused_until_ && until <= paused_until_ + milliseconds{100})
    return milliseconds{0};
  paused_until_ = until;
  return std::max(milliseconds{1}, duration_cast<milliseconds>(until - now));
}

}  // namespace waggle
