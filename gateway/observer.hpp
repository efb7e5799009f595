#pragma once

// What the gateway tells the node, and the one thing it asks for besides
// node_api's work: log lines, connection counts and the /metrics text. The
// gateway declares this seam and the node implements it (actors/node/), so
// the gateway depends on nothing above the message layer. Every method may
// be called from any io thread and must not block.

#include <cstdint>
#include <string>
#include <string_view>

namespace waggle::gateway {

enum class log_level : uint8_t { debug, warn };

class observer {
 public:
  virtual ~observer() = default;
  // False when debug lines are dropped anyway (saves building their text).
  virtual bool logs(log_level level) const = 0;
  virtual void log(log_level level, std::string_view what, std::string_view detail) = 0;
  virtual void connection_opened() = 0;
  virtual void connection_closed() = 0;
  // The gateway turned something away by a limit (a fixed label, see
  // metrics::count_refused); counted in waggle_refusals_total.
  virtual void refused(std::string_view reason) = 0;
  // Prometheus text for GET /metrics.
  virtual std::string metrics_text() const = 0;
};

}  // namespace waggle::gateway
