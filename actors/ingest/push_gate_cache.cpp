#include "actors/ingest/push_gate_cache.hpp"

#include <algorithm>

namespace waggle {

void push_gate_cache::on_loaded(const std::vector<int64_t>& communities) {
  if (!enabled_ || !cached_)
    return;
  loaded_ = true;
  gated_.insert(communities.begin(), communities.end());
}

void push_gate_cache::on_lease_seen(int64_t community) {
  if (enabled_)
    gated_.insert(community);
}

bool push_gate_cache::gates(int64_t community) const {
  return enabled_ && (!loaded_ || gated_.count(community) > 0);
}

push_gate_cache::decision push_gate_cache::decide(const std::vector<int64_t>& communities) const {
  decision d;
  if (!enabled_)
    return d;
  if (!loaded_) {
    d.all = true;
    return d;
  }
  for (auto c : communities)
    if (gated_.count(c))
      d.gated.push_back(c);
  std::sort(d.gated.begin(), d.gated.end());
  d.gated.erase(std::unique(d.gated.begin(), d.gated.end()), d.gated.end());
  return d;
}

void push_gate_cache::note_stored(int64_t community, const std::string& event_id,
                                  const decision& at_dispatch) {
  if (at_dispatch.all || !gates(community))
    return;
  if (std::binary_search(at_dispatch.gated.begin(), at_dispatch.gated.end(), community))
    return;
  skipped_[community].push_back(event_id);
}

std::vector<std::string> push_gate_cache::take_skipped(int64_t community) {
  auto i = skipped_.find(community);
  if (i == skipped_.end())
    return {};
  auto out = std::move(i->second);
  skipped_.erase(i);
  return out;
}

std::vector<std::string> push_gate_cache::skipped(int64_t community) const {
  auto i = skipped_.find(community);
  return i == skipped_.end() ? std::vector<std::string>{} : i->second;
}

}  // namespace waggle
