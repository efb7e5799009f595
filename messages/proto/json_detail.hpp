#pragma once

// Helpers shared by the proto sources (event.cpp, event_sign.cpp and filter.cpp
// define them). Internal: kept out of the public headers so RapidJSON does not
// leak into every translation unit that includes event.hpp.

#include <cstdint>
#include <string>
#include <string_view>

#include <rapidjson/fwd.h>

#include "messages/proto/event.hpp"
#include "messages/proto/filter.hpp"

namespace waggle::proto::detail {

void append_json_string(std::string& out, std::string_view s);
void append_int(std::string& out, int64_t v);
bool valid_utf8(std::string_view s);
std::string printable_excerpt(std::string_view s, size_t max_len);
result<event> parse_event_value(const rapidjson::Value& v);
result<filter> parse_filter_value(const rapidjson::Value& v, const filter_limits& lim);

}  // namespace waggle::proto::detail
