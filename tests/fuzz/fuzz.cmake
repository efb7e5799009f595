# The libFuzzer targets (docs/testing.md, "Fuzzing"), built only with -DWAGGLE_FUZZ=ON.
# Each is one file of tests/fuzz/ with its seed corpus in tests/fuzz/corpus/<name>/;
# ./scripts/fuzz runs them.
set(WAGGLE_FUZZ_TARGETS client_message event filter nip98 trace bus negentropy)
foreach(name ${WAGGLE_FUZZ_TARGETS})
  add_executable(fuzz_${name} tests/fuzz/${name}_fuzz.cpp)
  target_include_directories(fuzz_${name} PRIVATE ${CMAKE_SOURCE_DIR})
  target_link_libraries(fuzz_${name} PRIVATE waggle_messages)
  target_link_options(fuzz_${name} PRIVATE -fsanitize=fuzzer)
endforeach()
