#include "db/conninfo.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include <libpq-fe.h>

namespace waggle::db {

namespace {

// key='value' with the quoting libpq's conninfo parser undoes.
void append_setting(std::string& out, const std::string& key, const std::string& value) {
  if (!out.empty())
    out += ' ';
  out += key;
  out += "='";
  for (char c : value) {
    if (c == '\'' || c == '\\')
      out += '\\';
    out += c;
  }
  out += '\'';
}

}  // namespace

std::string guarded_conninfo(const std::string& url, const std::string& name,
                             std::chrono::milliseconds tcp_user_timeout) {
  const std::pair<std::string, std::string> ours[] = {
    {"connect_timeout", "2"},
    {"keepalives", "1"},
    {"keepalives_idle", "5"},
    {"keepalives_interval", "2"},
    {"keepalives_count", "3"},
    {"tcp_user_timeout", std::to_string(std::max<int64_t>(tcp_user_timeout.count(), 0))},
    {"application_name", "waggle-" + name},
  };
  char* error = nullptr;
  // libpq's own parser takes both forms (URL and key=value) exactly as
  // PQconnectdb would; what it returns is re-emitted as key=value.
  PQconninfoOption* options = PQconninfoParse(url.c_str(), &error);
  if (!options) {
    if (error)
      PQfreemem(error);
    throw std::invalid_argument("the connection string does not parse");
  }
  std::string out;
  for (auto* o = options; o->keyword; ++o) {
    if (!o->val)
      continue;
    bool replaced = std::any_of(std::begin(ours), std::end(ours),
                                [&](const auto& kv) { return kv.first == o->keyword; });
    if (!replaced)
      append_setting(out, o->keyword, o->val);
  }
  PQconninfoFree(options);
  for (const auto& [key, value] : ours)
    append_setting(out, key, value);
  return out;
}

}  // namespace waggle::db
