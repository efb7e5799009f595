#pragma once

// Where the tests find the checkout, the shared test vectors and the relay binary. They are
// variables of one generated file (test_paths.cpp in the build tree), not -D macros on every
// test: an absolute path in the compile flags made each clone's build miss ccache.

namespace waggle::test_paths {

extern const char* const source_dir;  // the checkout (migrations/, scripts/, tests/traces/)
extern const char* const testdata;    // the shared test vectors (bip340-vectors.csv)
extern const char* const binary;      // the `waggle` executable of this build

}  // namespace waggle::test_paths
