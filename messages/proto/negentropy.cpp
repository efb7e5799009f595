#include "messages/proto/negentropy.hpp"

#include <algorithm>
#include <cstring>
#include <unordered_set>

#include <openssl/evp.h>

namespace waggle::proto::negentropy {

namespace {

enum class mode : uint64_t { skip = 0, fingerprint = 1, id_list = 2 };

void put_varint(uint64_t n, std::string& out) {
  char buf[10];
  size_t len = 0;
  do {
    buf[len++] = static_cast<char>(n & 0x7f);
    n >>= 7;
  } while (n != 0);
  // Most significant group first; every byte but the last has the high bit.
  for (size_t i = len; i-- > 0;)
    out.push_back(static_cast<char>(buf[i] | (i > 0 ? 0x80 : 0)));
}

// A cursor over a peer's message; every read checks what is left.
class reader {
 public:
  explicit reader(std::string_view in) : in_(in) {}
  bool done() const { return pos_ == in_.size(); }
  bool varint(uint64_t& out) {
    out = 0;
    for (;;) {
      if (pos_ == in_.size())
        return false;
      auto byte = static_cast<uint8_t>(in_[pos_++]);
      if (out > (UINT64_MAX >> 7))
        return false;  // longer than 64 bits: no honest peer sends it
      out = (out << 7) | (byte & 0x7f);
      if ((byte & 0x80) == 0)
        return true;
    }
  }
  bool bytes(size_t n, std::string_view& out) {
    if (in_.size() - pos_ < n)
      return false;
    out = in_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  size_t left() const { return in_.size() - pos_; }

 private:
  std::string_view in_;
  size_t pos_ = 0;
};

bool below(const item& it, const bound& b) {
  if (it.created_at != b.created_at)
    return it.created_at < b.created_at;
  // A prefix equal to the id's first bytes is below the id.
  return std::memcmp(it.id.data(), b.id_prefix.data(), b.id_prefix.size()) < 0;
}

size_t lower_bound_of(const storage& s, size_t begin, size_t end, const bound& b) {
  while (begin < end) {
    size_t mid = begin + (end - begin) / 2;
    if (below(s.at(mid), b))
      begin = mid + 1;
    else
      end = mid;
  }
  return begin;
}

using word256 = std::array<uint8_t, id_size>;

// Little-endian 256-bit arithmetic, as the reference's accumulator.
void add_into(word256& acc, const uint8_t* other) {
  unsigned carry = 0;
  for (size_t i = 0; i < id_size; ++i) {
    unsigned v = acc[i] + other[i] + carry;
    acc[i] = static_cast<uint8_t>(v);
    carry = v >> 8;
  }
}
word256 minus(const word256& a, const word256& b) {
  word256 out{};
  int borrow = 0;
  for (size_t i = 0; i < id_size; ++i) {
    int v = int(a[i]) - int(b[i]) - borrow;
    borrow = v < 0 ? 1 : 0;
    out[i] = static_cast<uint8_t>(v + (borrow << 8));
  }
  return out;
}

bound minimal_bound(const item& prev, const item& curr) {
  if (curr.created_at != prev.created_at)
    return {curr.created_at, {}};
  size_t shared = 0;
  while (shared < id_size && prev.id[shared] == curr.id[shared])
    ++shared;
  return {curr.created_at,
          std::string(reinterpret_cast<const char*>(curr.id.data()), std::min(shared + 1, id_size))};
}

bound bound_of(const item& it) {
  return {it.created_at, std::string(reinterpret_cast<const char*>(it.id.data()), id_size)};
}

std::string id_string(const item& it) {
  return std::string(reinterpret_cast<const char*>(it.id.data()), id_size);
}

}  // namespace

// ---- storage --------------------------------------------------------------------

bool storage::insert(uint64_t created_at, std::string_view id_bytes) {
  if (id_bytes.size() != id_size)
    return false;
  item it;
  it.created_at = created_at;
  std::memcpy(it.id.data(), id_bytes.data(), id_size);
  items_.push_back(it);
  return true;
}

void storage::seal() {
  auto less = [](const item& a, const item& b) {
    return a.created_at != b.created_at ? a.created_at < b.created_at : a.id < b.id;
  };
  std::sort(items_.begin(), items_.end(), less);
  items_.erase(std::unique(items_.begin(), items_.end(),
                           [](const item& a, const item& b) {
                             return a.created_at == b.created_at && a.id == b.id;
                           }),
               items_.end());
  sums_.assign(items_.size() + 1, word256{});
  for (size_t i = 0; i < items_.size(); ++i) {
    sums_[i + 1] = sums_[i];
    add_into(sums_[i + 1], items_[i].id.data());
  }
}

size_t storage::memory_bytes() const {
  return items_.capacity() * sizeof(item) + sums_.capacity() * sizeof(word256);
}

std::array<uint8_t, fingerprint_size> storage::fingerprint(size_t begin, size_t end) const {
  word256 sum = minus(sums_[end], sums_[begin]);
  std::string input(reinterpret_cast<const char*>(sum.data()), sum.size());
  put_varint(end - begin, input);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(input.data(), input.size(), md, &len, EVP_sha256(), nullptr);
  std::array<uint8_t, fingerprint_size> out{};
  std::memcpy(out.data(), md, fingerprint_size);
  return out;
}

// ---- reconciler -----------------------------------------------------------------

reconciler::reconciler(const storage& s, size_t frame_size_limit)
    : storage_(s), frame_size_limit_(frame_size_limit) {}

bool reconciler::frame_full(size_t n) const {
  return frame_size_limit_ != 0 && n > frame_size_limit_ - 200;
}

void reconciler::encode_bound(const bound& b, std::string& out) {
  if (b.created_at == UINT64_MAX) {
    last_out_ = UINT64_MAX;
    put_varint(0, out);
  } else {
    // Bounds go out in ascending order, each as the step from the last.
    put_varint(b.created_at - last_out_ + 1, out);
    last_out_ = b.created_at;
  }
  put_varint(b.id_prefix.size(), out);
  out += b.id_prefix;
}

void reconciler::split_range(size_t lower, size_t upper, const bound& upper_bound,
                             std::string& out) {
  constexpr size_t buckets = 16;
  const size_t n = upper - lower;
  if (n < buckets * 2) {
    encode_bound(upper_bound, out);
    put_varint(static_cast<uint64_t>(mode::id_list), out);
    put_varint(n, out);
    for (size_t i = lower; i < upper; ++i)
      out += id_string(storage_.at(i));
    return;
  }
  const size_t per = n / buckets, extra = n % buckets;
  size_t curr = lower;
  for (size_t b = 0; b < buckets; ++b) {
    size_t len = per + (b < extra ? 1 : 0);
    auto fp = storage_.fingerprint(curr, curr + len);
    curr += len;
    encode_bound(curr == upper ? upper_bound : minimal_bound(storage_.at(curr - 1), storage_.at(curr)),
                 out);
    put_varint(static_cast<uint64_t>(mode::fingerprint), out);
    out.append(reinterpret_cast<const char*>(fp.data()), fp.size());
  }
}

std::string reconciler::initiate() {
  last_out_ = 0;
  std::string out(1, static_cast<char>(protocol_version));
  split_range(0, storage_.size(), bound::infinity(), out);
  return out;
}

reconciler::result reconciler::respond(std::string_view query) { return run(query, false); }

reconciler::result reconciler::reconcile(std::string_view answer) {
  // Honest peers end in about log16(n) rounds, plus one per frame of ids
  // that must cross at the smallest frame either side may use. Between two
  // rounds that bring news, at most the depth of the range tree passes.
  constexpr size_t rounds_without_news = 64;
  const size_t budget = rounds_without_news +
                        2 * ((storage_.size() + reported_.size()) * id_size / min_frame_size_limit + 1);
  ++rounds_;
  if (rounds_ > budget || rounds_ - last_news_ > rounds_without_news) {
    result r;
    r.error = "the peer has not ended the reconciliation after " + std::to_string(rounds_) +
              " rounds";
    return r;
  }
  auto r = run(answer, true);
  // A range settled by id list may be covered again by a later fingerprint
  // (a cut for the frame size); its ids are news only once.
  auto once = [this](std::vector<std::string>& ids) {
    std::erase_if(ids, [this](const std::string& id) { return !reported_.insert(id).second; });
  };
  once(r.have);
  once(r.need);
  if (!r.have.empty() || !r.need.empty())
    last_news_ = rounds_;
  return r;
}

reconciler::result reconciler::run(std::string_view in, bool initiator) {
  result r;
  if (in.empty()) {
    r.error = "empty message";
    return r;
  }
  const auto version = static_cast<uint8_t>(in[0]);
  if (version < 0x60 || version > 0x6f) {
    r.error = "invalid protocol version byte";
    return r;
  }
  std::string out(1, static_cast<char>(protocol_version));
  if (version != protocol_version) {
    if (initiator)
      r.error = "unsupported protocol version " + std::to_string(version - 0x60);
    else
      r.message = out;  // the reference's negotiation: our version, no ranges
    return r;
  }
  last_in_ = 0;
  last_out_ = 0;
  reader q(in.substr(1));
  const size_t n = storage_.size();
  bound prev_bound{0, {}};
  size_t prev_index = 0;
  // Where the last range written to `out` ends: a cut for the frame limit
  // covers everything from there, so no range is left out of every range.
  size_t emitted_index = 0;
  bool skip = false;
  auto fail = [&](const char* why) {
    r = result{};
    r.error = why;
    return r;
  };
  while (!q.done()) {
    std::string o;
    size_t o_end_index = prev_index;
    auto flush_skip = [&] {
      if (skip) {
        skip = false;
        encode_bound(prev_bound, o);
        put_varint(static_cast<uint64_t>(mode::skip), o);
      }
    };
    // The bound: its timestamp as a step from the previous one (0 = infinity).
    uint64_t ts = 0, prefix_len = 0, m = 0;
    if (!q.varint(ts))
      return fail("message ends inside a bound");
    ts = ts == 0 ? UINT64_MAX : ts - 1;
    if (last_in_ == UINT64_MAX || ts == UINT64_MAX) {
      ts = UINT64_MAX;
    } else {
      if (ts > UINT64_MAX - 1 - last_in_)
        return fail("bound timestamp overflows");
      ts += last_in_;
    }
    last_in_ = ts;
    std::string_view prefix;
    if (!q.varint(prefix_len) || prefix_len > id_size || !q.bytes(prefix_len, prefix))
      return fail("bad bound id prefix");
    bound curr{ts, std::string(prefix)};
    if (!q.varint(m))
      return fail("message ends before a mode");
    size_t lower = prev_index;
    size_t upper = lower_bound_of(storage_, prev_index, n, curr);
    switch (static_cast<mode>(m)) {
      case mode::skip:
        skip = true;
        break;
      case mode::fingerprint: {
        std::string_view theirs;
        if (!q.bytes(fingerprint_size, theirs))
          return fail("message ends inside a fingerprint");
        auto ours = storage_.fingerprint(lower, upper);
        if (std::memcmp(ours.data(), theirs.data(), fingerprint_size) != 0) {
          flush_skip();
          split_range(lower, upper, curr, o);
          o_end_index = upper;
        } else {
          skip = true;
        }
        break;
      }
      case mode::id_list: {
        uint64_t count = 0;
        if (!q.varint(count) || count > q.left() / id_size)
          return fail("bad id list");
        if (initiator) {
          std::unordered_set<std::string_view> theirs;
          for (uint64_t i = 0; i < count; ++i) {
            std::string_view id;
            q.bytes(id_size, id);
            theirs.insert(id);
          }
          for (size_t i = lower; i < upper; ++i) {
            auto id = id_string(storage_.at(i));
            if (theirs.erase(id) == 0)
              r.have.push_back(std::move(id));
          }
          for (auto id : theirs)
            r.need.emplace_back(id);
          skip = true;
        } else {
          // The responder answers with its own ids of the range, as many as
          // the frame takes; the initiator works out both differences.
          std::string_view skipped;
          q.bytes(count * id_size, skipped);
          flush_skip();
          bound end = curr;
          std::string ids;
          uint64_t listed = 0;
          for (size_t i = lower; i < upper; ++i) {
            if (frame_full(out.size() + o.size() + ids.size())) {
              end = bound_of(storage_.at(i));
              upper = i;
              break;
            }
            ids += id_string(storage_.at(i));
            ++listed;
          }
          encode_bound(end, o);
          put_varint(static_cast<uint64_t>(mode::id_list), o);
          put_varint(listed, o);
          o += ids;
          out += o;
          o.clear();
          emitted_index = upper;
          o_end_index = upper;
        }
        break;
      }
      default:
        return fail("unknown range mode");
    }
    if (frame_full(out.size() + o.size())) {
      // The rest in one range: its fingerprint from the end of the last
      // range written, which the peer splits again next round.
      auto fp = storage_.fingerprint(emitted_index, n);
      encode_bound(bound::infinity(), out);
      put_varint(static_cast<uint64_t>(mode::fingerprint), out);
      out.append(reinterpret_cast<const char*>(fp.data()), fp.size());
      break;
    }
    if (!o.empty()) {
      out += o;
      emitted_index = o_end_index;
    }
    prev_index = upper;
    prev_bound = std::move(curr);
  }
  r.message = out.size() == 1 && initiator ? std::string() : std::move(out);
  return r;
}

// ---- packed items ---------------------------------------------------------------

bool append_packed(std::string& packed, uint64_t created_at, std::string_view id_hex) {
  std::string id;
  if (id_hex.size() != id_size * 2 || !from_hex(id_hex, id))
    return false;
  for (int shift = 56; shift >= 0; shift -= 8)
    packed.push_back(static_cast<char>((created_at >> shift) & 0xff));
  packed += id;
  return true;
}

bool load_packed(std::string_view packed, storage& into) {
  if (packed.size() % packed_item_bytes != 0)
    return false;
  into.reserve(into.size() + packed.size() / packed_item_bytes);
  for (size_t at = 0; at < packed.size(); at += packed_item_bytes) {
    uint64_t created_at = 0;
    for (size_t i = 0; i < 8; ++i)
      created_at = (created_at << 8) | static_cast<uint8_t>(packed[at + i]);
    into.insert(created_at, packed.substr(at + 8, id_size));
  }
  return true;
}

// ---- hex ------------------------------------------------------------------------

std::string to_hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

bool from_hex(std::string_view hex, std::string& out) {
  if (hex.size() % 2 != 0)
    return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
      return c - 'A' + 10;
    return -1;
  };
  out.clear();
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0)
      return false;
    out.push_back(static_cast<char>((hi << 4) | lo));
  }
  return true;
}

}  // namespace waggle::proto::negentropy
