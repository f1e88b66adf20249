/* SPDX-License-Identifier: Apache-2.0 */
/* Writing jansson values as block-style YAML (the loading side is base-doc.h). */
#pragma once

#include <jansson.h>

#include "base-macro.h"
#include "base-strbuf.h"

/* Appends v as a YAML document body (no "---"). -ELOOP past the nesting cap, strbuf errors. */
_wur_ int yaml_emit(struct strbuf *sb, const json_t *v);
