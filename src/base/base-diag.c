/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Diagnostics: the one place that formats a failure's reason into a fixed buffer, so callers at any
 * depth can say why without allocating, and a caller that does not care can pass NULL.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base-diag.h"

void diag_init(struct diag *d)
{
    if (!d)
        return;
    d->line = 0;
    d->col = 0;
    d->msg[0] = '\0';
}

int diag_fail(struct diag *d, int err, const char *fmt, ...)
{
    va_list ap;

    if (!d)
        return err;
    d->line = 0;
    d->col = 0;
    va_start(ap, fmt);
    vsnprintf(d->msg, sizeof(d->msg), fmt, ap);
    va_end(ap);
    return err;
}

int diag_fail_at(struct diag *d, int err, const char *file, int line, int col, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (!d)
        return err;
    d->line = line;
    d->col = col;
    n = snprintf(d->msg, sizeof(d->msg), "%s:%d:%d: ", file ? file : "<input>", line, col);
    if (n < 0 || (size_t)n >= sizeof(d->msg))
        return err;
    va_start(ap, fmt);
    vsnprintf(d->msg + n, sizeof(d->msg) - (size_t)n, fmt, ap);
    va_end(ap);
    return err;
}
