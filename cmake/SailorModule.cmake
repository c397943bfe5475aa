# sailor_module(NAME DEPS ...): one library per top-level folder.
#   NAME/include/sailor/NAME/  public headers
#   NAME/src/**/*.cpp          private sources (globbed so that parallel work needs no CMake edits)
#   NAME/src/**/*.test.cpp     doctest unit tests, one executable per module, discovered by ctest
function(sailor_module name)
  cmake_parse_arguments(ARG "" "TARGET;TEST_TIMEOUT" "DEPS;PRIVATE_DEPS;TEST_DEPS;SOURCES;EXCLUDE" ${ARGN})
  if(NOT ARG_TARGET)
    set(ARG_TARGET sailor_${name})
  endif()
  if(NOT ARG_TEST_TIMEOUT)
    set(ARG_TEST_TIMEOUT 120)
  endif()
  if(ARG_SOURCES)
    set(sources ${ARG_SOURCES})
  else()
    file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/*.cpp)
  endif()
  file(GLOB_RECURSE tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/*.test.cpp)
  list(REMOVE_ITEM sources ${tests})
  foreach(pattern IN LISTS ARG_EXCLUDE)
    list(FILTER sources EXCLUDE REGEX ${pattern})
    list(FILTER tests EXCLUDE REGEX ${pattern})
  endforeach()
  if(NOT sources)
    # Nothing built yet: a header-only placeholder so dependants configure.
    add_library(${ARG_TARGET} INTERFACE)
    target_include_directories(${ARG_TARGET} INTERFACE ${CMAKE_CURRENT_SOURCE_DIR}/include)
    target_link_libraries(${ARG_TARGET} INTERFACE ${ARG_DEPS})
    return()
  endif()
  add_library(${ARG_TARGET} ${sources})
  target_include_directories(${ARG_TARGET} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include
                                           PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_link_libraries(${ARG_TARGET} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  target_compile_options(${ARG_TARGET} PRIVATE ${SAILOR_WARNINGS})
  if(SAILOR_BUILD_TESTS AND tests)
    # doctest's main is compiled alone: in a unity batch its header would already be included
    # without DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN.
    set_source_files_properties(${SAILOR_SOURCE_DIR}/tests/support/doctest_main.cpp
                                PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
    add_executable(${ARG_TARGET}_tests ${tests} ${SAILOR_SOURCE_DIR}/tests/support/doctest_main.cpp)
    target_link_libraries(${ARG_TARGET}_tests PRIVATE ${ARG_TARGET} ${ARG_DEPS} ${ARG_PRIVATE_DEPS}
                          ${ARG_TEST_DEPS} doctest::doctest)
    target_compile_options(${ARG_TARGET}_tests PRIVATE ${SAILOR_TEST_OPTIMIZATION})
    target_include_directories(${ARG_TARGET}_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src
                               ${SAILOR_SOURCE_DIR}/tests/support)
    target_compile_definitions(${ARG_TARGET}_tests PRIVATE
      SAILOR_SOURCE_DIR="${SAILOR_SOURCE_DIR}" SAILOR_DATA_DIR="${SAILOR_DATA_DIR}")
    set_target_properties(${ARG_TARGET}_tests PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
    doctest_discover_tests(${ARG_TARGET}_tests TEST_PREFIX "${name}: "
      WORKING_DIRECTORY ${CMAKE_BINARY_DIR}
      PROPERTIES TIMEOUT ${ARG_TEST_TIMEOUT} LABELS unit
                 FAIL_REGULAR_EXPRESSION "test cases: 0 [|]")
  endif()
endfunction()
