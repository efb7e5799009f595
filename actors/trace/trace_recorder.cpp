#include "actors/trace/trace_recorder.hpp"

#include <charconv>
#include <chrono>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdexcept>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace waggle {

namespace {

void append_json_string(std::string& out, std::string_view s) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w{buf};
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  out.append(buf.GetString(), buf.GetSize());
}

// "conn-17" -> 17; anything else -> 0.
uint64_t connection_number(const std::string& name) {
  constexpr std::string_view prefix = "conn-";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0)
    return 0;
  uint64_t n = 0;
  auto [ptr, ec] = std::from_chars(name.data() + prefix.size(), name.data() + name.size(), n);
  return ec == std::errc{} && ptr == name.data() + name.size() ? n : 0;
}

}  // namespace

// -- trace_fields -------------------------------------------------------------

void trace_fields::key(std::string_view k) {
  out_ += ',';
  append_json_string(out_, k);
  out_ += ':';
}

trace_fields& trace_fields::str(std::string_view k, std::string_view value) {
  key(k);
  append_json_string(out_, value);
  return *this;
}

trace_fields& trace_fields::num(std::string_view k, int64_t value) {
  key(k);
  out_ += std::to_string(value);
  return *this;
}

trace_fields& trace_fields::raw(std::string_view k, std::string_view json) {
  key(k);
  out_ += json;
  return *this;
}

// -- trace_recorder -----------------------------------------------------------

trace_recorder::trace_recorder(const std::string& path, uint64_t sample) : sample_(sample) {
  // 0600: a full trace holds what the node's users wrote, private channels included.
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd >= 0)
    ::fchmod(fd, 0600);  // an existing file keeps its mode otherwise
  file_ = fd >= 0 ? ::fdopen(fd, "w") : nullptr;
  if (!file_) {
    if (fd >= 0)
      ::close(fd);
    throw std::runtime_error("cannot open trace file " + path);
  }
  // Big buffer: lines are written under one mutex, never flushed one by one.
  std::setvbuf(file_, nullptr, _IOFBF, 1 << 20);
}

trace_recorder::~trace_recorder() {
  if (file_)
    std::fclose(file_);
}

void trace_recorder::start(const std::string& node_json) {
  std::lock_guard guard{mtx_};
  std::string line = "{\"seq\":0,\"kind\":\"header\",\"waggle_trace\":"
                     + std::to_string(trace_format_version) + ",\"mode\":"
                     + (sample_ == 0 ? std::string{"\"full\""}
                                     : "\"sampled\",\"sample\":" + std::to_string(sample_))
                     + ",\"node\":" + node_json + "}\n";
  std::fputs(line.c_str(), file_);
  active_ = true;
}

void trace_recorder::flush() {
  std::lock_guard guard{mtx_};
  std::fflush(file_);
}

bool trace_recorder::wants_connection(const std::string& conn) const {
  if (!active_)
    return false;
  if (sample_ == 0)
    return true;
  auto n = connection_number(conn);
  return n != 0 && n % sample_ == 0;
}

bool trace_recorder::wants(const std::string& actor) const {
  return node_level() || wants_connection(actor);
}

void trace_recorder::record(const std::string& actor, std::string_view kind,
                            const trace_fields& fields) {
  if (!active_)
    return;
  std::string tail = ",\"actor\":";
  append_json_string(tail, actor);
  tail += ",\"kind\":";
  append_json_string(tail, kind);
  tail += fields.text();
  tail += "}\n";
  std::lock_guard guard{mtx_};
  auto seq = std::to_string(++seq_);
  std::fputs("{\"seq\":", file_);
  std::fputs(seq.c_str(), file_);
  std::fwrite(tail.data(), 1, tail.size(), file_);
  // Flushed when a record comes 200 ms or more after the last flush (and at
  // stop): a crash under load loses about the last 200 ms and tears at most
  // the last line (a replay leaves it out), without a write per record.
  auto now = std::chrono::steady_clock::now();
  if (now - last_flush_ > std::chrono::milliseconds(200)) {
    std::fflush(file_);
    last_flush_ = now;
  }
}

int64_t trace_recorder::unix_now(const std::string& actor,
                                 const std::function<int64_t()>& source) {
  auto v = source();
  if (wants(actor))
    record(actor, "reading", trace_fields{}.str("what", "unix_now").num("value", v));
  return v;
}

std::string trace_recorder::random_challenge(const std::string& actor,
                                             const std::function<std::string()>& source) {
  auto v = source();
  if (wants(actor))
    record(actor, "reading", trace_fields{}.str("what", "random").str("value", v));
  return v;
}

steady_time trace_recorder::steady_now(const std::string& actor,
                                       const std::function<steady_time()>& source) {
  auto v = source();
  if (wants(actor))
    record(actor, "reading",
           trace_fields{}.str("what", "steady_ns").num(
             "value", std::chrono::duration_cast<std::chrono::nanoseconds>(v.time_since_epoch())
                        .count()));
  return v;
}

bool trace_recorder::hold() {
  if (!active_)
    return false;
  mtx_.lock();
  return true;
}

void trace_recorder::release() { mtx_.unlock(); }

void trace_recorder::spawned(const std::string& actor, const caf::actor& handle) {
  std::lock_guard guard{names_mtx_};
  names_[handle.address()] = actor;
}

std::string trace_recorder::name_of(const caf::actor_addr& who) const {
  std::lock_guard guard{names_mtx_};
  auto i = names_.find(who);
  return i != names_.end() ? i->second : std::string{};
}

// -- traced_sink --------------------------------------------------------------

traced_sink::traced_sink(socket_sink_ptr inner, trace_port_ptr trace, std::string conn)
  : inner_(std::move(inner)), trace_(std::move(trace)), conn_(std::move(conn)) {}

void traced_sink::send_text(std::string frame) {
  trace_->record(conn_, "frame_out", trace_fields{}.str("text", frame));
  inner_->send_text(std::move(frame));
}

void traced_sink::close(uint16_t code, std::string reason) {
  trace_->record(conn_, "close_out", trace_fields{}.num("code", code).str("reason", reason));
  inner_->close(code, std::move(reason));
}

void traced_sink::notify_drained(std::function<void(room)> done, std::size_t at_most_bytes) {
  // The connection records the drain it is then sent as its input.
  inner_->notify_drained(std::move(done), at_most_bytes);
}

}  // namespace waggle
