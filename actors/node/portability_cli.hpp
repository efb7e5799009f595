#pragma once

// `waggle export` and `waggle import` (docs/portability.md): a community's
// events as JSON lines, one stored event per line (strfry's format).
//
//   waggle export [--community HOST] [--since TS] [--until TS] [--database-url URL]
//     events on stdout, oldest first; progress and a summary on stderr.
//     Exit 0 done, 1 failed, 2 usage.
//   waggle import FILE|- --community HOST [--batch N] [--database-url URL] [serve options]
//     through the relay's own write path; `line N: <reason>` on stderr for
//     each refused line, a summary on stdout. Exit 0 every line stored or a
//     duplicate, 3 some lines refused (the others loaded), 1 a fatal error
//     (nothing after the line it names was loaded; running the import again
//     is safe: what was stored is skipped as duplicate), 2 usage.

#include <string>
#include <vector>

namespace waggle {

int run_export(std::vector<std::string> args);
int run_import(std::vector<std::string> args);

}  // namespace waggle
