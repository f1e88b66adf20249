# SPDX-License-Identifier: Apache-2.0
# One static library per module, so an include across the layering is a link error, and one cmocka
# test binary per unit test file.

# gp_module(NAME SOURCES... [DEPS lib...]): builds libgp_NAME.a from the sources of src/NAME.
function(gp_module name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS" ${ARGN})
  add_library(gp_${name} STATIC ${M_SOURCES})
  target_include_directories(gp_${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(gp_${name} PUBLIC ${M_DEPS})
  gp_strict(gp_${name})
endfunction()

# gp_unit_test(NAME SOURCES... [LIBS lib...] [ENV VAR=value...]): a cmocka test binary, run by ctest
# (label "unit") and, when enabled and not sanitized, again under valgrind (label "valgrind").
function(gp_unit_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;ENV" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} PkgConfig::CMOCKA)
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tests/unit)
  gp_strict(${name})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS unit TIMEOUT 120 ENVIRONMENT "${T_ENV}")
  if(GP_VALGRIND_TESTS AND NOT GP_SANITIZE)
    find_program(VALGRIND valgrind)
    if(VALGRIND)
      add_test(NAME ${name}-valgrind
               COMMAND ${VALGRIND} --quiet --error-exitcode=99 --leak-check=full
                       --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect
                       --track-fds=no $<TARGET_FILE:${name}>)
      set_tests_properties(${name}-valgrind PROPERTIES LABELS valgrind TIMEOUT 300
                                                      ENVIRONMENT "${T_ENV}")
    endif()
  endif()
endfunction()
