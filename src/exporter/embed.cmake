# SPDX-License-Identifier: Apache-2.0
# cmake -DIN=file -DOUT=file.c -DNAME=symbol -P embed.cmake: writes a C source that holds the bytes of
# IN as `const unsigned char NAME[]` (NUL-terminated) and its length (without the NUL) as
# `const size_t NAME_len`, so the binary carries the file and needs no path at run time. Both are
# declared in exporter-internal.h.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" hex_len)
math(EXPR len "${hex_len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
# Break the initialiser every 16 bytes so the generated file stays readable (CMake's regular
# expressions have no {n}).
string(REPEAT "0x..," 16 sixteen)
string(REGEX REPLACE "(${sixteen})" "\\1\n    " bytes "${bytes}")
file(WRITE ${OUT}.tmp
     "/* Generated from ${IN} by embed.cmake; do not edit. */\n"
     "#include \"exporter-internal.h\"\n\n"
     "const unsigned char ${NAME}[] = {\n    ${bytes}0x00};\n"
     "const size_t ${NAME}_len = ${len};\n")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)
