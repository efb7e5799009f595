#pragma once

// Refusal pacing (docs/protocol.md, "Refusal pacing"): every frame a
// connection gets refused for (invalid, rate-limited, auth-required, ...)
// still costs the node a parse, a rendering and a write. A client that keeps
// sending them after its refusals is flooding, so past a burst its refusals
// go into debt and the socket stops reading until the debt is paid: the
// kernel's receive window then holds the flood back, for free, instead of
// the node answering it frame by frame. Well-behaved clients, which are
// refused now and then, never reach the burst.
// A plain class with the clock passed in, so the arithmetic has unit tests.

#include <chrono>
#include <cstddef>
#include <string_view>

#include "actors/support/token_bucket.hpp"

namespace waggle {

struct refusal_pacing {
  double per_second = 20;  // refusals forgiven per second; 0 = no pacing
  double burst = 100;      // refusals before pacing starts
  // The longest single pause, and so the most debt a flood can run up: the
  // session pauses reading, it does not close, so a client that stops
  // flooding is back to normal within this time.
  std::chrono::milliseconds max_pause{10000};
  bool off() const { return per_second <= 0 || burst <= 0; }
};

// What one answer to a client's frame counts against the pace, decided by its
// machine-readable prefix alone, so every answer path (at once, or a verdict
// coming back from ingest, the write policy, the membership actor or a
// reader) is paced alike (docs/protocol.md, "Refusal pacing"):
//   invalid:, restricted:, blocked:, rate-limited:, pow:, mute:   1
//   auth-required:                       0.1, or frame bytes / 16 KiB if more
//   error: query took too long (the client's query shape)          1
//   duplicate: (accepted or not)                                   0.5
//   other error: (node-side), "" (accepted)                        0
// auth-required: counts a tenth: a client that opens its subscriptions and
// then authenticates (normal) spends 6.4 of the burst for 64 REQs, while an
// unauthenticated flood is still paced, at ten times the frames; a large
// frame counts by its size, since it was parsed whole before the AUTH
// check (60 KB REQs at a tenth cost the node 12 MB/s of parsing per socket).
// duplicate: counts half: each resend of a stored event costs a Schnorr
// verify and a database round trip, so one connection resending one event
// ran 14,500 verifies a second unpaced; a client resending after a lost OK
// resends what it had in flight, and 200 such resends are still free.
// `frame_bytes`: the size of the client frame being answered (0: unknown).
double refusal_weight(std::string_view message, std::size_t frame_bytes = 0);

class refusal_pacer {
 public:
  // Counts one refusal (or `weight` of one) at `now`. Returns how long the
  // socket should stop reading, from now; zero when it need not, or when the
  // pause already asked for covers the debt (within a tenth of a second, so
  // a flood asks the session a few times per pause, not once per frame).
  std::chrono::milliseconds on_refusal(bucket_clock::time_point now, const refusal_pacing& p,
                                       double weight = 1);
  // Refusals that may still be made now before pacing starts (negative: debt).
  double credit(bucket_clock::time_point now, const refusal_pacing& p) const;

 private:
  bool used_ = false;
  double credit_ = 0;
  bucket_clock::time_point last_{};
  bucket_clock::time_point paused_until_{};
};

}  // namespace waggle
