# SPDX-License-Identifier: Apache-2.0
# Compiler and linker flags from the house style: strict warnings, hardening, optional sanitizers.

set(GP_WARNINGS
    -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wvla
    -Wconversion -Wsign-conversion -Wno-unused-parameter)
if(CMAKE_C_COMPILER_ID STREQUAL "GNU")
  # GCC lets a goto jump past a cleanup variable; this catches it (Clang refuses it outright).
  list(APPEND GP_WARNINGS -Wjump-misses-init)
endif()
if(GP_WERROR)
  list(APPEND GP_WARNINGS -Werror)
endif()

# Every project source sees banned.h first; see the header for why.
set(GP_COMMON_FLAGS -D_GNU_SOURCE -include ${CMAKE_SOURCE_DIR}/src/base/banned.h)

if(GP_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "GP_FUZZ needs Clang (CC=clang)")
  endif()
  # Coverage instrumentation everywhere; only the fuzz targets link libFuzzer itself.
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
if(GP_SANITIZE)
  set(GP_SAN_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_compile_options(${GP_SAN_FLAGS})
  add_link_options(${GP_SAN_FLAGS})
else()
  add_compile_options(-D_FORTIFY_SOURCE=3)
endif()
add_compile_options(-fstack-protector-strong)
if(CMAKE_C_COMPILER_ID STREQUAL "Clang")
  # Debian 12's valgrind (3.19) cannot read Clang's default DWARF 5 debug info.
  add_compile_options(-gdwarf-4)
endif()
add_link_options(-Wl,-z,relro,-z,now)

# Applies the project's warnings to a target (not to generated or third-party code).
function(gp_strict target)
  target_compile_options(${target} PRIVATE ${GP_WARNINGS} ${GP_COMMON_FLAGS})
endfunction()
