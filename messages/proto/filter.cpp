#include "messages/proto/filter.hpp"
#include "messages/proto/json_detail.hpp"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <algorithm>
#include <cstring>

namespace waggle::proto {


namespace {

status invalid(std::string reason) { return status{ec::invalid, std::move(reason)}; }

bool is_ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

bool contains(const std::vector<std::string>& values, std::string_view v) {
  for (const auto& x : values)
    if (x.size() == v.size() && std::memcmp(x.data(), v.data(), v.size()) == 0)
      return true;
  return false;
}

// "ids" / "authors": full 64-char lowercase hex only.
status parse_hex_list(const rapidjson::Value& val, const char* name, const filter_limits& lim,
                      std::optional<std::vector<std::string>>& out) {
  if (!val.IsArray())
    return invalid(std::string(name) + " must be an array");
  if (val.Size() > lim.max_values)
    return invalid(std::string("too many values in ") + name + " (max " +
                   std::to_string(lim.max_values) + ")");
  auto& list = out.emplace();
  list.reserve(val.Size());
  for (const auto& s : val.GetArray()) {
    if (!s.IsString())
      return invalid(std::string(name) + " must contain strings");
    std::string_view sv(s.GetString(), s.GetStringLength());
    if (!is_lower_hex(sv, 64))
      return invalid(std::string(name) +
                     " must be 64-character lowercase hex (prefixes are not supported)");
    list.emplace_back(sv);
  }
  return {};
}

// since / until: a non-negative integer that fits int64.
status parse_timestamp(const rapidjson::Value& val, const char* name, std::optional<int64_t>& out) {
  if (!val.IsInt64() || val.GetInt64() < 0)
    return invalid(std::string(name) + " must be a non-negative integer");
  out = val.GetInt64();
  return {};
}

}  // namespace

namespace detail {

result<filter> parse_filter_value(const rapidjson::Value& v, const filter_limits& lim) {
  if (!v.IsObject())
    return invalid("filter must be a JSON object");
  filter f;
  bool seen_since = false, seen_until = false, seen_limit = false;
  for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it) {
    std::string_view key(it->name.GetString(), it->name.GetStringLength());
    const auto& val = it->value;
    auto duplicate = [&] {
      return invalid("duplicate filter field: " + printable_excerpt(key, 64));
    };
    if (key == "ids") {
      if (f.ids)
        return duplicate();
      if (status s = parse_hex_list(val, "ids", lim, f.ids); !s.ok())
        return s;
    } else if (key == "authors") {
      if (f.authors)
        return duplicate();
      if (status s = parse_hex_list(val, "authors", lim, f.authors); !s.ok())
        return s;
    } else if (key == "kinds") {
      if (f.kinds)
        return duplicate();
      if (!val.IsArray())
        return invalid("kinds must be an array");
      if (val.Size() > lim.max_values)
        return invalid("too many values in kinds (max " + std::to_string(lim.max_values) + ")");
      auto& kinds = f.kinds.emplace();
      kinds.reserve(val.Size());
      for (const auto& k : val.GetArray()) {
        if (!k.IsInt64() || k.GetInt64() < 0 || k.GetInt64() > 65535)
          return invalid("kinds must be integers between 0 and 65535");
        kinds.push_back(static_cast<int32_t>(k.GetInt64()));
      }
    } else if (key == "since") {
      if (seen_since)
        return duplicate();
      seen_since = true;
      if (status s = parse_timestamp(val, "since", f.since); !s.ok())
        return s;
    } else if (key == "until") {
      if (seen_until)
        return duplicate();
      seen_until = true;
      if (status s = parse_timestamp(val, "until", f.until); !s.ok())
        return s;
    } else if (key == "limit") {
      if (seen_limit)
        return duplicate();
      seen_limit = true;
      if (!val.IsUint64())
        return invalid("limit must be a non-negative integer");
      f.limit = static_cast<uint32_t>(std::min<uint64_t>(val.GetUint64(), lim.max_limit));
    } else if (key.size() == 2 && key[0] == '#' && is_ascii_letter(key[1])) {
      const char letter = key[1];
      if (f.tags.count(letter))
        return duplicate();
      if (!val.IsArray())
        return invalid(std::string(key) + " must be an array");
      if (val.Size() > lim.max_values)
        return invalid("too many values in " + std::string(key) + " (max " +
                       std::to_string(lim.max_values) + ")");
      auto& values = f.tags[letter];
      values.reserve(val.Size());
      for (const auto& s : val.GetArray()) {
        if (!s.IsString())
          return invalid(std::string(key) + " must contain strings");
        std::string_view sv(s.GetString(), s.GetStringLength());
        if (sv.size() > lim.max_tag_value_len)
          return invalid("tag value too long in " + std::string(key) + " (max " +
                         std::to_string(lim.max_tag_value_len) + " bytes)");
        if (!valid_utf8(sv))
          return invalid("tag values in " + std::string(key) + " must be valid UTF-8");
        values.emplace_back(sv);
      }
    } else if (key == "search") {
      if (f.search)
        return duplicate();
      if (!lim.search)
        return invalid("search is off on this relay (NIP-50 is not supported here)");
      if (!val.IsString())
        return invalid("search must be a string");
      std::string_view sv(val.GetString(), val.GetStringLength());
      if (sv.size() > lim.max_search_len)
        return invalid("search too long (max " + std::to_string(lim.max_search_len) + " bytes)");
      if (!valid_utf8(sv))
        return invalid("search must be valid UTF-8");
      f.search.emplace(sv);
    } else {
      return invalid("unsupported filter field: " + printable_excerpt(key, 64));
    }
  }
  return f;
}

}  // namespace detail

bool filter::matches_nothing() const {
  if (ids && ids->empty())
    return true;
  if (authors && authors->empty())
    return true;
  if (kinds && kinds->empty())
    return true;
  for (const auto& [letter, values] : tags)
    if (values.empty())
      return true;
  if (since && until && *since > *until)
    return true;
  if (search && search_terms(*search).empty())
    return true;  // nothing to search for (documented in docs/search.md)
  return false;
}

namespace {

// The extension keys NIP-50 defines. Only these are taken for extensions:
// team chat is full of `key:value` text that is no extension (`TODO:fix`,
// `file.cpp:42`, `10:30`), which is searched as words.
bool is_nip50_extension(std::string_view token) {
  auto colon = token.find(':');
  if (colon == std::string_view::npos || colon + 1 == token.size())
    return false;
  auto key = token.substr(0, colon);
  return key == "include" || key == "domain" || key == "language" || key == "sentiment" ||
         key == "nsfw";
}

}  // namespace

std::string search_terms(std::string_view search) {
  std::string out;
  out.reserve(search.size());
  size_t i = 0;
  while (i < search.size()) {
    auto blank = [](unsigned char c) { return c <= 0x20 || c == 0x7f; };
    while (i < search.size() && blank(static_cast<unsigned char>(search[i])))
      ++i;
    size_t start = i;
    while (i < search.size() && !blank(static_cast<unsigned char>(search[i])))
      ++i;
    auto token = search.substr(start, i - start);
    if (token.empty() || is_nip50_extension(token))
      continue;
    if (!out.empty())
      out.push_back(' ');
    out.append(token);
  }
  return out;
}

result<filter> parse_filter(std::string_view json, const filter_limits& lim) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseValidateEncodingFlag | rapidjson::kParseIterativeFlag>(json.data(),
                                                                                    json.size());
  if (doc.HasParseError())
    return invalid(std::string("filter is not valid JSON: ") +
                   rapidjson::GetParseError_En(doc.GetParseError()));
  return detail::parse_filter_value(doc, lim);
}

bool matches(const filter& f, const event& ev) {
  // NIP-50 search is one-shot: history then EOSE, never a live event.
  if (f.search)
    return false;
  // Cheapest checks first.
  if (f.since && ev.created_at < *f.since)
    return false;
  if (f.until && ev.created_at > *f.until)
    return false;
  if (f.kinds && std::find(f.kinds->begin(), f.kinds->end(), ev.kind) == f.kinds->end())
    return false;
  if (f.authors && !contains(*f.authors, ev.pubkey))
    return false;
  if (f.ids && !contains(*f.ids, ev.id))
    return false;
  for (const auto& [letter, values] : f.tags) {
    bool found = false;
    for (const auto& t : ev.tags) {
      if (t.size() >= 2 && t[0].size() == 1 && t[0][0] == letter && contains(values, t[1])) {
        found = true;
        break;
      }
    }
    if (!found)
      return false;
  }
  return true;
}

bool matches_any(const std::vector<filter>& fs, const event& ev) {
  for (const auto& f : fs)
    if (matches(f, ev))
      return true;
  return false;
}

std::string to_json(const filter& f) {
  std::string out;
  out.reserve(64 + (f.ids ? f.ids->size() * 67 : 0) + (f.authors ? f.authors->size() * 67 : 0));
  out.push_back('{');
  bool first = true;
  auto key = [&](std::string_view k) {
    if (!first)
      out.push_back(',');
    first = false;
    detail::append_json_string(out, k);
    out.push_back(':');
  };
  auto string_list = [&](const std::vector<std::string>& values) {
    out.push_back('[');
    for (size_t i = 0; i < values.size(); ++i) {
      if (i)
        out.push_back(',');
      detail::append_json_string(out, values[i]);
    }
    out.push_back(']');
  };
  if (f.ids) {
    key("ids");
    string_list(*f.ids);
  }
  if (f.authors) {
    key("authors");
    string_list(*f.authors);
  }
  if (f.kinds) {
    key("kinds");
    out.push_back('[');
    for (size_t i = 0; i < f.kinds->size(); ++i) {
      if (i)
        out.push_back(',');
      detail::append_int(out, (*f.kinds)[i]);
    }
    out.push_back(']');
  }
  for (const auto& [letter, values] : f.tags) {
    const char k[2] = {'#', letter};
    key(std::string_view(k, 2));
    string_list(values);
  }
  if (f.since) {
    key("since");
    detail::append_int(out, *f.since);
  }
  if (f.until) {
    key("until");
    detail::append_int(out, *f.until);
  }
  if (f.limit) {
    key("limit");
    detail::append_int(out, *f.limit);
  }
  if (f.search) {
    key("search");
    detail::append_json_string(out, *f.search);
  }
  out.push_back('}');
  return out;
}

}  // namespace waggle::proto
