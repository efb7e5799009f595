#pragma once

// The node's side of the gateway's observer seam (gateway/observer.hpp):
// gateway log lines go to the structured log as component "gateway", and
// connection counts and /metrics to the node's metrics.

#include <memory>

#include "actors/support/log.hpp"
#include "actors/support/metrics.hpp"
#include "gateway/observer.hpp"

namespace waggle {

class gateway_observer final : public gateway::observer {
 public:
  explicit gateway_observer(std::shared_ptr<metrics> stats) : stats_(std::move(stats)) {}

  bool logs(gateway::log_level level) const override {
    return level != gateway::log_level::debug || log::enabled(log::level::debug);
  }
  void log(gateway::log_level level, std::string_view what, std::string_view detail) override {
    auto lvl = level == gateway::log_level::debug ? log::level::debug : log::level::warn;
    log::write(lvl, "gateway", what, {{"detail", std::string{detail}}});
  }
  void connection_opened() override {
    if (stats_)
      stats_->connections.fetch_add(1);
  }
  void connection_closed() override {
    if (stats_)
      stats_->connections.fetch_sub(1);
  }
  void refused(std::string_view reason) override {
    if (stats_)
      stats_->count_refused(reason);
  }
  std::string metrics_text() const override { return stats_ ? stats_->render() : std::string{}; }

 private:
  std::shared_ptr<metrics> stats_;
};

}  // namespace waggle
