#pragma once

// What every fuzz target shares: an oracle failure is a crash (libFuzzer
// saves the input), with a line that says which property broke.

#include <cstdio>
#include <cstdlib>

#define FUZZ_REQUIRE(cond)                                                        \
  do {                                                                            \
    if (!(cond)) {                                                                \
      std::fprintf(stderr, "fuzz property broken: %s (%s:%d)\n", #cond, __FILE__, \
                   __LINE__);                                                     \
      std::abort();                                                               \
    }                                                                             \
  } while (false)
