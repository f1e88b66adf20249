/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NFD local feature file: one "key=value" line per label, which nfd-worker's local source
 * turns into node labels. Written atomically (a complete new file renamed over the old one), so
 * nfd-worker never reads half a label set, only when its content changes, and never removed: a
 * restart keeps the node's labels where NVIDIA's GFD deletes the file on exit and makes them flap.
 */
#include <errno.h>
#include <libgen.h>
#include <stdbool.h>
#include <string.h>

#include "discover-internal.h"

int discover_labels_format(const struct discover_labels *l, struct strbuf *out)
{
    int r = 0;
    for (size_t i = 0; r >= 0 && i < l->n; i++)
        r = strbuf_addf(out, "%s=%s\n", l->v[i].key, l->v[i].value);
    return r;
}

/* Whether path already holds exactly text (then nothing is written: no fsync every interval). */
static bool same_content(const char *path, const struct strbuf *text)
{
    _cleanup_free_ char *old = NULL;
    size_t len = 0;
    return file_read_all(path, text->len + 1, &old, &len) >= 0 && len == text->len &&
           memcmp(old, strbuf_str(text), len) == 0;
}

int discover_output_file(const char *path, const struct discover_labels *l, struct diag *d)
{
    _cleanup_strbuf_ struct strbuf text = STRBUF_INIT;
    _cleanup_free_ char *dir = strdup(path);
    if (!dir)
        return -ENOMEM;
    int r = discover_labels_format(l, &text);
    if (r < 0)
        return diag_fail(d, r, "%s: %s", path, strerror(-r));
    if (same_content(path, &text))
        return 0;
    r = file_mkdir_p(dirname(dir), 0755);
    if (r >= 0)
        r = file_write_atomic(path, strbuf_str(&text), text.len, 0644);
    if (r < 0)
        return diag_fail(d, r, "cannot write %s: %s", path, strerror(-r));
    return 1;
}
