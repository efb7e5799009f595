// NIP-01 serialisation of an event (compact JSON and the canonical form its id
// hashes), event ids and BIP-340 signatures. Parsing and validation are in
// event.cpp.
#include "messages/proto/event.hpp"
#include "messages/proto/event_detail.hpp"
#include "messages/proto/json_detail.hpp"

#include <openssl/rand.h>
#include <openssl/sha.h>
#include <secp256k1.h>
#include <secp256k1_extrakeys.h>
#include <secp256k1_schnorrsig.h>

#include <array>
#include <charconv>
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

}  // namespace detail

// ---------------------------------------------------------------------------
std::string canonical_serialization(const event& ev) {
  std::string out;
  append_canonical(out, ev);
  return out;
}

std::string compute_id(const event& ev) {
  unsigned char digest[32];
  detail::sha256_of_canonical(ev, digest);
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
  detail::sha256_of_canonical(ev, digest);
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

std::string to_hex(const unsigned char* data, size_t len) {
  std::string out(len * 2, '\0');
  for (size_t i = 0; i < len; ++i) {
    out[2 * i] = hex_digits[data[i] >> 4];
    out[2 * i + 1] = hex_digits[data[i] & 0xf];
  }
  return out;
}

}  // namespace waggle::proto
