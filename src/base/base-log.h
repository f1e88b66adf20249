/* SPDX-License-Identifier: Apache-2.0 */
/*
 * klog-format logging on stderr, one write(2) per line, as Kubernetes components log:
 *
 *   I1122 00:12:03.123456    1234 dp-health.c:88] "device unhealthy" uuid="GPU-..." xid=79
 *
 * or, with --log-format=json, one JSON object a line ({"ts":..., "caller":..., "msg":..., "v":0,
 * ...}). Structured values are key/value string pairs; LOG_INT() formats a number for them.
 * Libraries log at debug level only (log_debug with a verbosity); daemons decide what is info,
 * warning or error.
 */
#pragma once

#include <stdbool.h>

#include "base-macro.h"

enum log_format {
    LOG_FORMAT_TEXT,
    LOG_FORMAT_JSON,
};

/* Sets the verbosity (-v=N) and the format. Thread-safe to call before threads start. */
void log_setup(int verbosity, enum log_format format);
int log_verbosity(void);
/* Parses "text" or "json". 0 or -EINVAL. */
_wur_ int log_format_parse(const char *s, enum log_format *ret);

/* Sends lines to fd instead of stderr (tests). */
void log_set_fd(int fd);

/* severity: 'I', 'W', 'E'. v: the verbosity the line needs (0 = always). The variadic part is
 * key, value, key, value, ..., NULL; every key and value is a string (a NULL value prints <nil>).
 */
void log_kv(char severity, int v, const char *file, int line, const char *msg, ...);

const char *log_fmt_int(char buf[static 24], long long value);
#define LOG_INT(x) log_fmt_int((char[24]){0}, (long long)(x))

#define log_info(msg, ...) log_kv('I', 0, __FILE__, __LINE__, msg, ##__VA_ARGS__, (char *)NULL)
#define log_warn(msg, ...) log_kv('W', 0, __FILE__, __LINE__, msg, ##__VA_ARGS__, (char *)NULL)
#define log_error(msg, ...) log_kv('E', 0, __FILE__, __LINE__, msg, ##__VA_ARGS__, (char *)NULL)
/* An info line shown only at -v=level or more. */
#define log_debug(level, msg, ...)                                                                 \
    do {                                                                                           \
        if (log_verbosity() >= (level))                                                            \
            log_kv('I', level, __FILE__, __LINE__, msg, ##__VA_ARGS__, (char *)NULL);              \
    } while (0)
