/* SPDX-License-Identifier: Apache-2.0 */
/* Writing jansson values as block-style YAML (the loading side is base-doc.h). */
#pragma once

#include <jansson.h>

#include "base-macro.h"
#include "base-strbuf.h"

/* Appends v as a YAML document body (no "---"). -ELOOP past the nesting cap, strbuf errors. */
_wur_ int yaml_emit(struct strbuf *sb, const json_t *v);
/* Appends v as one element ("- ...") of a block sequence whose dashes are at column indent, depth
 * levels deep in its document: what yaml_emit writes for each element of a sequence there, so a
 * long sequence can be written one element at a time. */
_wur_ int yaml_emit_item(struct strbuf *sb, const json_t *v, int indent, int depth);
