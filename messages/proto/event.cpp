// Parsing and validation of events (NIP-01): shape, hex fields, UTF-8, the id
// against the content; tag look-ups and hex decoding. Serialisation, ids and
// signatures are in event_sign.cpp.
#include "messages/proto/event.hpp"
#include "messages/proto/event_detail.hpp"
#include "messages/proto/json_detail.hpp"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <array>
#include <cstring>

namespace waggle::proto {


namespace {

// -1 for a non-hex char; accepts both cases (from_hex is a decoder; the
// validators demand lowercase separately).
constexpr std::array<int8_t, 256> make_unhex_table() {
  std::array<int8_t, 256> t{};
  for (auto& x : t)
    x = -1;
  for (int c = '0'; c <= '9'; ++c)
    t[c] = static_cast<int8_t>(c - '0');
  for (int c = 'a'; c <= 'f'; ++c)
    t[c] = static_cast<int8_t>(c - 'a' + 10);
  for (int c = 'A'; c <= 'F'; ++c)
    t[c] = static_cast<int8_t>(c - 'A' + 10);
  return t;
}
constexpr auto unhex_table = make_unhex_table();

status invalid(std::string reason) { return status{ec::invalid, std::move(reason)}; }

// The fields of an event, by the name RapidJSON gives us (exact length).
enum class field : uint8_t { id, pubkey, created_at, kind, tags, content, sig, other };

field field_of(const char* s, size_t n) {
  switch (n) {
    case 2: return std::memcmp(s, "id", 2) == 0 ? field::id : field::other;
    case 3: return std::memcmp(s, "sig", 3) == 0 ? field::sig : field::other;
    case 4:
      if (std::memcmp(s, "kind", 4) == 0) return field::kind;
      if (std::memcmp(s, "tags", 4) == 0) return field::tags;
      return field::other;
    case 6: return std::memcmp(s, "pubkey", 6) == 0 ? field::pubkey : field::other;
    case 7: return std::memcmp(s, "content", 7) == 0 ? field::content : field::other;
    case 10: return std::memcmp(s, "created_at", 10) == 0 ? field::created_at : field::other;
    default: return field::other;
  }
}

constexpr const char* field_names[] = {"id", "pubkey", "created_at", "kind", "tags", "content", "sig"};

}  // namespace

// ---------------------------------------------------------------------------
namespace detail {

// Strict UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF). RapidJSON
// validates the raw bytes of a frame, but a lone "\udc00" escape decodes to a
// surrogate that would make our re-serialised event invalid UTF-8.
bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* const end = p + s.size();
  while (p != end) {
    // ASCII fast path, 8 bytes at a time.
    while (end - p >= 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      if (w & 0x8080808080808080ull)
        break;
      p += 8;
    }
    if (p == end)
      break;
    const unsigned char c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    size_t n;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
      n = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 2;
      if (c == 0xe0) lo = 0xa0;
      else if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3;
      if (c == 0xf0) lo = 0x90;
      else if (c == 0xf4) hi = 0x8f;
    } else {
      return false;
    }
    if (static_cast<size_t>(end - p) <= n)
      return false;
    if (p[1] < lo || p[1] > hi)
      return false;
    for (size_t i = 2; i <= n; ++i)
      if ((p[i] & 0xc0) != 0x80)
        return false;
    p += n + 1;
  }
  return true;
}

// For echoing client text inside an error reason: at most max_len bytes, cut on
// a character boundary, invalid UTF-8 and control characters replaced by '?'.
std::string printable_excerpt(std::string_view s, size_t max_len) {
  std::string out;
  out.reserve(std::min(s.size(), max_len) + 3);
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    if (i + len > s.size())
      len = 1;
    if (out.size() + len > max_len) {
      out += "...";
      break;
    }
    std::string_view ch = s.substr(i, len);
    if ((len == 1 && (c < 0x20 || c >= 0x80)) || (len > 1 && !valid_utf8(ch)))
      out.push_back('?');
    else
      out.append(ch);
    i += len;
  }
  return out;
}

result<event> parse_event_value(const rapidjson::Value& v) {
  if (!v.IsObject())
    return invalid("event must be a JSON object");
  event ev;
  unsigned seen = 0;
  for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it) {
    const auto& name = it->name;
    const field f = field_of(name.GetString(), name.GetStringLength());
    if (f == field::other)
      continue;  // unknown extra fields are ignored (they are not part of the id)
    const unsigned bit = 1u << static_cast<unsigned>(f);
    if (seen & bit)
      return invalid(std::string("duplicate event field: ") + field_names[static_cast<unsigned>(f)]);
    seen |= bit;
    const auto& val = it->value;
    switch (f) {
      case field::id:
      case field::pubkey:
      case field::sig: {
        const size_t want = f == field::sig ? 128 : 64;
        const char* fname = field_names[static_cast<unsigned>(f)];
        if (!val.IsString())
          return invalid(std::string(fname) + " must be a string");
        std::string_view s(val.GetString(), val.GetStringLength());
        if (!is_lower_hex(s, want))
          return invalid(std::string(fname) + " must be " + std::to_string(want) +
                         " lowercase hex characters");
        std::string& dst = f == field::id ? ev.id : f == field::pubkey ? ev.pubkey : ev.sig;
        dst.assign(s);
        break;
      }
      case field::created_at:
        if (!val.IsInt64() || val.GetInt64() < 0)
          return invalid("created_at must be a non-negative integer");
        ev.created_at = val.GetInt64();
        break;
      case field::kind:
        if (!val.IsInt64() || val.GetInt64() < 0 || val.GetInt64() > 65535)
          return invalid("kind must be an integer between 0 and 65535");
        ev.kind = static_cast<int32_t>(val.GetInt64());
        break;
      case field::tags: {
        if (!val.IsArray())
          return invalid("tags must be an array");
        ev.tags.reserve(val.Size());
        for (const auto& t : val.GetArray()) {
          if (!t.IsArray())
            return invalid("each tag must be an array of strings");
          if (t.Empty())
            return invalid("a tag must not be empty");
          tag& out = ev.tags.emplace_back();
          out.reserve(t.Size());
          for (const auto& s : t.GetArray()) {
            if (!s.IsString())
              return invalid("each tag must be an array of strings");
            std::string_view sv(s.GetString(), s.GetStringLength());
            if (!valid_utf8(sv))
              return invalid("tag values must be valid UTF-8");
            out.emplace_back(sv);
          }
        }
        break;
      }
      case field::content: {
        if (!val.IsString())
          return invalid("content must be a string");
        std::string_view sv(val.GetString(), val.GetStringLength());
        if (!valid_utf8(sv))
          return invalid("content must be valid UTF-8");
        ev.content.assign(sv);
        break;
      }
      case field::other:
        break;
    }
  }
  if (seen != 0x7f) {
    for (unsigned i = 0; i < 7; ++i)
      if (!(seen & (1u << i)))
        return invalid(std::string("missing event field: ") + field_names[i]);
  }
  unsigned char digest[32];
  sha256_of_canonical(ev, digest);
  // Compare the digest against the claimed id without building a hex string.
  for (size_t i = 0; i < 32; ++i) {
    const auto hi = static_cast<unsigned char>(ev.id[2 * i]);
    const auto lo = static_cast<unsigned char>(ev.id[2 * i + 1]);
    if (((unhex_table[hi] << 4) | unhex_table[lo]) != digest[i])
      return invalid("event id does not match its content");
  }
  ev.raw = to_json(ev);
  return ev;
}

}  // namespace detail

// ---------------------------------------------------------------------------
std::optional<std::string_view> first_tag_value(const event& ev, std::string_view name) {
  for (const auto& t : ev.tags) {
    if (!t.empty() && t[0] == name)
      return t.size() >= 2 ? std::string_view(t[1]) : std::string_view();
  }
  return std::nullopt;
}

std::string d_tag(const event& ev) { return std::string(first_tag_value(ev, "d").value_or("")); }

result<event> parse_event(std::string_view json) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseValidateEncodingFlag | rapidjson::kParseIterativeFlag>(json.data(),
                                                                                    json.size());
  if (doc.HasParseError())
    return invalid(std::string("event is not valid JSON: ") +
                   rapidjson::GetParseError_En(doc.GetParseError()));
  return detail::parse_event_value(doc);
}

bool is_lower_hex(std::string_view s, size_t len) {
  if (s.size() != len)
    return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return false;
  }
  return true;
}

// Decodes exactly out_len bytes; accepts upper- and lowercase digits.
bool from_hex(std::string_view hex, unsigned char* out, size_t out_len) {
  if (hex.size() != out_len * 2)
    return false;
  for (size_t i = 0; i < out_len; ++i) {
    const int hi = unhex_table[static_cast<unsigned char>(hex[2 * i])];
    const int lo = unhex_table[static_cast<unsigned char>(hex[2 * i + 1])];
    if (hi < 0 || lo < 0)
      return false;
    out[i] = static_cast<unsigned char>((hi << 4) | lo);
  }
  return true;
}

}  // namespace waggle::proto
