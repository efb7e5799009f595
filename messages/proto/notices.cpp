#include "messages/proto/notices.hpp"

#include "messages/proto/client_message.hpp"
#include "messages/proto/status.hpp"

namespace waggle::proto {

std::string slow_consumer_notice() {
  return render_notice(status{ec::rate_limited, "slow consumer, closing"}.message());
}

std::string auth_deadline_notice(std::chrono::seconds deadline) {
  return render_notice(status{ec::auth_required, "no NIP-42 AUTH within "
                                                   + std::to_string(deadline.count())
                                                   + " s of connecting, closing"}
                         .message());
}

std::string unauthenticated_evicted_notice() {
  return render_notice(status{ec::auth_required,
                              "too many unauthenticated connections, closing the oldest; "
                              "AUTH right after connecting"}
                         .message());
}

}  // namespace waggle::proto
