#pragma once

// When the node hands freed heap back to the system (malloc_trim). glibc
// keeps what a thread freed in that thread's arena until something reuses
// it, so the memory of closed connections (their outbound queues, parsed
// frames, subscriptions) stayed resident after an attack had ended: 100
// clients that never read left RSS at 40 MB instead of 21 MB, 10
// connections of large REQs at 29 MB (docs/reliability.md). A plain class,
// looked at once a second by node::trim_loop; tested on its own.

#include <cstddef>
#include <cstdint>

namespace waggle {

class trim_policy {
 public:
  explicit trim_policy(std::size_t threshold = 4u << 20) : threshold_(threshold) {}

  // Looks that trim once a trim is due. Memory goes on being freed for
  // seconds after its cause ends (a closing session keeps its queue for up
  // to its 5 s close grace; the hub frees a subscription's index after the
  // connection released its bytes), each part below the threshold.
  static constexpr int looks_per_trim = 6;
  // And every this many looks while the allocator holds at least the
  // threshold free: what is freed slowly, below the threshold each time,
  // goes back too. A trim takes about a millisecond (measured on a 50 MB
  // heap), so one every ten seconds costs nothing.
  static constexpr int looks_per_idle_trim = 10;

  // One look: `released` bytes of subscription state given back since the
  // last look (memory_budget::take_released), and `free_held` bytes the
  // allocator holds free now (mallinfo2().fordblks). True: trim now.
  bool should_trim(std::size_t released, std::size_t free_held);
  // After a trim: what the allocator held free then (trimmed pages stay in
  // its free lists, so this is the new low point, not zero).
  void trimmed(std::size_t free_held_after);

 private:
  std::size_t threshold_;
  // The least the allocator held free since the last trim: memory in use
  // at its peak. Freed again by at least the threshold since, it is worth
  // a trim, whatever freed it.
  std::size_t low_ = SIZE_MAX;
  int pending_ = 0;  // looks that still trim
  int since_trim_ = 0;  // looks since the last trim
};

}  // namespace waggle
