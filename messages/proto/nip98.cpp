#include "messages/proto/nip98.hpp"

#include <array>
#include <cctype>

#include <openssl/evp.h>

#include "messages/proto/event.hpp"
#include "messages/proto/text.hpp"

namespace waggle::proto {

namespace {

constexpr char b64_alphabet[] =
  "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int b64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '+')
    return 62;
  if (c == '/')
    return 63;
  return -1;
}


// ASCII case-insensitive equality (schemes, hosts, the auth scheme, hex).
bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

// Splits "scheme://host/path?query" into scheme and the rest after "://".
bool split_url(std::string_view url, std::string_view& scheme, std::string_view& host,
               std::string_view& path) {
  auto sep = url.find("://");
  if (sep == std::string_view::npos)
    return false;
  scheme = url.substr(0, sep);
  auto rest = url.substr(sep + 3);
  auto slash = rest.find_first_of("/?");
  if (slash == std::string_view::npos) {
    host = rest;
    path = "/";
  } else {
    host = rest.substr(0, slash);
    path = rest.substr(slash);
    if (path.front() == '?')
      return false;  // "http://h?x" is not a URL we ever build
  }
  return !host.empty();
}

nip98_result fail(std::string reason) {
  return {false, {}, {ec::auth_required, std::move(reason)}};
}

}  // namespace

std::string base64_encode(std::string_view data) {
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= data.size(); i += 3) {
    uint32_t n = (uint32_t(uint8_t(data[i])) << 16) | (uint32_t(uint8_t(data[i + 1])) << 8)
                 | uint8_t(data[i + 2]);
    out += b64_alphabet[(n >> 18) & 63];
    out += b64_alphabet[(n >> 12) & 63];
    out += b64_alphabet[(n >> 6) & 63];
    out += b64_alphabet[n & 63];
  }
  size_t rest = data.size() - i;
  if (rest == 1) {
    uint32_t n = uint32_t(uint8_t(data[i])) << 16;
    out += b64_alphabet[(n >> 18) & 63];
    out += b64_alphabet[(n >> 12) & 63];
    out += "==";
  } else if (rest == 2) {
    uint32_t n = (uint32_t(uint8_t(data[i])) << 16) | (uint32_t(uint8_t(data[i + 1])) << 8);
    out += b64_alphabet[(n >> 18) & 63];
    out += b64_alphabet[(n >> 12) & 63];
    out += b64_alphabet[(n >> 6) & 63];
    out += '=';
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  // Strip up to two '=' of padding; the remaining length decides the tail.
  size_t pad = 0;
  while (!text.empty() && text.back() == '=' && pad < 2) {
    text.remove_suffix(1);
    ++pad;
  }
  if (text.size() % 4 == 1)
    return std::nullopt;
  if (pad > 0 && (text.size() + pad) % 4 != 0)
    return std::nullopt;
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : text) {
    int v = b64_value(c);
    if (v < 0)
      return std::nullopt;
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += char((acc >> bits) & 0xFF);
    }
  }
  // Leftover bits must be zero (canonical encoding); reject otherwise.
  if (bits > 0 && (acc & ((1u << bits) - 1)) != 0)
    return std::nullopt;
  return out;
}

std::string sha256_hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  return proto::to_hex(md, len);
}

nip98_result verify_nip98(std::string_view authorization, std::string_view method,
                          std::string_view host, std::string_view target, std::string_view body,
                          int64_t now, int64_t window_seconds, bool require_payload) {
  authorization = trim(authorization);
  if (authorization.empty())
    return fail("missing Authorization header (NIP-98)");
  auto space = authorization.find(' ');
  if (space == std::string_view::npos || !iequals(authorization.substr(0, space), "Nostr"))
    return fail("Authorization scheme must be Nostr (NIP-98)");
  auto token = trim(authorization.substr(space + 1));
  auto json = base64_decode(token);
  if (!json)
    return fail("Authorization token is not valid base64");
  auto parsed = proto::parse_event(*json);
  if (!parsed)
    return fail("Authorization event is invalid: " + parsed.error().reason);
  const proto::event& ev = *parsed;
  if (ev.kind != 27235)
    return fail("Authorization event must be kind 27235");
  if (ev.created_at < now - window_seconds || ev.created_at > now + window_seconds)
    return fail("Authorization event created_at is not within " + std::to_string(window_seconds)
                + " seconds of now");

  auto u = proto::first_tag_value(ev, "u");
  if (!u)
    return fail("Authorization event has no u tag");
  std::string_view scheme, u_host, u_path;
  if (!split_url(*u, scheme, u_host, u_path)
      || !(iequals(scheme, "http") || iequals(scheme, "https")) || !iequals(u_host, host)
      || u_path != target)
    return fail("Authorization u tag does not match the request URL http://" + std::string(host)
                + std::string(target));

  auto m = proto::first_tag_value(ev, "method");
  if (!m)
    return fail("Authorization event has no method tag");
  if (!iequals(*m, method))
    return fail("Authorization method tag must be " + std::string(method));

  if (auto payload = proto::first_tag_value(ev, "payload")) {
    if (!iequals(*payload, sha256_hex(body)))
      return fail("Authorization payload tag does not match the SHA-256 of the body");
  } else if (require_payload || !body.empty()) {
    // Without it the token does not bind the body: anyone who saw it could
    // send another body under the same key within the window.
    auto r = fail("Authorization event has no payload tag (the SHA-256 of the body)");
    r.missing_payload = true;
    return r;
  }

  if (!proto::verify_signature(ev))
    return fail("Authorization event signature is invalid");
  nip98_result ok{true, ev.pubkey, {}};
  ok.token_key = ev.sig;
  ok.created_at = ev.created_at;
  return ok;
}

std::string make_nip98(std::string_view secret_hex, std::string_view url, std::string_view method,
                       std::string_view body, int64_t now) {
  event ev;
  ev.kind = 27235;
  ev.created_at = now;
  ev.tags = {{"u", std::string(url)},
             {"method", std::string(method)},
             {"payload", sha256_hex(body)}};
  sign(ev, secret_hex);
  return "Nostr " + base64_encode(ev.raw);
}

}  // namespace waggle::proto
