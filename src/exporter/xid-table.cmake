# SPDX-License-Identifier: Apache-2.0
# cmake -DIN=xid-messages.csv -DOUT=file.c -P xid-table.cmake: turns dcgm-exporter's XID messages
# (a CSV `xid,err_msg` with a header line; a message with a comma is double-quoted, `""` inside
# quotes is a quote) into the C table exporter_xid_table[] of exporter-xid.c, indexed by XID.
# A CMake list splits at semicolons: refuse them rather than split a message.
file(READ ${IN} raw)
if(raw MATCHES ";")
  message(FATAL_ERROR "${IN}: a semicolon in a message is not supported by xid-table.cmake")
endif()
file(STRINGS ${IN} lines ENCODING UTF-8)
set(body "")
set(max -1)
set(first TRUE)
foreach(line IN LISTS lines)
  if(first)
    set(first FALSE)
    continue()
  endif()
  if(line STREQUAL "")
    continue()
  endif()
  if(NOT line MATCHES "^([0-9]+),(.*)$")
    message(FATAL_ERROR "${IN}: not `xid,message`: ${line}")
  endif()
  set(xid ${CMAKE_MATCH_1})
  set(msg "${CMAKE_MATCH_2}")
  if(msg MATCHES "^\"(.*)\"$")
    set(msg "${CMAKE_MATCH_1}")
    string(REPLACE "\"\"" "\"" msg "${msg}")
  endif()
  # As a C string literal.
  string(REPLACE "\\" "\\\\" msg "${msg}")
  string(REPLACE "\"" "\\\"" msg "${msg}")
  string(APPEND body "    [${xid}] = \"${msg}\",\n")
  if(xid GREATER max)
    set(max ${xid})
  endif()
endforeach()
math(EXPR count "${max} + 1")
file(WRITE ${OUT}.tmp
     "/* Generated from ${IN} by xid-table.cmake; do not edit. */\n"
     "#include \"exporter-internal.h\"\n\n"
     "const char *const exporter_xid_table[] = {\n${body}};\n"
     "const size_t exporter_xid_table_len = ${count};\n")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)
