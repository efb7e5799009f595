// libFuzzer target: the trace decoder. `waggle replay` reads a file an
// operator hands it: read_trace splits it into records, and each record's
// "msg" is decoded by trace_codec into the message type its "type" names
// (every type of the node's type-ID block). Properties: a decoded message
// encodes to JSON that decodes again and encodes to the same text.

#include <sstream>
#include <string>
#include <utility>

#include "messages/trace_codec.hpp"
#include "messages/trace_record.hpp"
#include "messages/type_ids.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace waggle;

namespace {

template <class T>
void round_trip(const rapidjson::Value& v) {
  T msg{};
  if (!trace_codec::decode(v, msg))
    return;
  auto once = trace_codec::encode(msg);
  rapidjson::Document again;
  again.Parse<rapidjson::kParseIterativeFlag>(once.data(), once.size());
  FUZZ_REQUIRE(!again.HasParseError());
  T back{};
  bool decoded = trace_codec::decode(again, back);
  if (!decoded || trace_codec::encode(back) != once)
    std::fprintf(stderr, "%s: %s\n", trace_codec::name_of<T>(), once.c_str());
  FUZZ_REQUIRE(decoded);
  FUZZ_REQUIRE(trace_codec::encode(back) == once);
}

constexpr caf::type_id_t first = caf::id_block::waggle::begin;
constexpr caf::type_id_t count = caf::id_block::waggle::end - caf::id_block::waggle::begin;

// Decodes into the type named `type`; a name of no type picks one by `seq`,
// so that every type is reached from any record.
template <size_t... Is>
void decode_as(const std::string& type, uint64_t seq, const rapidjson::Value& v,
               std::index_sequence<Is...>) {
  bool named = false;
  ((type == trace_codec::name_of<typename caf::type_by_id<first + Is>::type>()
      ? (named = true, round_trip<typename caf::type_by_id<first + Is>::type>(v))
      : void()),
   ...);
  if (named)
    return;
  auto pick = seq % count;
  ((pick == Is ? round_trip<typename caf::type_by_id<first + Is>::type>(v) : void()), ...);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in{std::string{reinterpret_cast<const char*>(data), size}};
  auto file = read_trace(in);
  if (!file.error.empty())
    return 0;
  FUZZ_REQUIRE(file.header.IsObject());
  for (const auto& r : file.records) {
    if (r.msg.empty())
      continue;
    rapidjson::Document doc;
    doc.Parse<rapidjson::kParseIterativeFlag>(r.msg.data(), r.msg.size());
    FUZZ_REQUIRE(!doc.HasParseError());
    decode_as(r.type, r.seq, doc, std::make_index_sequence<count>{});
  }
  return 0;
}
