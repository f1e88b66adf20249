# SPDX-License-Identifier: Apache-2.0
# cmake -DIN=api.proto -DOUT=copy.proto -P c-source.cmake: writes the copy of a .proto file that
# protoc-c compiles. protoc-c 1.4.1 has two gaps this works around, without changing the wire:
#  - it refuses proto3 `optional`; `optional T f = N;` becomes `oneof _f { T f = N; }`, which is
#    what protoc itself makes of it (a synthetic oneof), so C code keeps presence (`_f_case`);
#  - its service stubs do not compile (a method named Register becomes a struct member named
#    `register`) and know nothing of streaming; services are dropped, since src/rpc routes by
#    method path. The Python and Go peers compile the original files, services included.
file(READ "${IN}" text)
string(REGEX REPLACE "\nservice [A-Za-z0-9_]+ {([^{}]|{[^{}]*})*}" "\n" text "${text}")
string(REGEX REPLACE "\n( *)optional ([A-Za-z0-9_.]+) ([A-Za-z0-9_]+) = ([0-9]+);"
       "\n\\1oneof _\\3 { \\2 \\3 = \\4; }" text "${text}")
if(text MATCHES "\n *(optional |service )")
  message(FATAL_ERROR "${IN}: an optional field or service this script cannot rewrite")
endif()
file(WRITE "${OUT}" "${text}")
