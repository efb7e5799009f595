#include "messages/proto/event.hpp"
#include "messages/proto/json_detail.hpp"

#include <openssl/rand.h>
#include <openssl/sha.h>
#include <secp256k1.h>
#include <secp256k1_extrakeys.h>
#include <secp256k1_schnorrsig.h>

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <array>
#include <charconv>
#include <cstring>
#include <stdexcept>

namespace waggle::proto {


namespace {

// ---------------------------------------------------------------------------
// JSON string escaping (NIP-01): \" \\ \n \r \t \b \f as two-char escapes,
// other bytes below 0x20 as \u00xx (lowercase hex), everything else verbatim.

// 0: verbatim; otherwise the second char of a two-char escape, or 'u'.
constexpr std::array<char, 256> make_escape_table() {
  std::array<char, 256> t{};
  for (int c = 0; c < 0x20; ++c)
    t[c] = 'u';
  t['\n'] = 'n';
  t['\r'] = 'r';
  t['\t'] = 't';
  t['\b'] = 'b';
  t['\f'] = 'f';
  t['"'] = '"';
  t['\\'] = '\\';
  return t;
}
constexpr auto escape_table = make_escape_table();

constexpr char hex_digits[] = "0123456789abcdef";

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

size_t json_size_hint(std::string_view s) { return s.size() + 2 + s.size() / 16; }

size_t tags_size_hint(const std::vector<tag>& tags) {
  size_t n = 2;
  for (const auto& t : tags) {
    n += 3;
    for (const auto& v : t)
      n += json_size_hint(v) + 1;
  }
  return n;
}

void append_tags(std::string& out, const std::vector<tag>& tags) {
  out.push_back('[');
  bool first_tag = true;
  for (const auto& t : tags) {
    if (!first_tag)
      out.push_back(',');
    first_tag = false;
    out.push_back('[');
    bool first = true;
    for (const auto& v : t) {
      if (!first)
        out.push_back(',');
      first = false;
      detail::append_json_string(out, v);
    }
    out.push_back(']');
  }
  out.push_back(']');
}

void append_canonical(std::string& out, const event& ev) {
  out.reserve(out.size() + 24 + ev.pubkey.size() + 40 + tags_size_hint(ev.tags) +
              json_size_hint(ev.content));
  out.append("[0,", 3);
  detail::append_json_string(out, ev.pubkey);
  out.push_back(',');
  detail::append_int(out, ev.created_at);
  out.push_back(',');
  detail::append_int(out, ev.kind);
  out.push_back(',');
  append_tags(out, ev.tags);
  out.push_back(',');
  detail::append_json_string(out, ev.content);
  out.push_back(']');
}

void sha256_of_canonical(const event& ev, unsigned char digest[32]) {
  // One reusable buffer per thread: the canonical form is needed only long
  // enough to hash it.
  thread_local std::string buf;
  buf.clear();
  append_canonical(buf, ev);
  SHA256(reinterpret_cast<const unsigned char*>(buf.data()), buf.size(), digest);
  if (buf.capacity() > (1u << 20)) {  // don't keep a huge buffer around forever
    buf.clear();
    buf.shrink_to_fit();
  }
}

// ---------------------------------------------------------------------------
// secp256k1: one context for the whole process, created and randomised once
// (thread-safe static initialisation). All later uses take it as const, which
// libsecp256k1 documents as safe to share between threads. Never destroyed, so
// no static-destruction-order surprises at exit.
const secp256k1_context* secp_ctx() {
  static const secp256k1_context* ctx = [] {
    secp256k1_context* c = secp256k1_context_create(SECP256K1_CONTEXT_NONE);
    unsigned char seed[32];
    if (RAND_bytes(seed, sizeof seed) == 1) {
      // Randomisation only hardens signing against side channels.
      if (secp256k1_context_randomize(c, seed) != 1) {
        // Cannot fail for a context made by secp256k1_context_create.
      }
    }
    return c;
  }();
  return ctx;
}

bool make_keypair(std::string_view secret_hex, secp256k1_keypair& kp) {
  unsigned char sec[32];
  if (secret_hex.size() != 64 || !from_hex(secret_hex, sec, 32))
    return false;
  int ok = secp256k1_keypair_create(secp_ctx(), &kp, sec);
  OPENSSL_cleanse(sec, sizeof sec);
  return ok == 1;
}

std::string xonly_hex(const secp256k1_keypair& kp) {
  secp256k1_xonly_pubkey xpk;
  unsigned char pk[32];
  if (secp256k1_keypair_xonly_pub(secp_ctx(), &xpk, nullptr, &kp) != 1)
    throw std::runtime_error("secp256k1_keypair_xonly_pub failed");  // cannot happen
  secp256k1_xonly_pubkey_serialize(secp_ctx(), pk, &xpk);
  return to_hex(pk, 32);
}

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

void append_json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  const char* p = s.data();
  const char* const end = p + s.size();
  const char* run = p;
  for (; p != end; ++p) {
    const char e = escape_table[static_cast<unsigned char>(*p)];
    if (e == 0)
      continue;
    out.append(run, static_cast<size_t>(p - run));
    if (e == 'u') {
      const auto c = static_cast<unsigned char>(*p);
      const char u[6] = {'\\', 'u', '0', '0', hex_digits[c >> 4], hex_digits[c & 0xf]};
      out.append(u, 6);
    } else {
      const char two[2] = {'\\', e};
      out.append(two, 2);
    }
    run = p + 1;
  }
  out.append(run, static_cast<size_t>(end - run));
  out.push_back('"');
}

void append_int(std::string& out, int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<size_t>(r.ptr - buf));
}

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

std::string canonical_serialization(const event& ev) {
  std::string out;
  append_canonical(out, ev);
  return out;
}

std::string compute_id(const event& ev) {
  unsigned char digest[32];
  sha256_of_canonical(ev, digest);
  return to_hex(digest, 32);
}

std::string to_json(const event& ev) {
  std::string out;
  out.reserve(100 + json_size_hint(ev.id) + json_size_hint(ev.pubkey) + json_size_hint(ev.sig) +
              tags_size_hint(ev.tags) + json_size_hint(ev.content));
  out.append("{\"id\":", 6);
  detail::append_json_string(out, ev.id);
  out.append(",\"pubkey\":", 10);
  detail::append_json_string(out, ev.pubkey);
  out.append(",\"created_at\":", 14);
  detail::append_int(out, ev.created_at);
  out.append(",\"kind\":", 8);
  detail::append_int(out, ev.kind);
  out.append(",\"tags\":", 8);
  append_tags(out, ev.tags);
  out.append(",\"content\":", 11);
  detail::append_json_string(out, ev.content);
  out.append(",\"sig\":", 7);
  detail::append_json_string(out, ev.sig);
  out.push_back('}');
  return out;
}

result<event> parse_event(std::string_view json) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseValidateEncodingFlag | rapidjson::kParseIterativeFlag>(json.data(),
                                                                                    json.size());
  if (doc.HasParseError())
    return invalid(std::string("event is not valid JSON: ") +
                   rapidjson::GetParseError_En(doc.GetParseError()));
  return detail::parse_event_value(doc);
}

bool verify_schnorr(std::string_view pubkey_hex, std::string_view msg_hex, std::string_view sig_hex) {
  unsigned char pk[32], msg[32], sig[64];
  if (pubkey_hex.size() != 64 || msg_hex.size() != 64 || sig_hex.size() != 128)
    return false;
  if (!from_hex(pubkey_hex, pk, 32) || !from_hex(msg_hex, msg, 32) || !from_hex(sig_hex, sig, 64))
    return false;
  const secp256k1_context* ctx = secp_ctx();
  secp256k1_xonly_pubkey xpk;
  if (secp256k1_xonly_pubkey_parse(ctx, &xpk, pk) != 1)
    return false;
  return secp256k1_schnorrsig_verify(ctx, sig, msg, 32, &xpk) == 1;
}

bool verify_signature(const event& ev) { return verify_schnorr(ev.pubkey, ev.id, ev.sig); }

// Throws std::invalid_argument for a malformed or out-of-range secret: these
// are for tests, tools and the relay's own configured key, never client input.
std::string pubkey_of(std::string_view secret_hex) {
  secp256k1_keypair kp;
  if (!make_keypair(secret_hex, kp))
    throw std::invalid_argument("invalid secret key");
  return xonly_hex(kp);
}

void sign(event& ev, std::string_view secret_hex) {
  secp256k1_keypair kp;
  if (!make_keypair(secret_hex, kp))
    throw std::invalid_argument("invalid secret key");
  ev.pubkey = xonly_hex(kp);
  unsigned char digest[32];
  sha256_of_canonical(ev, digest);
  ev.id = to_hex(digest, 32);
  unsigned char aux[32];
  if (RAND_bytes(aux, sizeof aux) != 1)
    throw std::runtime_error("RAND_bytes failed");
  unsigned char sig[64];
  if (secp256k1_schnorrsig_sign32(secp_ctx(), sig, digest, &kp, aux) != 1)
    throw std::runtime_error("schnorr signing failed");
  ev.sig = to_hex(sig, 64);
  ev.raw = to_json(ev);
  OPENSSL_cleanse(&kp, sizeof kp);
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

std::string to_hex(const unsigned char* data, size_t len) {
  std::string out(len * 2, '\0');
  for (size_t i = 0; i < len; ++i) {
    out[2 * i] = hex_digits[data[i] >> 4];
    out[2 * i + 1] = hex_digits[data[i] & 0xf];
  }
  return out;
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
