#pragma once

// How bus subjects and queue groups become NATS subjects and queue names
// (docs/bus.md, "NATS"). Bus subjects are exact strings of visible ASCII;
// in NATS, `.` separates tokens, a `*` or `>` token is a wildcard, and
// subjects under `$` belong to the server (`$SYS`, `$JS`). So a bus subject
// keeps its dots as token separators (it reads the same in `nats sub`), and
// every byte that NATS would read as something else is written `%XX`:
// `%`, `*`, `>` anywhere, a leading `$`; an empty token is `%` alone. The
// image is always a literal NATS subject, and two bus subjects never share
// one. A queue name is one opaque token: a group's dots are escaped too.

#include <optional>
#include <string>
#include <string_view>

namespace waggle {

std::string nats_subject(std::string_view bus_subject);
std::string nats_queue(std::string_view group);
// The bus subject whose image `subject` is; nullopt when it is no image of
// a valid bus subject (a foreign publisher's, or not canonical).
std::optional<std::string> bus_subject_of(std::string_view subject);

}  // namespace waggle
