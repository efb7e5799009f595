#pragma once

// NIP-77: range-based set reconciliation, protocol version 1 of the
// negentropy reference (docs/negentropy.md). Items are (created_at, id)
// pairs ordered by created_at then id; a message is the version byte 0x61
// and ranges, each an upper bound, a mode (skip, fingerprint, id list) and
// its payload. Both roles are here: the relay answers (`respond`), `waggle
// sync` initiates (`initiate`, `reconcile`). Pure code, no I/O: every
// malformed input is an error value, never an exception or a crash.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace waggle::proto::negentropy {

constexpr uint8_t protocol_version = 0x61;
constexpr size_t id_size = 32;
constexpr size_t fingerprint_size = 16;
// The reference refuses a frame limit below this; a smaller one could not
// carry a fingerprint split (16 ranges) with room for its bounds.
constexpr size_t min_frame_size_limit = 4096;

struct item {
  uint64_t created_at = 0;
  std::array<uint8_t, id_size> id{};
};

// A sealed, sorted set of items with running sums of the ids, so the
// fingerprint of any range costs one subtraction and one SHA-256 instead of
// a pass over the range (the reference sums the range each time).
class storage {
 public:
  // `id_bytes` is the 32-byte binary id; returns false for another length.
  bool insert(uint64_t created_at, std::string_view id_bytes);
  void reserve(size_t n) { items_.reserve(n); }
  // Sorts and drops exact duplicates; items are fixed after this.
  void seal();
  size_t size() const { return items_.size(); }
  const item& at(size_t i) const { return items_[i]; }
  // 40 bytes per item plus 32 of sums: what a session holds, for its budget.
  size_t memory_bytes() const;

  std::array<uint8_t, fingerprint_size> fingerprint(size_t begin, size_t end) const;

 private:
  std::vector<item> items_;
  std::vector<std::array<uint8_t, id_size>> sums_;  // sums_[i] = ids[0..i) mod 2^256
};

// An upper bound: items strictly below it are in the range.
struct bound {
  uint64_t created_at = 0;
  std::string id_prefix;  // at most 32 bytes
  static bound infinity() { return {UINT64_MAX, {}}; }
};

// One side of a reconciliation. `frame_size_limit` caps every message this
// side produces (binary bytes, before hex); 0 = no cap.
class reconciler {
 public:
  reconciler(const storage& s, size_t frame_size_limit);

  // Initiator: the first message.
  std::string initiate();

  struct result {
    std::string error;  // non-empty: the peer's message is malformed
    std::string message;  // the answer; an initiator is done when it is empty
    std::vector<std::string> have;  // initiator: ids (binary) only we hold
    std::vector<std::string> need;  // initiator: ids (binary) only the peer holds
  };
  // Relay: the answer to the initiator's message. A message of another
  // protocol version is answered with ours alone (the reference's
  // negotiation); a malformed one is an error.
  result respond(std::string_view query);
  // Initiator: the next message, with what the answer showed. Each id is
  // reported once, however often the peer's answers cover it; a peer that
  // will not let the reconciliation end (more rounds than the two sets could
  // need at this frame size) is an error.
  result reconcile(std::string_view answer);

 private:
  result run(std::string_view in, bool initiator);
  void split_range(size_t lower, size_t upper, const bound& upper_bound, std::string& out);
  void encode_bound(const bound& b, std::string& out);
  bool frame_full(size_t n) const;

  const storage& storage_;
  size_t frame_size_limit_;
  uint64_t last_out_ = 0;
  uint64_t last_in_ = 0;
  size_t rounds_ = 0;
  size_t last_news_ = 0;  // the last round that reported an id not reported before
  std::unordered_set<std::string> reported_;  // initiator: ids already in have/need
};

// The set as it crosses a mailbox: 40 bytes per item, created_at big-endian
// then the binary id (one string, not 500,000 small ones).
constexpr size_t packed_item_bytes = 8 + id_size;
// Appends one item; false when `id_hex` is not 64 hex characters.
bool append_packed(std::string& packed, uint64_t created_at, std::string_view id_hex);
// Inserts every packed item (the storage is not sealed); false when the
// length is not a whole number of items.
bool load_packed(std::string_view packed, storage& into);

// Lowercase hex of binary bytes, and back (false on odd length or a
// character that is not hex).
std::string to_hex(std::string_view bytes);
bool from_hex(std::string_view hex, std::string& out);

}  // namespace waggle::proto::negentropy
