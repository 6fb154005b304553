# ctest's fuzz.<target> (tests/fuzz/CMakeLists.txt): replays the committed
# corpus and runs a fixed number of mutations with a fixed seed. It works in
# a scratch copy, because libFuzzer adds the inputs it finds to the corpus
# folder it is given and the committed corpus must stay as it is. A crash,
# leak, UB report, timeout or memory blow-up fails the test; the input that
# did it is left in the scratch folder (crash-*, leak-*, timeout-*, oom-*).
foreach(_var FUZZER CORPUS SCRATCH RUNS)
  if(NOT DEFINED ${_var} OR "${${_var}}" STREQUAL "")
    message(FATAL_ERROR "run_fuzzer.cmake: ${_var} is not set")
  endif()
endforeach()
file(REMOVE_RECURSE ${SCRATCH})
file(MAKE_DIRECTORY ${SCRATCH}/corpus ${SCRATCH}/artifacts)
file(GLOB _seeds ${CORPUS}/*)
if(_seeds)
  file(COPY ${_seeds} DESTINATION ${SCRATCH}/corpus)
endif()
set(_args -seed=1 -runs=${RUNS} -timeout=10 -rss_limit_mb=2048 -max_total_time=100
          -print_final_stats=1 -artifact_prefix=${SCRATCH}/artifacts/)
if(DICT)
  list(APPEND _args -dict=${DICT})
endif()
# Third-party leaks that oasr cannot fix are suppressed by name (lsan.supp).
set(ENV{LSAN_OPTIONS} "suppressions=${CMAKE_CURRENT_LIST_DIR}/lsan.supp:print_suppressions=0")
execute_process(COMMAND ${FUZZER} ${_args} ${SCRATCH}/corpus RESULT_VARIABLE _status)
if(NOT _status EQUAL 0)
  message(FATAL_ERROR "${FUZZER} failed (${_status}); the input is in ${SCRATCH}/artifacts")
endif()
