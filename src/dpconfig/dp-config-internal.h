/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the dp-config-*.c files share inside the configuration layer: the struct helpers of
 * dp-config.c (NULL-terminated string vectors, owned strings, warnings, XID sets, durations) and
 * the names and value access of the settings table (dp-config-settings.c).
 */
#pragma once

#include "dp-config.h"

/* Room for one reason ("invalid value ...: want ...") or one warning. */
#define DP_WHY_MAX 256

/* At least the number of rows of dp_settings (checked where the table is), for arrays sized by it.
 */
#define DP_SETTINGS_MAX 40

/* The struct dp_config field of a table setting. */
#define DP_FIELD(cfg, s, type) ((type *)(void *)((char *)(cfg) + (s)->offset))

/* ---- dp-config.c ---- */

/* Replaces *field with a copy of value. -ENOMEM leaves *field as it was. */
_wur_ int dp_set_string(char **field, const char *value);

/* NULL-terminated string vectors: free (NULL-safe; returns NULL), length, and append a copy of
 * s[0..len). */
char **dp_strv_free(char **v);
size_t dp_strv_len(char *const *v);
_wur_ int dp_strv_push(char ***v, const char *s, size_t len);

/* Adds a warning for the daemon to log (cfg->warnings); one lost to a failed allocation is
 * dropped. */
void dp_config_warn(struct dp_config *cfg, const char *fmt, ...) _printf_(2, 3);

/* Marks one XID (1..DP_XID_MAX), or all of them, ignored or fatal. */
void dp_xid_set(struct dp_health *h, unsigned xid, bool ignored);
void dp_xid_set_all(struct dp_health *h, bool ignored);

/* Durations as Go writes them, integers only ("500ms", "5s", "1m30s", "2h"; "0" alone is 0):
 * -EINVAL for bad text, -ERANGE past a year. The format is the shortest exact form. */
_wur_ int dp_duration_parse(const char *s, unsigned long *ret_ms);
void dp_duration_format(unsigned long ms, char buf[static 32]);

/* ---- dp-config-settings.c ---- */

/* The device-list strategy names, in DP_LIST_* bit order, NULL-terminated. */
extern const char *const dp_list_names[];

/* Writes `invalid value "<value>": want a, b or c` into why; returns -EINVAL. */
int dp_fail_enum(const char *const *names, const char *value, char *why, size_t why_size);
