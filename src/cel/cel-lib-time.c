/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Timestamps and durations (google.protobuf.Timestamp / Duration): timestamp() from RFC 3339 text
 * or epoch seconds, duration() from Go duration text ("1h2m3.5s"), their string forms, arithmetic
 * with the protobuf ranges (years 0001..9999; durations within ±10,000 years) and the calendar
 * getters, in UTC or a fixed "+hh:mm" offset. Named IANA time zones are not supported (the
 * conformance data skips them; Kubernetes selectors do not use timestamps).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cel-internal.h"

#define TS_MIN ((int64_t)-62135596800) /* 0001-01-01T00:00:00Z */
#define TS_MAX ((int64_t)253402300799) /* 9999-12-31T23:59:59Z */
#define DUR_MAX_SEC ((int64_t)315576000000)
#define NANOS ((int64_t)1000000000)

typedef __int128 i128;

static struct cel_value make_ts(struct cel_eval_ctx *ctx, i128 total_ns)
{
    i128 sec = total_ns / NANOS, ns = total_ns % NANOS;

    if (ns < 0) {
        ns += NANOS;
        sec--;
    }
    if (sec < TS_MIN || sec > TS_MAX)
        return cel_ctx_error(ctx, CEL_ERR_RANGE, "timestamp out of range");
    return (struct cel_value){.kind = CEL_TIMESTAMP, .i = (int64_t)sec, .n = (uint32_t)ns};
}

static struct cel_value make_dur(struct cel_eval_ctx *ctx, i128 total_ns)
{
    i128 sec = total_ns / NANOS, ns = total_ns % NANOS;

    if (sec > DUR_MAX_SEC || sec < -DUR_MAX_SEC)
        return cel_ctx_error(ctx, CEL_ERR_RANGE, "duration out of range");
    return (struct cel_value){.kind = CEL_DURATION, .i = (int64_t)sec, .n = (uint32_t)(int32_t)ns};
}

static i128 total(struct cel_value v)
{
    return (i128)v.i * NANOS + (int32_t)v.n;
}

struct cel_value cel_time_add(struct cel_eval_ctx *ctx, enum cel_op op, struct cel_value a,
                              struct cel_value b)
{
    i128 ta = total(a), tb = total(b);

    if (op == CEL_OP_ADD) {
        if (a.kind == CEL_DURATION && b.kind == CEL_DURATION)
            return make_dur(ctx, ta + tb);
        if (a.kind != b.kind)
            return make_ts(ctx, ta + tb);
    } else {
        if (a.kind == CEL_TIMESTAMP && b.kind == CEL_TIMESTAMP) {
            /* cel-go's difference of two times is a Go duration: int64 nanoseconds */
            if (ta - tb > INT64_MAX || ta - tb < INT64_MIN)
                return cel_ctx_error(ctx, CEL_ERR_OVERFLOW, "duration out of range");
            return make_dur(ctx, ta - tb);
        }
        if (b.kind == CEL_DURATION)
            return a.kind == CEL_TIMESTAMP ? make_ts(ctx, ta - tb) : make_dur(ctx, ta - tb);
    }
    struct cel_value args[2] = {a, b};
    return cel_ctx_no_overload(ctx, cel_op_name(op), args, 2);
}

/* ---- civil calendar (proleptic Gregorian), days since 1970-01-01 ---- */

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

static bool is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* ---- formatting ---- */

static int add_frac(struct strbuf *out, int32_t nanos)
{
    char buf[16];
    int len;

    if (nanos == 0)
        return 0;
    len = snprintf(buf, sizeof(buf), "%09d", nanos);
    while (len > 0 && buf[len - 1] == '0')
        len--;
    buf[len] = '\0';
    return strbuf_addf(out, ".%s", buf);
}

int cel_timestamp_format(struct strbuf *out, int64_t sec, int32_t nanos)
{
    int64_t days = sec / 86400, rem = sec % 86400, y;
    unsigned m, d;
    int err;

    if (rem < 0) {
        rem += 86400;
        days--;
    }
    civil_from_days(days, &y, &m, &d);
    err = strbuf_addf(out, "%04" PRId64 "-%02u-%02uT%02d:%02d:%02d", y, m, d, (int)(rem / 3600),
                      (int)(rem / 60 % 60), (int)(rem % 60));
    if (err >= 0)
        err = add_frac(out, nanos);
    return err < 0 ? err : strbuf_addch(out, 'Z');
}

int cel_duration_format(struct strbuf *out, int64_t sec, int32_t nanos)
{
    bool neg = sec < 0 || nanos < 0;
    uint64_t s = sec < 0 ? (uint64_t)0 - (uint64_t)sec : (uint64_t)sec;
    int32_t ns = nanos < 0 ? -nanos : nanos;
    int err = strbuf_addf(out, "%s%" PRIu64, neg ? "-" : "", s);

    if (err >= 0)
        err = add_frac(out, ns);
    return err < 0 ? err : strbuf_addch(out, 's');
}

/* ---- parsing ---- */

static bool digits(const char *s, size_t n, int64_t *ret)
{
    int64_t v = 0;

    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *ret = v;
    return true;
}

/* RFC 3339: YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM). */
static bool parse_rfc3339(const char *s, size_t n, i128 *ret_ns)
{
    int64_t y, mo, d, h, mi, sec, oh = 0, om = 0, frac = 0;
    size_t i = 19, fd = 0;
    int sign = 0;

    if (n < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' ||
        s[16] != ':')
        return false;
    if (!digits(s, 4, &y) || !digits(s + 5, 2, &mo) || !digits(s + 8, 2, &d) ||
        !digits(s + 11, 2, &h) || !digits(s + 14, 2, &mi) || !digits(s + 17, 2, &sec))
        return false;
    if (s[i] == '.') {
        for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++, fd++)
            if (fd < 9)
                frac = frac * 10 + (s[i] - '0');
        if (fd == 0)
            return false;
        for (size_t k = fd; k < 9; k++)
            frac *= 10;
    }
    if (i < n && (s[i] == 'Z' || s[i] == 'z') && i + 1 == n) {
        sign = 0;
    } else if (i + 6 == n && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
        sign = s[i] == '-' ? -1 : 1;
        if (!digits(s + i + 1, 2, &oh) || !digits(s + i + 4, 2, &om) || oh > 23 || om > 59)
            return false;
    } else {
        return false;
    }
    static const unsigned mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || sec > 59)
        return false;
    if (d > mdays[mo - 1] + (mo == 2 && is_leap(y)))
        return false;
    i128 secs = (i128)days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 + mi * 60 +
                sec - sign * (oh * 3600 + om * 60);
    *ret_ns = secs * NANOS + frac;
    return true;
}

/* Go's time.ParseDuration: [-+]? then (number unit)+, units ns us µs ms s m h; "0" alone. */
static bool parse_duration(const char *s, size_t n, i128 *ret_ns)
{
    static const struct {
        const char *u;
        int64_t ns;
    } UNITS[] = {{"ns", 1},       {"us", 1000}, {"\xc2\xb5s", 1000}, {"\xce\xbcs", 1000},
                 {"ms", 1000000}, {"s", NANOS}, {"m", 60 * NANOS},   {"h", 3600 * NANOS}};
    i128 sum = 0;
    size_t i = 0;
    bool neg = false;

    if (i < n && (s[i] == '-' || s[i] == '+'))
        neg = s[i++] == '-';
    if (n - i == 1 && s[i] == '0') {
        *ret_ns = 0;
        return true;
    }
    if (i == n)
        return false;
    while (i < n) {
        i128 whole = 0, frac = 0, scale = 1;
        size_t start = i, best = 0;
        int64_t unit = 0;

        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
            whole = whole * 10 + (s[i] - '0');
            if (whole > (i128)1 << 100)
                return false;
        }
        bool had_int = i > start;
        if (i < n && s[i] == '.') {
            size_t fs = ++i;
            for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
                if (scale < (i128)1 << 90) {
                    frac = frac * 10 + (s[i] - '0');
                    scale *= 10;
                }
            if (!had_int && i == fs)
                return false;
        } else if (!had_int) {
            return false;
        }
        for (size_t u = 0; u < ARRAY_SIZE(UNITS); u++) {
            size_t ul = strlen(UNITS[u].u);
            if (ul > best && n - i >= ul && memcmp(s + i, UNITS[u].u, ul) == 0) {
                best = ul;
                unit = UNITS[u].ns;
            }
        }
        if (!best)
            return false;
        i += best;
        sum += whole * unit + frac * unit / scale;
        if (sum > (i128)1 << 100)
            return false;
    }
    *ret_ns = neg ? -sum : sum;
    return true;
}

static struct cel_value fn_timestamp(struct cel_eval_ctx *ctx, const struct cel_value *a, size_t n)
{
    i128 ns;

    (void)n;
    if (a[0].kind == CEL_TIMESTAMP)
        return a[0];
    if (a[0].kind == CEL_INT)
        return make_ts(ctx, (i128)a[0].i * NANOS);
    if (!parse_rfc3339(a[0].s, a[0].n, &ns))
        return cel_ctx_error(ctx, CEL_ERR_INVALID_ARGUMENT, "invalid timestamp \"%.*s\"",
                             (int)(a[0].n > 64 ? 64 : a[0].n), a[0].s);
    return make_ts(ctx, ns);
}

static struct cel_value fn_duration(struct cel_eval_ctx *ctx, const struct cel_value *a, size_t n)
{
    i128 ns;

    (void)n;
    if (a[0].kind == CEL_DURATION)
        return a[0];
    if (!parse_duration(a[0].s, a[0].n, &ns))
        return cel_ctx_error(ctx, CEL_ERR_INVALID_ARGUMENT, "invalid duration \"%.*s\"",
                             (int)(a[0].n > 64 ? 64 : a[0].n), a[0].s);
    return make_dur(ctx, ns);
}

/* ---- getters ---- */

enum getter {
    G_YEAR,
    G_MONTH,
    G_DAY_OF_YEAR,
    G_DAY_OF_MONTH,
    G_DATE,
    G_DAY_OF_WEEK,
    G_HOURS,
    G_MINUTES,
    G_SECONDS,
    G_MILLIS
};

/* A time zone argument: "UTC", "Z", "[+-]HH:MM" or "HH:MM" as an offset in seconds. */
static bool parse_tz(struct cel_value tz, int64_t *ret_off)
{
    int64_t h, m;
    const char *s = tz.s;
    size_t n = tz.n;
    int sign = 1;

    if ((n == 3 && memcmp(s, "UTC", 3) == 0) || (n == 1 && s[0] == 'Z')) {
        *ret_off = 0;
        return true;
    }
    if (n == 6 && (s[0] == '+' || s[0] == '-')) {
        sign = s[0] == '-' ? -1 : 1;
        s++, n--;
    }
    if (n != 5 || s[2] != ':' || !digits(s, 2, &h) || !digits(s + 3, 2, &m))
        return false;
    *ret_off = sign * (h * 3600 + m * 60);
    return true;
}

static struct cel_value ts_get(struct cel_eval_ctx *ctx, const struct cel_value *a, size_t n,
                               enum getter g)
{
    int64_t off = 0, sec, days, rem, y;
    unsigned m, d;

    if (n == 2 && !parse_tz(a[1], &off))
        return cel_ctx_error(ctx, CEL_ERR_INVALID_ARGUMENT, "unknown time zone \"%.*s\"",
                             (int)(a[1].n > 64 ? 64 : a[1].n), a[1].s);
    sec = a[0].i + off;
    days = sec / 86400;
    rem = sec % 86400;
    if (rem < 0) {
        rem += 86400;
        days--;
    }
    civil_from_days(days, &y, &m, &d);
    switch (g) {
    case G_YEAR:
        return cel_int(y);
    case G_MONTH:
        return cel_int(m - 1);
    case G_DAY_OF_YEAR:
        return cel_int(days - days_from_civil(y, 1, 1));
    case G_DAY_OF_MONTH:
        return cel_int(d - 1);
    case G_DATE:
        return cel_int(d);
    case G_DAY_OF_WEEK:
        return cel_int(((days % 7) + 11) % 7); /* 1970-01-01 was a Thursday (4) */
    case G_HOURS:
        return cel_int(rem / 3600);
    case G_MINUTES:
        return cel_int(rem / 60 % 60);
    case G_SECONDS:
        return cel_int(rem % 60);
    case G_MILLIS:
        return cel_int(a[0].n / 1000000);
    }
    return cel_null();
}

static struct cel_value dur_get(const struct cel_value *a, enum getter g)
{
    switch (g) {
    case G_HOURS:
        return cel_int(a[0].i / 3600);
    case G_MINUTES:
        return cel_int(a[0].i / 60);
    case G_SECONDS:
        return cel_int(a[0].i);
    default:
        return cel_int((int32_t)a[0].n / 1000000);
    }
}

#define GETTER(fname, g)                                                                           \
    static struct cel_value fname(struct cel_eval_ctx *ctx, const struct cel_value *a, size_t n)   \
    {                                                                                              \
        if (a[0].kind == CEL_DURATION)                                                             \
            return dur_get(a, g);                                                                  \
        return ts_get(ctx, a, n, g);                                                               \
    }
GETTER(get_year, G_YEAR)
GETTER(get_month, G_MONTH)
GETTER(get_doy, G_DAY_OF_YEAR)
GETTER(get_dom, G_DAY_OF_MONTH)
GETTER(get_date, G_DATE)
GETTER(get_dow, G_DAY_OF_WEEK)
GETTER(get_hours, G_HOURS)
GETTER(get_minutes, G_MINUTES)
GETTER(get_seconds, G_SECONDS)
GETTER(get_millis, G_MILLIS)

#define TS "google.protobuf.Timestamp"
#define DUR "google.protobuf.Duration"
#define TSGET(name_, fn_)                                                                          \
    {.name = name_, .receiver = true, .sig = "(" TS ") -> int", .fn = fn_},                        \
    {                                                                                              \
        .name = name_, .receiver = true, .sig = "(" TS ", string) -> int", .fn = fn_               \
    }
#define DURGET(name_, fn_)                                                                         \
    {                                                                                              \
        .name = name_, .receiver = true, .sig = "(" DUR ") -> int", .fn = fn_                      \
    }

static const struct cel_overload OVERLOADS[] = {
    {.name = "timestamp", .sig = "(string) -> " TS, .fn = fn_timestamp},
    {.name = "timestamp", .sig = "(" TS ") -> " TS, .fn = fn_timestamp},
    {.name = "timestamp", .sig = "(int) -> " TS, .fn = fn_timestamp},
    {.name = "duration", .sig = "(string) -> " DUR, .fn = fn_duration},
    {.name = "duration", .sig = "(" DUR ") -> " DUR, .fn = fn_duration},
    TSGET("getFullYear", get_year),
    TSGET("getMonth", get_month),
    TSGET("getDayOfYear", get_doy),
    TSGET("getDayOfMonth", get_dom),
    TSGET("getDate", get_date),
    TSGET("getDayOfWeek", get_dow),
    TSGET("getHours", get_hours),
    TSGET("getMinutes", get_minutes),
    TSGET("getSeconds", get_seconds),
    TSGET("getMilliseconds", get_millis),
    DURGET("getHours", get_hours),
    DURGET("getMinutes", get_minutes),
    DURGET("getSeconds", get_seconds),
    DURGET("getMilliseconds", get_millis),
};

const struct cel_library cel_lib_time = {"time", OVERLOADS, ARRAY_SIZE(OVERLOADS)};
