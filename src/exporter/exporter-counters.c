/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dcgm-exporter's counters file (-f, --collectors): which DCGM fields to export, as what Prometheus
 * type, with which help text. dcgm-exporter reads it with Go's encoding/csv (Comment '#') and
 * checks each record in counters.ExtractCounters (internal/pkg/counters/counter_config.go): three
 * fields, each trimmed of spaces; the field name must be known to DCGM or be one of its own
 * DCGM_EXP_* fields; the type one of gauge, counter, histogram, summary, label. Every file it
 * accepts is accepted here, with these differences (docs/exporter.md): a field NVML cannot answer
 * is skipped with a warning (dcgm-exporter skips profiling fields its DCGM cannot collect the same
 * way), a field declared twice and a string field declared as anything but a label are errors,
 * tabs are trimmed too, a comment may be indented, and a quoted field may not span lines.
 */
#include <stdarg.h>
#include <string.h>

#include "exporter-internal.h"

static const char *const type_names[] = {
    [EXPORTER_GAUGE] = "gauge",         [EXPORTER_COUNTER] = "counter",
    [EXPORTER_HISTOGRAM] = "histogram", [EXPORTER_SUMMARY] = "summary",
    [EXPORTER_LABEL] = "label",
};

const char *exporter_prom_type_name(enum exporter_prom_type t)
{
    return (size_t)t < ARRAY_SIZE(type_names) ? type_names[t] : "untyped";
}

void exporter_counters_init(struct exporter_counters *c)
{
    *c = (struct exporter_counters){0};
}

void exporter_counters_release(struct exporter_counters *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->v[i].help);
    free(c->v);
    for (size_t i = 0; i < c->n_warnings; i++)
        free(c->warnings[i]);
    free(c->warnings);
    exporter_counters_init(c);
}

static void exporter_counters_releasep(struct exporter_counters *c)
{
    exporter_counters_release(c);
}

_printf_(4, 5) static int fail_line(struct diag *d, const char *filename, unsigned line,
                                    const char *fmt, ...)
{
    char text[DIAG_MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    int r = diag_fail(d, -EINVAL, "%s:%u: %s", filename, line, text);
    if (d)
        d->line = (int)line;
    return r;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* The number of fields of a record that are kept; a fourth only counts. */
#define RECORD_FIELDS 3

/*
 * record = field { "," field }
 * field  = blanks ( '"' { char | '""' } '"' | { char - "," } ) blanks
 * Splits one line (no newline) into fields, unquoted and trimmed, into f[0..2]; *ret_count gets
 * the number of fields. -EINVAL with *ret_why set for a quote left open or followed by text.
 */
static int split_record(const char *p, size_t n, struct strbuf f[RECORD_FIELDS], size_t *ret_count,
                        const char **ret_why)
{
    size_t count = 0, i = 0;
    int r;

    for (;;) {
        struct strbuf scratch = STRBUF_INIT;
        struct strbuf *out = count < RECORD_FIELDS ? &f[count] : &scratch;

        while (i < n && is_blank(p[i]))
            i++;
        if (i < n && p[i] == '"') {
            bool closed = false;
            for (i++; i < n; i++) {
                if (p[i] == '"') {
                    if (i + 1 < n && p[i + 1] == '"') {
                        i++;
                    } else {
                        closed = true;
                        i++;
                        break;
                    }
                }
                r = strbuf_addch(out, p[i]);
                if (r < 0) {
                    strbuf_release(&scratch);
                    return r;
                }
            }
            strbuf_release(&scratch);
            if (!closed) {
                *ret_why = "a quoted field is not closed on its line";
                return -EINVAL;
            }
            while (i < n && is_blank(p[i]))
                i++;
            if (i < n && p[i] != ',') {
                *ret_why = "text after the closing quote of a field";
                return -EINVAL;
            }
        } else {
            size_t start = i;
            while (i < n && p[i] != ',')
                i++;
            size_t end = i;
            while (end > start && is_blank(p[end - 1]))
                end--;
            r = strbuf_add(out, p + start, end - start);
            strbuf_release(&scratch);
            if (r < 0)
                return r;
        }
        count++;
        if (i >= n)
            break;
        i++; /* the comma */
    }
    *ret_count = count;
    return 0;
}

/* dcgm-exporter trims only spaces after Go's CSV reader has unquoted a field: a quoted help text
 * loses its outer blanks too. */
static const char *trimmed(struct strbuf *sb, size_t *ret_len)
{
    const char *s = strbuf_str(sb);
    size_t len = sb->len;
    while (len > 0 && is_blank(*s)) {
        s++;
        len--;
    }
    while (len > 0 && is_blank(s[len - 1]))
        len--;
    *ret_len = len;
    return s;
}

static int parse_type(const char *s, size_t len, enum exporter_prom_type *ret)
{
    for (size_t t = 0; t < ARRAY_SIZE(type_names); t++) {
        if (strlen(type_names[t]) == len && memcmp(type_names[t], s, len) == 0) {
            *ret = (enum exporter_prom_type)t;
            return 0;
        }
    }
    return -EINVAL;
}

static int add_warning(struct exporter_counters *c, const char *filename, unsigned line,
                       const struct exporter_field *f)
{
    struct strbuf sb = STRBUF_INIT;
    int r;

    if (strncmp(f->name, "DCGM_EXP_", 9) == 0)
        r = strbuf_addf(&sb, "%s:%u: %s comes from DCGM's health checks, not NVML: skipped",
                        filename, line, f->name);
    else
        r = strbuf_addf(&sb, "%s:%u: %s cannot be read through NVML: skipped", filename, line,
                        f->name);
    if (r < 0) {
        strbuf_release(&sb);
        return r;
    }
    char **grown = reallocarray(c->warnings, c->n_warnings + 1, sizeof(*grown));
    if (!grown) {
        strbuf_release(&sb);
        return -ENOMEM;
    }
    c->warnings = grown;
    c->warnings[c->n_warnings] = strbuf_detach(&sb, NULL);
    if (!c->warnings[c->n_warnings])
        return -ENOMEM;
    c->n_warnings++;
    return 0;
}

static int compare_counters(const void *a, const void *b)
{
    const struct exporter_counter *x = a, *y = b;
    return (x->field->id > y->field->id) - (x->field->id < y->field->id);
}

/* One record of the file, already split: checks it and adds it to c (or a warning). */
static int add_record(struct exporter_counters *c, struct strbuf f[RECORD_FIELDS],
                      const char *filename, unsigned line, struct diag *d)
{
    size_t name_len, type_len, help_len;
    const char *name = trimmed(&f[0], &name_len);
    const char *type = trimmed(&f[1], &type_len);
    const char *help = trimmed(&f[2], &help_len);
    enum exporter_prom_type t;

    const struct exporter_field *field = exporter_field_lookup(name, name_len);
    if (!field)
        return fail_line(d, filename, line, "unknown DCGM field '%.*s'",
                         (int)(name_len > 128 ? 128 : name_len), name);
    /* Before the type check, as dcgm-exporter skips the profiling fields it cannot collect. */
    if (field->source == EXPORTER_SOURCE_NONE)
        return add_warning(c, filename, line, field);
    if (parse_type(type, type_len, &t) < 0)
        return fail_line(d, filename, line,
                         "%s: unknown Prometheus type '%.*s' (gauge, counter, histogram, summary "
                         "or label)",
                         field->name, (int)(type_len > 64 ? 64 : type_len), type);
    if (t == EXPORTER_LABEL && (field->source == EXPORTER_SOURCE_XID_COUNT ||
                                field->source == EXPORTER_SOURCE_CLOCK_EVENTS_COUNT))
        return fail_line(d, filename, line, "%s: a count over a window cannot be a label",
                         field->name);
    if (field->kind == EXPORTER_VALUE_STRING && t != EXPORTER_LABEL)
        return fail_line(d, filename, line, "%s: a string field can only be a label, not a %s",
                         field->name, type_names[t]);
    for (size_t i = 0; i < c->n; i++) {
        if (c->v[i].field == field)
            return fail_line(d, filename, line, "%s: declared twice (first on line %u)",
                             field->name, c->v[i].line);
    }

    struct exporter_counter *grown = reallocarray(c->v, c->n + 1, sizeof(*grown));
    if (!grown)
        return -ENOMEM;
    c->v = grown;
    char *h = strndup(help, help_len);
    if (!h)
        return -ENOMEM;
    c->v[c->n++] = (struct exporter_counter){.field = field, .type = t, .help = h, .line = line};
    return 0;
}

int exporter_counters_parse(const char *text, size_t len, const char *filename,
                            struct exporter_counters *ret, struct diag *d)
{
    _cleanup_(exporter_counters_releasep) struct exporter_counters c = {0};
    unsigned line = 0;
    size_t pos = 0;
    int r;

    if (len > EXPORTER_COUNTERS_MAX_BYTES)
        return diag_fail(d, -EFBIG, "%s: larger than %zu bytes", filename,
                         EXPORTER_COUNTERS_MAX_BYTES);

    while (pos < len) {
        const char *p = text + pos;
        const char *nl = memchr(p, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - p) : len - pos;
        pos += n + (nl ? 1 : 0);
        line++;

        if (n > 0 && p[n - 1] == '\r')
            n--;
        if (memchr(p, '\0', n))
            return fail_line(d, filename, line, "a NUL byte");
        size_t i = 0;
        while (i < n && is_blank(p[i]))
            i++;
        if (i == n || p[i] == '#')
            continue;

        struct strbuf f[RECORD_FIELDS] = {STRBUF_INIT, STRBUF_INIT, STRBUF_INIT};
        const char *why = NULL;
        size_t count = 0;
        r = split_record(p, n, f, &count, &why);
        if (r == -EINVAL) {
            r = fail_line(d, filename, line, "%s", why);
        } else if (r >= 0 && count != RECORD_FIELDS) {
            r = fail_line(d, filename, line,
                          "expected 3 comma-separated fields (DCGM field, Prometheus type, help), "
                          "found %zu",
                          count);
        } else if (r >= 0) {
            r = add_record(&c, f, filename, line, d);
        }
        for (size_t k = 0; k < RECORD_FIELDS; k++)
            strbuf_release(&f[k]);
        if (r < 0)
            return r;
    }

    if (c.n > 1)
        qsort(c.v, c.n, sizeof(*c.v), compare_counters);
    *ret = c;
    c = (struct exporter_counters){0};
    return 0;
}

int exporter_counters_load(const char *path, struct exporter_counters *ret, struct diag *d)
{
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    int r;

    if (!path)
        return exporter_counters_parse((const char *)exporter_default_counters_csv,
                                       exporter_default_counters_csv_len,
                                       EXPORTER_DEFAULT_COUNTERS_NAME, ret, d);
    r = file_read_all(path, EXPORTER_COUNTERS_MAX_BYTES, &data, &len);
    if (r == -EFBIG)
        return diag_fail(d, r, "%s: larger than %zu bytes", path, EXPORTER_COUNTERS_MAX_BYTES);
    if (r < 0)
        return diag_fail(d, r, "%s: %s", path, strerror(-r));
    return exporter_counters_parse(data, len, path, ret, d);
}

uint64_t exporter_counters_metrics(const struct exporter_counters *c)
{
    uint64_t want = 0;
    for (size_t i = 0; i < c->n; i++) {
        const struct exporter_field *f = c->v[i].field;
        /* The clock events count is counted from the reasons, read like any metric. */
        if (f->source == EXPORTER_SOURCE_METRIC || f->source == EXPORTER_SOURCE_CLOCK_EVENTS_COUNT)
            want |= UINT64_C(1) << f->metric;
    }
    return want;
}

bool exporter_counters_use(const struct exporter_counters *c, enum exporter_source source)
{
    for (size_t i = 0; i < c->n; i++) {
        if (c->v[i].field->source == source)
            return true;
    }
    return false;
}
