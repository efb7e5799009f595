#include "actors/connection/read_admission.hpp"

#include "gateway/ip_admission.hpp"

namespace waggle {

double read_cost(const std::vector<proto::filter>& filters) {
  size_t values = 0;
  double searches = 0;
  for (const auto& f : filters) {
    if (f.search)
      searches += search_read_cost;
    values += f.ids ? f.ids->size() : 0;
    values += f.authors ? f.authors->size() : 0;
    values += f.kinds ? f.kinds->size() : 0;
    for (const auto& [_, v] : f.tags)
      values += v.size();
  }
  return 1.0 + static_cast<double>(filters.size()) + static_cast<double>(values) / 100.0 +
         searches;
}

read_refusal read_admission::admit(uint64_t ticket, std::string sub_id, bool is_count,
                                   const std::vector<proto::filter>& filters,
                                   const std::set<std::string>& pubkeys,
                                   const std::string& address, bucket_clock::time_point now) {
  if (tickets_.size() >= settings_.max_in_flight)
    return {{ec::rate_limited, "too many queries in flight"}, "reads_in_flight"};
  auto cost = read_cost(filters);
  if (!own_.take(cost, now, settings_.per_connection))
    return {{ec::rate_limited, "too many queries on this connection, slow down"},
            "read_rate_connection"};
  if (auto& shared = settings_.shared) {
    // Refused here, the connection's tokens stay spent: a client hammering
    // a shared limit pays for it on its own bucket too.
    if (!shared->by_pubkey.take_all({pubkeys.begin(), pubkeys.end()}, cost, now))
      return {{ec::rate_limited, "too many queries for this key, slow down"}, "read_rate_pubkey"};
    if (!address.empty() && address != address_) {
      address_ = address;
      address_key_ = gateway::address_key(address, settings_.ipv6_prefix);
    }
    if (!address.empty() && !shared->by_address.take_all({address_key_}, cost, now))
      return {{ec::rate_limited, "too many queries from this address, slow down"},
              "read_rate_address"};
  }
  tickets_[ticket] = {std::move(sub_id), is_count, 0};
  return {};
}

void read_admission::at_pool(uint64_t ticket, uint64_t request_id) {
  if (auto i = tickets_.find(ticket); i != tickets_.end())
    i->second.request_id = request_id;
}

void read_admission::done(uint64_t ticket) { tickets_.erase(ticket); }

std::vector<uint64_t> read_admission::end_sub(const std::string& sub_id) {
  std::vector<uint64_t> out;
  for (auto i = tickets_.begin(); i != tickets_.end();) {
    if (!i->second.is_count && i->second.sub_id == sub_id) {
      if (i->second.request_id != 0)
        out.push_back(i->second.request_id);
      i = tickets_.erase(i);
    } else {
      ++i;
    }
  }
  return out;
}

bool read_admission::any_at_pool() const {
  for (const auto& [_, t] : tickets_)
    if (t.request_id != 0)
      return true;
  return false;
}

}  // namespace waggle
