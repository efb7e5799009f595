#include "gateway/ip_admission.hpp"

#include <algorithm>

#include <boost/asio/ip/address.hpp>

#include "messages/proto/text.hpp"

namespace waggle::gateway {

namespace net = boost::asio;

std::string canonical_ip(std::string_view ip) {
  ip = proto::trim(ip);
  // "[v6]" as some proxies write it.
  if (ip.size() > 2 && ip.front() == '[' && ip.back() == ']')
    ip = ip.substr(1, ip.size() - 2);
  boost::system::error_code ec;
  auto addr = net::ip::make_address(std::string(ip), ec);
  if (ec)
    return {};
  if (addr.is_v6() && addr.to_v6().is_v4_mapped())
    return net::ip::make_address_v4(net::ip::v4_mapped, addr.to_v6()).to_string();
  return addr.to_string();
}

std::string address_key(std::string_view ip, unsigned ipv6_prefix) {
  boost::system::error_code ec;
  auto addr = net::ip::make_address(std::string(ip), ec);
  if (ec)
    return std::string(ip);
  if (addr.is_v4())
    return addr.to_string();
  auto v6 = addr.to_v6();
  if (v6.is_v4_mapped())
    return net::ip::make_address_v4(net::ip::v4_mapped, v6).to_string();
  if (ipv6_prefix >= 128)
    return v6.to_string();
  auto bytes = v6.to_bytes();
  for (unsigned bit = 0; bit < 128; bit += 8) {
    auto& b = bytes[bit / 8];
    if (bit >= ipv6_prefix)
      b = 0;
    else if (ipv6_prefix - bit < 8)
      b &= static_cast<unsigned char>(0xff << (8 - (ipv6_prefix - bit)));
  }
  return net::ip::address_v6(bytes).to_string() + "/" + std::to_string(ipv6_prefix);
}

bool is_trusted_proxy(std::string_view peer, const std::vector<std::string>& trusted) {
  return !peer.empty() && std::find(trusted.begin(), trusted.end(), peer) != trusted.end();
}

std::string effective_client_ip(std::string_view peer, std::string_view forwarded_for,
                                const std::vector<std::string>& trusted) {
  std::string client{peer};
  if (!is_trusted_proxy(peer, trusted))
    return client;
  // Right to left: each hop appended the address it received from.
  while (!forwarded_for.empty()) {
    auto comma = forwarded_for.rfind(',');
    auto item = comma == std::string_view::npos ? forwarded_for : forwarded_for.substr(comma + 1);
    forwarded_for = comma == std::string_view::npos ? std::string_view{}
                                                    : forwarded_for.substr(0, comma);
    auto ip = canonical_ip(item);
    if (ip.empty())
      return client;  // garbage written by someone we cannot vouch for
    client = ip;
    if (!is_trusted_proxy(ip, trusted))
      return client;
  }
  return client;
}

void ip_table::refill(entry& e, clock::time_point now) const {
  if (rate_ <= 0)
    return;
  double secs = std::chrono::duration<double>(now - e.refilled).count();
  if (secs > 0) {
    e.tokens = std::min(burst_, e.tokens + secs * rate_);
    e.refilled = now;
  }
}

void ip_table::prune(clock::time_point now) {
  // Forget addresses with nothing open whose bucket is full again.
  for (auto it = table_.begin(); it != table_.end();) {
    refill(it->second, now);
    if (it->second.open == 0 && (rate_ <= 0 || it->second.tokens >= burst_))
      it = table_.erase(it);
    else
      ++it;
  }
}

ip_table::verdict ip_table::admit(const std::string& ip, clock::time_point now) {
  std::lock_guard lock{mtx_};
  // Amortized: a sweep after as many admissions as there were entries after
  // the last one.
  if (++admits_since_prune_ > prune_after_) {
    admits_since_prune_ = 0;
    prune(now);
    prune_after_ = std::max<std::size_t>(1024, table_.size());
  }
  auto [it, fresh] = table_.try_emplace(ip);
  auto& e = it->second;
  if (fresh) {
    e.tokens = burst_;
    e.refilled = now;
  }
  refill(e, now);
  if (max_per_ip_ > 0 && e.open >= max_per_ip_)
    return verdict::too_many;
  if (rate_ > 0) {
    if (e.tokens < 1)
      return verdict::too_fast;
    e.tokens -= 1;
  }
  ++e.open;
  return verdict::admitted;
}

ip_table::verdict ip_table::transfer(const std::string& from, const std::string& to) {
  std::lock_guard lock{mtx_};
  auto [it, fresh] = table_.try_emplace(to);
  if (fresh) {
    it->second.tokens = burst_;
    it->second.refilled = clock::now();
  }
  if (max_per_ip_ > 0 && it->second.open >= max_per_ip_)
    return verdict::too_many;
  ++it->second.open;
  if (auto old = table_.find(from); old != table_.end() && old->second.open > 0)
    --old->second.open;
  return verdict::admitted;
}

void ip_table::release(const std::string& ip) {
  std::lock_guard lock{mtx_};
  if (auto it = table_.find(ip); it != table_.end() && it->second.open > 0)
    --it->second.open;
}

std::size_t ip_table::open(const std::string& ip) const {
  std::lock_guard lock{mtx_};
  auto it = table_.find(ip);
  return it == table_.end() ? 0 : it->second.open;
}

std::size_t ip_table::size() const {
  std::lock_guard lock{mtx_};
  return table_.size();
}

}  // namespace waggle::gateway
