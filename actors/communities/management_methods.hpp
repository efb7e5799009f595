#pragma once

// The NIP-86 methods (docs/management.md): strict param checks, then the
// store functions of db/management_store.hpp and db/membership_store.hpp,
// all inside the management actor's transaction. A refused call changes
// nothing.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <pqxx/transaction>
#include <rapidjson/document.h>

namespace waggle {

struct management_caller {
  int64_t community_id = 0;
  std::string pubkey;  // hex, the key NIP-98 proved
  bool owner_rights = false;  // an owner of the community or an operator key
};

struct method_outcome {
  bool ok = false;
  std::string error;        // "invalid: ..." or "restricted: ..." when not ok
  std::string result_json;  // when ok
  std::string revoked;      // a key that lost access (banned or no longer a member)
};

const std::vector<std::string_view>& management_methods();

method_outcome run_management_method(pqxx::transaction_base& tx, const management_caller& who,
                                     std::string_view method, const rapidjson::Value& params);

}  // namespace waggle
