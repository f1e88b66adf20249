/* SPDX-License-Identifier: Apache-2.0 */
/* What the files of the cdi module share among themselves: NULL-terminated string lists and the
 * character classes of the naming rules. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "cdi.h"

static inline bool cdi_is_alpha(char c)
{
    return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z');
}

static inline bool cdi_is_alnum(char c)
{
    return cdi_is_alpha(c) || ('0' <= c && c <= '9');
}

/* A copy of the NULL-terminated list (NULL: an empty list). The caller frees it with strv_free. */
_wur_ int cdi_strv_copy(const char *const *list, char ***ret);
char **cdi_strv_free(char **list);
bool cdi_strv_equal(char *const *a, char *const *b);

/* Splits "vendor/class" (already checked) into copies. */
_wur_ int cdi_split_kind(const char *kind, char **ret_vendor, char **ret_class);

/* Whether a Kubernetes annotation key ([prefix/]name) is well-formed. */
bool cdi_valid_annotation_key(const char *key);
