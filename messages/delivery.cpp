#include "messages/delivery.hpp"

#include <algorithm>

#include <rapidjson/document.h>

namespace waggle {

delivery_verdict classify_delivery(const delivery_response& r) {
  if (r.status >= 200 && r.status < 300)
    return delivery_verdict::delivered;
  // No answer at all (timeout, refused, reset) is the receiver being down,
  // not refusing: the same as the statuses that ask to come back later.
  if (r.status == 0 || r.status == 408 || r.status == 429 || r.status >= 500)
    return delivery_verdict::retry;
  if (r.status == 410)
    return delivery_verdict::gone;
  return delivery_verdict::terminal;
}

std::chrono::milliseconds delivery_backoff(int32_t attempt, int32_t max_exponent) {
  const int32_t exponent = std::clamp(attempt - 1, 0, std::max(0, max_exponent));
  return std::chrono::milliseconds(int64_t{1000} << exponent);
}

std::chrono::seconds delivery_lease(std::chrono::milliseconds request_timeout) {
  const auto timeout_s = (request_timeout.count() + 999) / 1000;
  return std::chrono::seconds(std::max<int64_t>(30, 2 * timeout_s + 10));
}

namespace {
bool lower_hex64(const std::string_view s) {
  return s.size() == 64
         && std::all_of(s.begin(), s.end(),
                        [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}
}  // namespace

bool parse_listener_pubkeys(std::string_view body, size_t max, std::vector<std::string>& keys,
                            std::string& why) {
  rapidjson::Document doc;
  // Iterative: a 128 KiB body of '[' ran the recursive parser out of stack.
  doc.Parse<rapidjson::kParseIterativeFlag>(body.data(), body.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    why = "the body is not a JSON object";
    return false;
  }
  auto it = doc.FindMember("pubkeys");
  if (it == doc.MemberEnd() || !it->value.IsArray()) {
    why = "\"pubkeys\" must be an array of 64-hex keys";
    return false;
  }
  const auto& arr = it->value.GetArray();
  if (arr.Empty()) {
    why = "\"pubkeys\" is empty";
    return false;
  }
  if (arr.Size() > max) {
    why = "at most " + std::to_string(max) + " pubkeys per request (got "
          + std::to_string(arr.Size()) + ")";
    return false;
  }
  keys.clear();
  keys.reserve(arr.Size());
  for (rapidjson::SizeType i = 0; i < arr.Size(); ++i) {
    const auto& v = arr[i];
    if (!v.IsString() || !lower_hex64({v.GetString(), v.GetStringLength()})) {
      why = "pubkeys[" + std::to_string(i) + "] is not a lowercase 64-hex key";
      return false;
    }
    keys.emplace_back(v.GetString(), v.GetStringLength());
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return true;
}

}  // namespace waggle
