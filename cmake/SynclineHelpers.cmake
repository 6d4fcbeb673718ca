# Small helpers so each component's CMakeLists stays a few lines long.

set(SYNCLINE_WARNINGS -Wall -Wextra -Wpedantic -Wno-unused-parameter)

# syncline_library(<name> SOURCES ... DEPS ...): a static component library whose
# public headers are included as "<component>/<header>.h" from the source root.
function(syncline_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${SYNCLINE_WARNINGS}>)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()

# syncline_test(<name> SOURCES ... DEPS ...): a GoogleTest binary registered with ctest.
function(syncline_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE ${SYNCLINE_WARNINGS})
  if(NOT TARGET syncline_test_logging)
    add_library(syncline_test_logging OBJECT ${PROJECT_SOURCE_DIR}/tests/unit/testing/logging_before_main.cc)
    target_link_libraries(syncline_test_logging PUBLIC spdlog::spdlog)
  endif()
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} syncline_test_logging GTest::gtest GTest::gtest_main GTest::gmock)
  add_test(NAME ${name} COMMAND ${name})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT} LABELS unit)
endfunction()
