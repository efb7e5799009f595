#pragma once

// Messages as JSON for traces (docs/traces.md). Two CAF inspectors walk the
// same `inspect` functions the cluster serialiser uses, so a message type
// needs nothing new to be traced: a struct becomes a JSON array of its
// fields in declaration order, a vector an array, an event or a filter its
// canonical JSON text, an enum its number. Field names are not in CAF 0.17's
// inspect protocol; the record's "type" names the message and the struct
// in its domain header (messages/ingest.hpp, ...) documents the order.

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_control_block.hpp>
#include <caf/error.hpp>
#include <caf/is_typed_actor.hpp>
#include <caf/meta/annotation.hpp>
#include <caf/meta/type_name.hpp>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "messages/proto/event.hpp"
#include "messages/value_inspect.hpp"

namespace waggle::trace_codec {

template <class T>
struct is_vector : std::false_type {};
template <class T, class A>
struct is_vector<std::vector<T, A>> : std::true_type {};

// An actor handle in a message (a bus_subscribe's subscriber) is who, not
// what: it is written as null and read back as no actor. A replay knows its
// actors by name, never by a live node's addresses.
template <class T>
constexpr bool is_handle() {
  return caf::is_typed_actor<T>::value || std::is_same_v<T, caf::actor>
         || std::is_same_v<T, caf::strong_actor_ptr>;
}

template <class... Ts>
constexpr bool has_type_name() {
  return (std::is_same_v<std::decay_t<Ts>, caf::meta::type_name_t> || ...);
}

template <class... Ts>
constexpr size_t field_count() {
  return ((caf::meta::is_annotation<std::decay_t<Ts>>::value ? 0 : 1) + ... + 0);
}

// A named struct, or a call with several fields, is an array; a call with a
// single unnamed field (an event, a filter) is that field's value itself.
template <class... Ts>
constexpr bool as_array() {
  return has_type_name<Ts...>() || field_count<Ts...>() != 1;
}

class json_out {
 public:
  static constexpr bool reads_state = true;
  static constexpr bool writes_state = false;
  using result_type = caf::error;

  explicit json_out(rapidjson::Writer<rapidjson::StringBuffer>& w) : w_(w) {}

  template <class... Ts>
  caf::error operator()(Ts&&... xs) {
    constexpr bool wrap = as_array<Ts...>();
    if (wrap)
      w_.StartArray();
    (value(xs), ...);
    if (wrap)
      w_.EndArray();
    return {};
  }

 private:
  template <class T>
  void value(T& x) {
    using U = std::decay_t<T>;
    if constexpr (caf::meta::is_annotation<U>::value) {
      // type names and other annotations carry no data
    } else if constexpr (is_handle<U>()) {
      w_.Null();
    } else if constexpr (std::is_same_v<U, std::string>) {
      w_.String(x.data(), static_cast<rapidjson::SizeType>(x.size()));
    } else if constexpr (std::is_same_v<U, bool>) {
      w_.Bool(x);
    } else if constexpr (std::is_enum_v<U>) {
      w_.Int64(static_cast<int64_t>(x));
    } else if constexpr (std::is_floating_point_v<U>) {
      w_.Double(static_cast<double>(x));
    } else if constexpr (std::is_integral_v<U> && std::is_signed_v<U>) {
      w_.Int64(static_cast<int64_t>(x));
    } else if constexpr (std::is_integral_v<U>) {
      w_.Uint64(static_cast<uint64_t>(x));
    } else if constexpr (is_vector<U>::value) {
      w_.StartArray();
      for (auto& e : x)
        value(e);
      w_.EndArray();
    } else {
      inspect(*this, x);
    }
  }

  rapidjson::Writer<rapidjson::StringBuffer>& w_;
};

class json_in {
 public:
  static constexpr bool reads_state = false;
  static constexpr bool writes_state = true;
  using result_type = caf::error;

  explicit json_in(const rapidjson::Value& v) : cur_(&v) {}
  bool ok() const { return ok_; }

  template <class... Ts>
  caf::error operator()(Ts&&... xs) {
    if (!ok_)
      return {};
    if constexpr (as_array<Ts...>()) {
      const auto& arr = *cur_;
      // Fewer elements than fields: a trace recorded before the message
      // grew fields at its end; those keep their defaults.
      if (!arr.IsArray() || arr.Size() > field_count<Ts...>()) {
        ok_ = false;
        return {};
      }
      rapidjson::SizeType i = 0;
      (field(arr, i, xs), ...);
    } else {
      (field_inline(xs), ...);
    }
    return {};
  }

 private:
  template <class T>
  void field(const rapidjson::Value& arr, rapidjson::SizeType& i, T& x) {
    if constexpr (!caf::meta::is_annotation<std::decay_t<T>>::value) {
      if (i < arr.Size())
        read(arr[i++], x);
      else if constexpr (std::is_same_v<std::decay_t<T>, std::shared_ptr<const proto::event>>)
        fail();  // its default is null, which no actor takes (found by tests/fuzz/trace_fuzz.cpp)
    }
  }

  template <class T>
  void field_inline(T& x) {
    if constexpr (!caf::meta::is_annotation<std::decay_t<T>>::value)
      read(*cur_, x);
  }

  template <class T>
  void read(const rapidjson::Value& v, T& x) {
    using U = std::decay_t<T>;
    if (!ok_)
      return;
    if constexpr (is_handle<U>()) {
      if (!v.IsNull())
        return fail();
      x = U{};
    } else if constexpr (std::is_same_v<U, std::string>) {
      if (!v.IsString())
        return fail();
      x.assign(v.GetString(), v.GetStringLength());
    } else if constexpr (std::is_same_v<U, bool>) {
      if (!v.IsBool())
        return fail();
      x = v.GetBool();
    } else if constexpr (std::is_enum_v<U>) {
      if (!v.IsInt64())
        return fail();
      x = static_cast<U>(v.GetInt64());
    } else if constexpr (std::is_floating_point_v<U>) {
      if (!v.IsNumber())
        return fail();
      x = static_cast<U>(v.GetDouble());
    } else if constexpr (std::is_integral_v<U> && std::is_signed_v<U>) {
      // In range, not wrapped: a kind of 2^32 + 1 is not kind 1.
      if (!v.IsInt64() || v.GetInt64() < std::numeric_limits<U>::min()
          || v.GetInt64() > std::numeric_limits<U>::max())
        return fail();
      x = static_cast<U>(v.GetInt64());
    } else if constexpr (std::is_integral_v<U>) {
      if (!v.IsUint64() || v.GetUint64() > std::numeric_limits<U>::max())
        return fail();
      x = static_cast<U>(v.GetUint64());
    } else if constexpr (std::is_same_v<U, std::shared_ptr<const proto::event>>) {
      // An event must be one: the shared inspect would quietly make it null,
      // and a null event reaching the hub is a crash, not a divergence.
      if (!v.IsString())
        return fail();
      auto parsed = proto::parse_event(std::string_view{v.GetString(), v.GetStringLength()});
      if (!parsed)
        return fail();
      x = std::make_shared<const proto::event>(std::move(*parsed));
    } else if constexpr (is_vector<U>::value) {
      if (!v.IsArray())
        return fail();
      x.clear();
      x.resize(v.Size());
      for (rapidjson::SizeType k = 0; k < v.Size() && ok_; ++k)
        read(v[k], x[k]);
    } else {
      auto* saved = cur_;
      cur_ = &v;
      inspect(*this, x);
      cur_ = saved;
    }
  }

  void fail() { ok_ = false; }

  const rapidjson::Value* cur_;
  bool ok_ = true;
};

// The name a message's inspect gives it ("write_batch_request").
class name_probe {
 public:
  static constexpr bool reads_state = true;
  static constexpr bool writes_state = false;
  using result_type = caf::error;
  const char* name = nullptr;

  template <class... Ts>
  caf::error operator()(Ts&&... xs) {
    (grab(xs), ...);
    return {};
  }

 private:
  template <class T>
  void grab(T& x) {
    if constexpr (std::is_same_v<std::decay_t<T>, caf::meta::type_name_t>)
      if (!name)
        name = x.value;
  }
};

template <class T>
const char* name_of() {
  static const char* const name = [] {
    T x{};
    name_probe probe;
    inspect(probe, x);
    return probe.name ? probe.name : "?";
  }();
  return name;
}

// The message as compact JSON text. Inspecting only reads (the inspectors
// above never write through a reads_state inspector), hence the const_cast.
template <class T>
std::string encode(const T& msg) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w{buf};
  json_out out{w};
  inspect(out, const_cast<T&>(msg));
  return {buf.GetString(), buf.GetSize()};
}

// False when `v` does not have the shape of a T.
template <class T>
bool decode(const rapidjson::Value& v, T& msg) {
  json_in in{v};
  inspect(in, msg);
  return in.ok();
}

}  // namespace waggle::trace_codec
