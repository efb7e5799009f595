#include "actors/connection/subscription_memory.hpp"

namespace waggle {

bool memory_budget::try_reserve(size_t bytes) {
  auto now = used_.load(std::memory_order_relaxed);
  do {
    if (limit_ != 0 && now + bytes > limit_)
      return false;
  } while (!used_.compare_exchange_weak(now, now + bytes, std::memory_order_relaxed));
  return true;
}

void memory_budget::release(size_t bytes) {
  used_.fetch_sub(bytes, std::memory_order_relaxed);
  released_.fetch_add(bytes, std::memory_order_relaxed);
}

namespace {

// Calibrated against the hub's representation (subscription_index): a
// string value costs its heap block (short strings live inline) plus its
// std::string, and a filter's indexed dimension adds one index entry per
// value (hash node, its bucket slot and its handle vector).
constexpr size_t per_filter = 256;
constexpr size_t per_string = 32;
constexpr size_t per_index_entry = 96;

size_t heap_of(const std::string& s) {
  // glibc: 16-byte granules, 8 bytes of header; short strings stay inline.
  return s.size() < 16 ? 0 : ((s.size() + 1 + 8 + 15) / 16) * 16;
}

size_t strings_bytes(const std::vector<std::string>& values) {
  size_t n = 0;
  for (auto& v : values)
    n += per_string + heap_of(v);
  return n;
}

}  // namespace

size_t subscription_bytes(const std::vector<proto::filter>& filters) {
  size_t n = 0;
  for (auto& f : filters) {
    n += per_filter;
    size_t indexed = 0;  // values of the dimension the hub files it under
    if (f.ids) {
      n += strings_bytes(*f.ids);
      indexed = f.ids->size();
    }
    for (auto& [letter, values] : f.tags) {
      n += 48 + strings_bytes(values);
      if (indexed == 0)
        indexed = values.size();
    }
    if (f.authors) {
      n += strings_bytes(*f.authors);
      if (indexed == 0)
        indexed = f.authors->size();
    }
    if (f.kinds) {
      n += 4 * f.kinds->size();
      if (indexed == 0)
        indexed = f.kinds->size();
    }
    if (f.search)
      n += per_string + heap_of(*f.search);
    n += per_index_entry * (indexed == 0 ? 1 : indexed);
  }
  return n;
}

bool id_from_hex(std::string_view hex, event_id_bin& out) {
  if (hex.size() != 64)
    return false;
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < 32; ++i) {
    int hi = nib(hex[2 * i]), lo = nib(hex[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return false;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

}  // namespace waggle
