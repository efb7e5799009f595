#pragma once

// The connection actor's only way out to its socket, declared by the gateway
// (the connection seam): its ws_session
// implements it by posting onto its strand (so it is safe to call from any
// thread); tests implement it by recording frames. Keeping the socket behind
// this edge is what lets the connection actor run under test_coordinator.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace waggle {

// One outbound text frame: either a whole string (`text`), or a short
// per-frame prefix (`text`) + bytes shared by many frames (`shared`, e.g. a
// committed event's JSON, held by the event itself) + a static suffix
// (`tail`). A live event going to 1,000 subscriptions is rendered once and
// copied by none of them: each frame is a prefix of ~20 bytes and a
// reference count. The socket writes the parts as ONE WebSocket message.
struct out_frame {
  std::string text;
  std::shared_ptr<const std::string> shared;  // null: `text` is the whole frame
  std::string_view tail;  // static storage only (it outlives every frame)

  out_frame() = default;
  out_frame(std::string whole) : text(std::move(whole)) {}  // NOLINT: plain frames convert
  out_frame(std::string prefix, std::shared_ptr<const std::string> body, std::string_view suffix)
    : text(std::move(prefix)), shared(std::move(body)), tail(suffix) {}

  std::size_t size() const { return text.size() + (shared ? shared->size() : 0) + tail.size(); }
  // The frame as one string (tests, sinks without a socket).
  std::string flatten() const {
    if (!shared)
      return text;
    std::string out;
    out.reserve(size());
    out.append(text).append(*shared).append(tail);
    return out;
  }
};

class socket_sink {
 public:
  virtual ~socket_sink() = default;
  // Queues one text frame. If the session's outbound queue is over its cap
  // the session drops the client (after a NOTICE); the call never blocks.
  virtual void send_text(std::string frame) = 0;
  // The same for a frame that may share its bytes with other frames; sinks
  // that write no socket (tests, replays) see it flattened, so they record
  // exactly the text the client would receive.
  virtual void send_frame(out_frame frame) {
    if (!frame.shared)
      return send_text(std::move(frame.text));
    send_text(frame.flatten());
  }
  // Closes the socket with a WebSocket close code (1000, 1001, 1008, 1009...).
  virtual void close(uint16_t code, std::string reason) = 0;
  // How much may be queued now without nearing the session's outbound cap.
  struct room {
    std::size_t frames = 0;
    std::size_t bytes = 0;
  };
  // Calls `done` once (from any thread), as soon as the outbound queue is at
  // or below its low-water mark and holds at most `at_most_bytes`, with the
  // room left under the cap. This is what lets a large history be sent as
  // the socket drains instead of overflowing the queue, and its next page be
  // read only once the socket has sent nearly all of the last. Never called
  // if the socket closes first. Sinks without a queue (tests, replays) have
  // room at once.
  virtual void notify_drained(std::function<void(room)> done, std::size_t at_most_bytes) {
    (void) at_most_bytes;
    done(room{256, 1u << 20});
  }
  // The connection's first NIP-42 AUTH succeeded: the session stops its AUTH
  // deadline and stops counting the socket as unauthenticated. A default, so
  // sinks that have no deadline (tests, replay) need not care.
  virtual void authenticated() {}
  // Stop reading the client's frames for `how_long` (a client flooding
  // refused frames, docs/protocol.md "Refusal pacing"); a later call may
  // extend the pause, never shorten it. Frames already read still arrive;
  // writes go on. Sinks that do not read (tests, replay) ignore it.
  virtual void pause_reading(std::chrono::milliseconds how_long) { (void) how_long; }
  // The connection actor has handled one socket_frame (called once per frame,
  // from its handler). The session forwards at most a few frames the actor
  // has not handled yet and stops reading the socket until it has
  // (docs/protocol.md "Refusal pacing", frame credit): without this, a burst
  // of frames piled up in the actor's mailbox however slowly it ran. Sinks
  // that do not read (tests, replay) ignore it.
  virtual void frame_handled() {}
};

using socket_sink_ptr = std::shared_ptr<socket_sink>;

}  // namespace waggle
