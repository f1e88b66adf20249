/* SPDX-License-Identifier: Apache-2.0 */
/*
 * klog-compatible logging. Each line is built whole in a fixed buffer and handed to one write(2),
 * so lines from different threads never interleave and a log collector that parses klog (or the
 * JSON format of component-base) reads gpuplane like any other Kubernetes component.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "base-internal.h"
#include "base-log.h"

/* The longest line written; longer ones are cut and end in "...". */
#define LOG_LINE_MAX 16384

static atomic_int log_v;
static atomic_int log_fmt = LOG_FORMAT_TEXT;
static atomic_int log_out = STDERR_FILENO;
/* A write(2) of more than PIPE_BUF bytes may interleave with another; the lock keeps lines whole.
 */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void log_setup(int verbosity, enum log_format format)
{
    atomic_store(&log_v, verbosity);
    atomic_store(&log_fmt, (int)format);
}

int log_verbosity(void)
{
    return atomic_load(&log_v);
}

int log_format_parse(const char *s, enum log_format *ret)
{
    if (!s)
        return -EINVAL;
    if (strcmp(s, "text") == 0)
        *ret = LOG_FORMAT_TEXT;
    else if (strcmp(s, "json") == 0)
        *ret = LOG_FORMAT_JSON;
    else
        return -EINVAL;
    return 0;
}

void log_set_fd(int fd)
{
    atomic_store(&log_out, fd);
}

const char *log_fmt_int(char buf[static 24], long long value)
{
    snprintf(buf, 24, "%lld", value);
    return buf;
}

/* A line under construction; once full, further appends are dropped and the line is marked cut. */
struct line {
    char buf[LOG_LINE_MAX];
    size_t len;
    bool cut;
};

static void line_add(struct line *l, const char *s, size_t n)
{
    /* Keep room for the "...\n" that ends a cut line. */
    size_t room = sizeof(l->buf) - 4 - l->len;

    if (n > room) {
        n = room;
        l->cut = true;
    }
    memcpy(l->buf + l->len, s, n);
    l->len += n;
}

static void line_adds(struct line *l, const char *s)
{
    line_add(l, s, strlen(s));
}

static void line_addf(struct line *l, const char *fmt, ...) _printf_(2, 3);
static void line_addf(struct line *l, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n > 0)
        line_add(l, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* A string as Go's strconv.Quote writes it (what klog uses), or as a JSON string. */
static void line_add_quoted(struct line *l, const char *s, bool json)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n;

    line_add(l, "\"", 1);
    while (*p) {
        switch (*p) {
        case '"':
            line_add(l, "\\\"", 2);
            break;
        case '\\':
            line_add(l, "\\\\", 2);
            break;
        case '\n':
            line_add(l, "\\n", 2);
            break;
        case '\r':
            line_add(l, "\\r", 2);
            break;
        case '\t':
            line_add(l, "\\t", 2);
            break;
        default:
            n = utf8_seq_len(p, strnlen((const char *)p, 4));
            if (*p < 0x20 || *p == 0x7f || n == 0) {
                line_addf(l, json ? "\\u%04x" : "\\x%02x", *p);
                n = 1;
            } else {
                line_add(l, (const char *)p, n);
            }
            p += n;
            continue;
        }
        p++;
    }
    line_add(l, "\"", 1);
}

/* JSON's number grammar: what both formats print without quotes, besides true and false. */
static bool is_number(const char *s)
{
    const char *p = s;

    if (*p == '-')
        p++;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (*p >= '0' && *p <= '9')
            p++;
    else
        return false;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9'))
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!(*p >= '0' && *p <= '9'))
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    return *p == '\0';
}

static bool is_bare(const char *v)
{
    return is_number(v) || strcmp(v, "true") == 0 || strcmp(v, "false") == 0;
}

static const char *base_name(const char *file)
{
    const char *slash;

    if (!file)
        return "?";
    slash = strrchr(file, '/');

    return slash ? slash + 1 : file;
}

static void add_value(struct line *l, const char *v, bool json)
{
    if (!v)
        line_adds(l, json ? "null" : "<nil>");
    else if (is_bare(v))
        line_adds(l, v);
    else
        line_add_quoted(l, v, json);
}

static void format_text(struct line *l, char severity, const struct timeval *tv, const char *file,
                        int line, const char *msg, va_list ap)
{
    struct tm tm;
    const char *k;

    if (!localtime_r(&tv->tv_sec, &tm))
        memset(&tm, 0, sizeof(tm));
    line_addf(l, "%c%02d%02d %02d:%02d:%02d.%06ld %7d %s:%d] ", severity, tm.tm_mon + 1, tm.tm_mday,
              tm.tm_hour, tm.tm_min, tm.tm_sec, (long)tv->tv_usec, (int)gettid(), base_name(file),
              line);
    line_add_quoted(l, msg, false);
    while ((k = va_arg(ap, const char *))) {
        const char *v = va_arg(ap, const char *);

        line_add(l, " ", 1);
        line_adds(l, k);
        line_add(l, "=", 1);
        add_value(l, v, false);
    }
}

static void format_json(struct line *l, int v, const struct timeval *tv, const char *file, int line,
                        const char *msg, va_list ap)
{
    char caller[256];
    const char *k;

    line_addf(l, "{\"ts\":%lld.%06ld,\"caller\":", (long long)tv->tv_sec, (long)tv->tv_usec);
    snprintf(caller, sizeof(caller), "%s:%d", base_name(file), line);
    line_add_quoted(l, caller, true);
    line_adds(l, ",\"msg\":");
    line_add_quoted(l, msg, true);
    line_addf(l, ",\"v\":%d", v);
    while ((k = va_arg(ap, const char *))) {
        const char *val = va_arg(ap, const char *);

        line_add(l, ",", 1);
        line_add_quoted(l, k, true);
        line_add(l, ":", 1);
        add_value(l, val, true);
    }
    line_add(l, "}", 1);
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

void log_kv(char severity, int v, const char *file, int line, const char *msg, ...)
{
    struct line *l;
    struct timeval tv;
    va_list ap;
    int saved = errno;

    if (v > log_verbosity())
        return;
    /* 16 KiB is too much for the stack of a small worker thread. */
    l = malloc(sizeof(*l));
    if (!l)
        return;
    l->len = 0;
    l->cut = false;
    gettimeofday(&tv, NULL);
    va_start(ap, msg);
    if (atomic_load(&log_fmt) == LOG_FORMAT_JSON)
        format_json(l, v, &tv, file, line, msg ? msg : "", ap);
    else
        format_text(l, severity, &tv, file, line, msg ? msg : "", ap);
    va_end(ap);
    if (l->cut) {
        memcpy(l->buf + l->len, "...", 3);
        l->len += 3;
    }
    l->buf[l->len++] = '\n';
    pthread_mutex_lock(&log_lock);
    write_all(atomic_load(&log_out), l->buf, l->len);
    pthread_mutex_unlock(&log_lock);
    free(l);
    errno = saved;
}
