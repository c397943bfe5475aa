# Run after the integration test program is linked (cmake -P): lists its test cases with the
# source file of each, and writes one ctest entry per case, named "integration <file>: <case>"
# as when every file had a program of its own. One program links the runtime once instead of
# once per file (each link of LibTorch costs seconds). Inputs: TEST_EXECUTABLE, WORKING_DIR,
# CTEST_FILE, EXCLUSIVE_FILES (files whose cases hold the netns_jobs lock).
cmake_minimum_required(VERSION 3.16)
execute_process(
  COMMAND "${TEST_EXECUTABLE}" --list-test-cases --reporters=xml
  OUTPUT_VARIABLE listing
  RESULT_VARIABLE status
  WORKING_DIRECTORY "${WORKING_DIR}")
if(NOT status EQUAL 0)
  message(FATAL_ERROR "listing the cases of ${TEST_EXECUTABLE} failed (${status}):\n${listing}")
endif()

string(REGEX MATCHALL "<TestCase name=\"[^\"]*\" [^>]*filename=\"[^\"]*\"" cases "${listing}")
set(script "")
set(count 0)
foreach(entry IN LISTS cases)
  string(REGEX REPLACE "^<TestCase name=\"([^\"]*)\".*$" "\\1" name "${entry}")
  string(REGEX REPLACE "^.*filename=\"([^\"]*)\"$" "\\1" file "${entry}")
  foreach(pair "&lt;=<" "&gt;=>" "&quot;=\"" "&apos;='" "&amp;=&")
    string(REGEX REPLACE "^([^=]*)=(.*)$" "\\1" from "${pair}")
    string(REGEX REPLACE "^([^=]*)=(.*)$" "\\2" to "${pair}")
    string(REPLACE "${from}" "${to}" name "${name}")
  endforeach()
  get_filename_component(file "${file}" NAME)
  string(REGEX REPLACE "\\.test\\.cpp$" "" stem "${file}")
  # doctest splits a filter at commas.
  string(REPLACE "," "\\," filter "${name}")
  set(test "integration ${stem}: ${name}")
  set(lock "")
  if(stem IN_LIST EXCLUSIVE_FILES)
    set(lock "RESOURCE_LOCK netns_jobs")
  endif()
  string(APPEND script
    "add_test([==[${test}]==] \"${TEST_EXECUTABLE}\" [==[--test-case=${filter}]==])\n"
    "set_tests_properties([==[${test}]==] PROPERTIES WORKING_DIRECTORY \"${WORKING_DIR}\" "
    "TIMEOUT 300 LABELS integration SKIP_RETURN_CODE 77 "
    "FAIL_REGULAR_EXPRESSION [==[test cases: 0 [|]]==] "
    "ENVIRONMENT [==[UCX_NET_DEVICES=lo;UCX_TLS=tcp,sm,self]==] ${lock})\n")
  math(EXPR count "${count} + 1")
endforeach()
if(count EQUAL 0)
  message(FATAL_ERROR "${TEST_EXECUTABLE} lists no test cases:\n${listing}")
endif()
file(WRITE "${CTEST_FILE}" "${script}")
