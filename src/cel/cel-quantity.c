/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kubernetes resource quantities: parsing, exact comparison and arithmetic, and the canonical
 * string, written from the behaviour cel-quantity.h describes. Values are a 128-bit magnitude and
 * a base-10 exponent; the `dec` flag records which of Kubernetes' two internal forms a value would
 * be in, because isInteger(), asInteger() and asApproximateFloat() can tell them apart.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cel-quantity.h"

typedef unsigned __int128 u128;

#define MAX_DIGITS 38        /* every 38-digit number fits in 128 bits */
#define MAX_EXP 1000000000   /* |exponent| bound, far from int32 overflow in any step */
#define NANO_EXP (-9)        /* Kubernetes rounds its decimal form up to multiples of 10^-9 */
#define BINARY_MAX INT64_MAX /* binary-suffixed decimals are capped here */
#define INT64_MAG ((u128)1 << 63)

static const char format_msg[] =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/* The text of a quantity, split the way Kubernetes' scanner splits it. */
struct qscan {
    bool neg;
    bool any_digit;  /* the number part has at least one digit, zeros included */
    const char *num; /* integer digits without leading zeros; num_len 0 means 0 */
    size_t num_len;
    const char *den; /* fraction digits as written */
    size_t den_len;
    const char *suf;
    size_t suf_len;
};

/* What a suffix means: value * base^exp in the given format. */
struct qsuffix {
    int base; /* 10 or 2 */
    int64_t exp;
    enum cel_quantity_format format;
};

static u128 pow10_u128(unsigned k)
{
    u128 r = 1;

    while (k--)
        r *= 10;
    return r;
}

static unsigned ndigits(u128 v)
{
    unsigned n = 1;
    uint64_t w;

    /* 128-bit division is a library call; most magnitudes fit in 64 bits. */
    while (v > UINT64_MAX) {
        v /= 10;
        n++;
    }
    for (w = (uint64_t)v; w >= 10; w /= 10)
        n++;
    return n;
}

/* Writes v in decimal at buf (room for 40) and returns the length. */
static size_t u128_str(u128 v, char *buf)
{
    char tmp[40];
    size_t n = 0;

    do {
        tmp[n++] = (char)('0' + (int)(v % 10));
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        buf[i] = tmp[n - 1 - i];
    return n;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_suffix_char(char c)
{
    switch (c) {
    case 'e':
    case 'E':
    case 'i':
    case 'n':
    case 'u':
    case 'm':
    case 'k':
    case 'K':
    case 'M':
    case 'G':
    case 'T':
    case 'P':
        return true;
    default:
        return false;
    }
}

static size_t skip_digits(const char *s, size_t pos, size_t len)
{
    while (pos < len && is_digit(s[pos]))
        pos++;
    return pos;
}

/* quantity ::= [+-] "0"* digits* ["." digits*] suffixchar* [+-] digits*  (nothing may follow) */
static int scan(const char *s, size_t len, struct qscan *q)
{
    size_t pos = 0, start;

    *q = (struct qscan){.num = s, .den = s, .suf = s + len};
    if (pos < len && (s[pos] == '-' || s[pos] == '+'))
        q->neg = s[pos++] == '-';
    while (pos < len && s[pos] == '0') {
        pos++;
        q->any_digit = true;
    }
    start = pos;
    pos = skip_digits(s, pos, len);
    q->num = s + start;
    q->num_len = pos - start;
    q->any_digit |= q->num_len > 0;
    if (pos < len && s[pos] == '.') {
        start = ++pos;
        pos = skip_digits(s, pos, len);
        q->den = s + start;
        q->den_len = pos - start;
        q->any_digit |= q->den_len > 0;
    }
    start = pos;
    while (pos < len && is_suffix_char(s[pos]))
        pos++;
    if (pos < len && (s[pos] == '-' || s[pos] == '+'))
        pos++;
    pos = skip_digits(s, pos, len);
    if (pos != len)
        return -EINVAL;
    q->suf = s + start;
    q->suf_len = len - start;
    return 0;
}

/* Go's strconv.ParseInt(s, 10, 64): optional sign, at least one digit, in range. */
static bool parse_int64(const char *s, size_t len, int64_t *ret)
{
    bool neg = false;
    uint64_t v = 0, limit;
    size_t i = 0;

    if (i < len && (s[i] == '+' || s[i] == '-'))
        neg = s[i++] == '-';
    if (i == len)
        return false;
    limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; i < len; i++) {
        if (!is_digit(s[i]))
            return false;
        if (v > (limit - (uint64_t)(s[i] - '0')) / 10)
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *ret = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

static bool interpret_suffix(const char *s, size_t len, struct qsuffix *ret)
{
    static const struct {
        const char *name;
        int base, exp;
    } table[] = {
        {"", 10, 0},   {"n", 10, -9}, {"u", 10, -6}, {"m", 10, -3}, {"k", 10, 3},  {"M", 10, 6},
        {"G", 10, 9},  {"T", 10, 12}, {"P", 10, 15}, {"E", 10, 18}, {"Ki", 2, 10}, {"Mi", 2, 20},
        {"Gi", 2, 30}, {"Ti", 2, 40}, {"Pi", 2, 50}, {"Ei", 2, 60},
    };
    int64_t e;

    for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
        if (strlen(table[i].name) == len && memcmp(table[i].name, s, len) == 0) {
            *ret = (struct qsuffix){table[i].base, table[i].exp,
                                    table[i].base == 2 ? CEL_QUANTITY_BINARY_SI
                                                       : CEL_QUANTITY_DECIMAL_SI};
            return true;
        }
    }
    if (len < 2 || (s[0] != 'e' && s[0] != 'E') || !parse_int64(s + 1, len - 1, &e))
        return false;
    /* Kubernetes keeps the exponent in an int32, dropping the high bits. */
    *ret = (struct qsuffix){10, (int32_t)(uint32_t)(uint64_t)e, CEL_QUANTITY_DECIMAL_EXP};
    return true;
}

static int out_of_range(struct diag *d)
{
    return diag_fail(d, -ERANGE, "quantity out of range");
}

static void set_int64(struct cel_quantity *q, int64_t v, int32_t exp)
{
    q->neg = v < 0;
    q->mag = v < 0 ? (u128)(0 - (uint64_t)v) : (u128)v;
    q->exp = exp;
    q->dec_exp = exp;
    q->dec = false;
}

static int64_t get_int64(const struct cel_quantity *q)
{
    uint64_t m = (uint64_t)q->mag;

    return q->neg ? (int64_t)(0 - m) : (int64_t)m;
}

/* Removes trailing zeros of a decimal-form magnitude: the value stays, headroom grows. */
static void normalize(struct cel_quantity *q)
{
    if (q->mag == 0) {
        q->neg = false;
        return;
    }
    while (q->mag % 10 == 0 && q->exp < MAX_EXP) {
        q->mag /= 10;
        q->exp++;
    }
}

/*
 * Kubernetes' fast path: few enough digits for an int64 and a scale of at least 10^-9. Returns
 * false when the value must take the slow path instead.
 */
static bool parse_fast(const char *s, size_t len, const struct qscan *sc, const struct qsuffix *sf,
                       struct cel_quantity *q)
{
    int64_t num_len = sc->num_len ? (int64_t)sc->num_len : 1, precision, scale = 0;
    int64_t mantissa = 1, value = 0, result;
    char shifted[20];
    size_t n = 0;

    if (sf->base == 10) {
        scale = sf->exp;
        precision = 18 - (num_len + (int64_t)sc->den_len);
    } else if (sc->den_len == 0) {
        mantissa = (int64_t)1 << sf->exp;
        precision = 15 - num_len - (sf->exp * 3 / 10) - 1;
    } else {
        return false;
    }
    if (precision < 0)
        return false;
    scale -= (int64_t)sc->den_len;
    if (scale < NANO_EXP || scale > MAX_EXP)
        return false;
    if (sc->num_len == 0)
        shifted[n++] = '0';
    memcpy(shifted + n, sc->num, sc->num_len);
    n += sc->num_len;
    memcpy(shifted + n, sc->den, sc->den_len);
    n += sc->den_len;
    for (size_t i = 0; i < n; i++)
        value = value * 10 + (shifted[i] - '0');
    if (__builtin_mul_overflow(value, mantissa, &result))
        return false;
    *q = (struct cel_quantity){.format = (uint8_t)sf->format};
    set_int64(q, sc->neg ? -result : result, (int32_t)scale);
    if (len <= CEL_QUANTITY_TEXT_MAX &&
        (sf->base == 2 ? (value & 7) != 0
                       : scale % 3 == 0 && shifted[0] != '0' &&
                             !(n >= 3 && memcmp(shifted + n - 3, "000", 3) == 0))) {
        q->text = s;
        q->text_len = (uint8_t)len;
    }
    return true;
}

/* Digits d[0..n) as a number (n <= MAX_DIGITS). */
static u128 digits_value(const char *d, size_t n)
{
    u128 v = 0;

    for (size_t i = 0; i < n; i++)
        v = v * 10 + (u128)(unsigned)(d[i] - '0');
    return v;
}

/* Rounds mag * 10^*exp up (away from zero) to a multiple of 10^-9. */
static void round_up_nano(u128 *mag, int64_t *exp)
{
    int64_t cut = NANO_EXP - *exp;

    if (cut <= 0)
        return;
    if (cut > MAX_DIGITS) {
        *mag = 1;
    } else {
        u128 p = pow10_u128((unsigned)cut);
        *mag = *mag / p + (*mag % p != 0);
    }
    *exp = NANO_EXP;
}

/* Binary-suffixed values are capped at 2^63 - 1 in magnitude; below 1 they become decimal SI. */
static void clamp_binary(struct cel_quantity *q)
{
    struct cel_quantity cap = {.mag = BINARY_MAX}, one = {.mag = 1};
    struct cel_quantity abs = {.mag = q->mag, .exp = q->exp};

    if (cel_quantity_cmp(&abs, &cap) > 0) {
        q->mag = BINARY_MAX;
        q->exp = 0;
        q->dec_exp = 0;
    }
    if (cel_quantity_cmp(&abs, &one) < 0)
        q->format = CEL_QUANTITY_DECIMAL_SI;
}

/* The significant digits of a number: digits[0..n) * 10^exp, no leading or trailing zeros. */
struct qdigits {
    char digits[MAX_DIGITS];
    size_t n;
    size_t zeros; /* zeros seen after the last non-zero digit, not yet appended */
    int64_t exp;
};

/* Appends the digits of s[0..len), whose last digit has weight 10^last_exp. */
static int add_digits(struct qdigits *q, const char *s, size_t len, int64_t last_exp)
{
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '0') {
            q->zeros += q->n > 0;
            continue;
        }
        if (q->n + q->zeros + 1 > MAX_DIGITS)
            return -ERANGE;
        memset(q->digits + q->n, '0', q->zeros);
        q->n += q->zeros;
        q->zeros = 0;
        q->digits[q->n++] = s[i];
        q->exp = last_exp + (int64_t)(len - 1 - i);
    }
    return 0;
}

/*
 * Kubernetes' slow path: the exact decimal, times the suffix, rounded up to nano units; binary
 * values are capped at 2^63 - 1 and those below 1 become decimal SI.
 */
static int parse_slow(const struct qscan *sc, const struct qsuffix *sf, struct diag *d,
                      struct cel_quantity *q)
{
    int64_t e10 = sf->base == 10 ? sf->exp : 0;
    size_t den_keep = sc->den_len;
    bool sticky = false;
    struct qdigits dg = {.n = 0};
    u128 mag;
    int64_t exp;

    if (!sc->any_digit)
        return diag_fail(d, -EINVAL, "unable to parse numeric part of quantity");
    *q = (struct cel_quantity){.format = (uint8_t)sf->format, .dec = true};
    /* Fraction digits below 10^-9 only decide whether a decimal value rounds up: they need not
     * fit in the mantissa. */
    if (sf->base == 10 && e10 >= NANO_EXP && (int64_t)den_keep > e10 - NANO_EXP) {
        den_keep = (size_t)(e10 - NANO_EXP);
        for (size_t i = den_keep; i < sc->den_len; i++)
            sticky |= sc->den[i] != '0';
    }
    if (add_digits(&dg, sc->num, sc->num_len, e10) < 0 ||
        add_digits(&dg, sc->den, den_keep, e10 - (int64_t)den_keep) < 0)
        return out_of_range(d);
    if (dg.n == 0 && !sticky) {
        /* Zero is not rounded, keeps the scale of its text, and is never binary. */
        q->format =
            (uint8_t)(sf->format == CEL_QUANTITY_BINARY_SI ? CEL_QUANTITY_DECIMAL_SI : sf->format);
        q->dec_exp = (int32_t)(e10 - (int64_t)sc->den_len);
        return 0;
    }
    mag = digits_value(dg.digits, dg.n);
    exp = dg.n ? dg.exp : NANO_EXP;
    if (sf->base == 2) {
        if (mag > (~(u128)0 >> sf->exp))
            return out_of_range(d);
        mag <<= sf->exp;
    }
    if (sticky) {
        /* The kept digits end at or above 10^-9: add one nano unit. */
        if (exp - NANO_EXP > MAX_DIGITS ||
            __builtin_mul_overflow(mag, pow10_u128((unsigned)(exp - NANO_EXP)), &mag) ||
            __builtin_add_overflow(mag, 1, &mag))
            return out_of_range(d);
        exp = NANO_EXP;
    }
    round_up_nano(&mag, &exp);
    if (exp > MAX_EXP || exp < -MAX_EXP)
        return out_of_range(d);
    q->mag = mag;
    q->exp = (int32_t)exp;
    q->dec_exp = NANO_EXP;
    q->neg = sc->neg;
    normalize(q);
    if (sf->format == CEL_QUANTITY_BINARY_SI)
        clamp_binary(q);
    return 0;
}

int cel_quantity_parse(const char *s, size_t len, struct diag *d, struct cel_quantity *ret)
{
    struct qscan sc;
    struct qsuffix sf;
    struct cel_quantity q;
    int r;

    if (len == 0 || scan(s, len, &sc) < 0)
        return diag_fail(d, -EINVAL, "%s", format_msg);
    if (!interpret_suffix(sc.suf, sc.suf_len, &sf))
        return diag_fail(d, -EINVAL, "unable to parse quantity's suffix");
    if (sf.exp > MAX_EXP || sf.exp < -MAX_EXP)
        return out_of_range(d);
    if (!parse_fast(s, len, &sc, &sf, &q)) {
        r = parse_slow(&sc, &sf, d, &q);
        if (r < 0)
            return r;
    }
    *ret = q;
    return 0;
}

void cel_quantity_drop_text(struct cel_quantity *q)
{
    q->text = NULL;
    q->text_len = 0;
}

struct cel_quantity cel_quantity_from_int(int64_t v)
{
    struct cel_quantity q = {.format = CEL_QUANTITY_DECIMAL_SI};

    set_int64(&q, v, 0);
    return q;
}

/* Compares magnitudes ma * 10^ea and mb * 10^eb. */
static int cmp_mag(u128 ma, int32_t ea, u128 mb, int32_t eb)
{
    int64_t da, db;
    u128 p, quot;

    if (ma == 0 || mb == 0)
        return (ma != 0) - (mb != 0);
    if (ea == eb) /* the common case: both from the same kind of suffix */
        return (ma > mb) - (ma < mb);
    da = (int64_t)ndigits(ma) + ea;
    db = (int64_t)ndigits(mb) + eb;
    if (da != db)
        return da < db ? -1 : 1;
    if (ea < eb)
        return -cmp_mag(mb, eb, ma, ea);
    /* Same order of magnitude, so ea - eb <= 38: compare ma with mb / 10^(ea - eb). */
    p = pow10_u128((unsigned)(ea - eb));
    quot = mb / p;
    if (ma != quot)
        return ma < quot ? -1 : 1;
    return mb % p ? -1 : 0;
}

int cel_quantity_sign(const struct cel_quantity *q)
{
    if (q->mag == 0)
        return 0;
    return q->neg ? -1 : 1;
}

int cel_quantity_cmp(const struct cel_quantity *a, const struct cel_quantity *b)
{
    int sa = cel_quantity_sign(a), sb = cel_quantity_sign(b);

    if (sa != sb)
        return sa < sb ? -1 : 1;
    if (sa == 0)
        return 0;
    return sa * cmp_mag(a->mag, a->exp, b->mag, b->exp);
}

/* v * 10^k exactly in an int64, as Kubernetes' positiveScaleInt64 allows. */
static bool scale_int64(int64_t v, int64_t k, int64_t *ret)
{
    for (int64_t i = 0; i < k && v != 0; i++) {
        if (__builtin_mul_overflow(v, 10, &v))
            return false;
    }
    *ret = v;
    return true;
}

/* Kubernetes' int64Amount.Add on (va, ea) + (vb, eb): false when it overflows. */
static bool int64_add(int64_t va, int32_t ea, int64_t vb, int32_t eb, int64_t *ret_v,
                      int32_t *ret_e)
{
    int64_t c;

    if (vb == 0) {
        *ret_v = va;
        *ret_e = ea;
        return true;
    }
    if (va == 0) {
        *ret_v = vb;
        *ret_e = eb;
        return true;
    }
    if (ea > eb) {
        if (!scale_int64(va, (int64_t)ea - eb, &va))
            return false;
        ea = eb;
    } else if (eb > ea) {
        if (!scale_int64(vb, (int64_t)eb - ea, &vb))
            return false;
    }
    if (__builtin_add_overflow(va, vb, &c))
        return false;
    *ret_v = c;
    *ret_e = ea;
    return true;
}

/* Rewrites v with the exponent e <= v->exp; false when the magnitude does not fit. */
static bool lower_exp(struct cel_quantity *v, int32_t e)
{
    int64_t k = (int64_t)v->exp - e;

    if (k > MAX_DIGITS || __builtin_mul_overflow(v->mag, pow10_u128((unsigned)k), &v->mag))
        return false;
    v->exp = e;
    return true;
}

/* Exact a + (negate ? -b : b) in the decimal form. */
static int dec_add(const struct cel_quantity *a, const struct cel_quantity *b, bool negate,
                   struct diag *d, struct cel_quantity *r)
{
    struct cel_quantity x = *a, y = *b;
    bool yneg = negate ? !y.neg : y.neg;
    int32_t e;

    normalize(&x);
    normalize(&y);
    if (y.mag == 0)
        y.exp = x.exp;
    if (x.mag == 0)
        x.exp = y.exp;
    e = x.exp < y.exp ? x.exp : y.exp;
    if (!lower_exp(&x, e) || !lower_exp(&y, e))
        return out_of_range(d);
    if (x.neg == yneg) {
        if (__builtin_add_overflow(x.mag, y.mag, &r->mag))
            return out_of_range(d);
        r->neg = x.neg;
    } else if (x.mag >= y.mag) {
        r->mag = x.mag - y.mag;
        r->neg = x.neg;
    } else {
        r->mag = y.mag - x.mag;
        r->neg = yneg;
    }
    r->exp = e;
    r->dec = true;
    r->dec_exp = a->dec_exp < b->dec_exp ? a->dec_exp : b->dec_exp;
    normalize(r);
    return 0;
}

static int add_sub(const struct cel_quantity *a, const struct cel_quantity *b, bool sub,
                   struct diag *d, struct cel_quantity *ret)
{
    struct cel_quantity r = *a;
    int64_t vb, v;
    int32_t e;
    int ret_code;

    cel_quantity_drop_text(&r);
    if (a->mag == 0)
        r.format = b->format;
    if (!a->dec && !b->dec) {
        vb = get_int64(b);
        /* Kubernetes negates with wrap-around: -(-2^63) stays -2^63. */
        if (sub)
            vb = (int64_t)(0 - (uint64_t)vb);
        if (int64_add(get_int64(a), a->exp, vb, b->exp, &v, &e)) {
            set_int64(&r, v, e);
            *ret = r;
            return 0;
        }
    }
    ret_code = dec_add(a, b, sub, d, &r);
    if (ret_code < 0)
        return ret_code;
    *ret = r;
    return 0;
}

int cel_quantity_add(const struct cel_quantity *a, const struct cel_quantity *b, struct diag *d,
                     struct cel_quantity *ret)
{
    return add_sub(a, b, false, d, ret);
}

int cel_quantity_sub(const struct cel_quantity *a, const struct cel_quantity *b, struct diag *d,
                     struct cel_quantity *ret)
{
    return add_sub(a, b, true, d, ret);
}

bool cel_quantity_as_int64(const struct cel_quantity *q, int64_t *ret)
{
    int64_t v;

    if (q->dec || q->exp < 0)
        return false;
    if (!scale_int64(get_int64(q), q->exp, &v))
        return false;
    *ret = v;
    return true;
}

/* Go's math.Pow10: products and quotients of the same correctly rounded constants. */
static double go_pow10(int64_t n)
{
    static const double tab[32] = {
        1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10,
        1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21,
        1e22, 1e23, 1e24, 1e25, 1e26, 1e27, 1e28, 1e29, 1e30, 1e31,
    };
    static const double pos32[10] = {1e0,   1e32,  1e64,  1e96,  1e128,
                                     1e160, 1e192, 1e224, 1e256, 1e288};
    static const double neg32[11] = {1e-0,   1e-32,  1e-64,  1e-96,  1e-128, 1e-160,
                                     1e-192, 1e-224, 1e-256, 1e-288, 1e-320};

    if (n >= 0 && n <= 308)
        return pos32[n / 32] * tab[n % 32];
    if (n < 0 && n >= -323)
        return neg32[-n / 32] / tab[-n % 32];
    return n > 0 ? INFINITY : 0.0;
}

double cel_quantity_approx_double(const struct cel_quantity *q)
{
    char buf[400];
    double base;
    int64_t zeros = (int64_t)q->exp - q->dec_exp;
    size_t n;

    if (!q->dec) {
        base = (double)get_int64(q);
    } else if (q->mag == 0) {
        base = 0.0;
    } else if (zeros + ndigits(q->mag) > 320) {
        base = q->neg ? -INFINITY : INFINITY;
    } else {
        /* The decimal's unscaled integer, correctly rounded to a double as Go's big.Float does. */
        n = 0;
        if (q->neg)
            buf[n++] = '-';
        n += u128_str(q->mag, buf + n);
        memset(buf + n, '0', (size_t)zeros);
        buf[n + (size_t)zeros] = '\0';
        base = strtod(buf, NULL);
    }
    if (q->dec_exp == 0)
        return base;
    return base * go_pow10(q->dec_exp);
}

static size_t put_exp(char *buf, size_t n, int32_t e)
{
    char tmp[16];
    size_t k = 0;
    uint32_t u = e < 0 ? (uint32_t)0 - (uint32_t)e : (uint32_t)e;

    buf[n++] = 'e';
    if (e < 0)
        buf[n++] = '-';
    do {
        tmp[k++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    while (k)
        buf[n++] = tmp[--k];
    return n;
}

/* n * 1024^k with the largest k <= 6, or false when q is not an integer >= 1024 in magnitude (or
 * too large to say). */
static bool binary_parts(const struct cel_quantity *q, u128 *ret_n, unsigned *ret_k)
{
    u128 n = q->mag;
    unsigned k = 0;

    if (q->exp >= 0) {
        if (q->exp > MAX_DIGITS || __builtin_mul_overflow(n, pow10_u128((unsigned)q->exp), &n))
            return false;
    } else {
        u128 p;
        if (-q->exp > MAX_DIGITS)
            return false;
        p = pow10_u128((unsigned)-q->exp);
        if (n % p)
            return false;
        n /= p;
    }
    if (n < 1024)
        return false;
    while (k < 6 && n % 1024 == 0) {
        n /= 1024;
        k++;
    }
    *ret_n = n;
    *ret_k = k;
    return true;
}

static size_t format_binary(const struct cel_quantity *q, u128 n, unsigned k, char *buf)
{
    static const char *const suffix[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    size_t len = 0;

    if (q->neg)
        buf[len++] = '-';
    len += u128_str(n, buf + len);
    memcpy(buf + len, suffix[k], strlen(suffix[k]));
    len += strlen(suffix[k]);
    buf[len] = '\0';
    return len;
}

static size_t format_decimal(const struct cel_quantity *q, enum cel_quantity_format format,
                             char *buf)
{
    static const char *const si[] = {"n", "u", "m", "", "k", "M", "G", "T", "P", "E"};
    u128 m = q->mag;
    int64_t e = q->exp, pad;
    size_t len = 0;

    while (m % 10 == 0) {
        m /= 10;
        e++;
    }
    pad = ((e % 3) + 3) % 3;
    e -= pad;
    if (q->neg)
        buf[len++] = '-';
    len += u128_str(m, buf + len);
    for (; pad > 0; pad--)
        buf[len++] = '0';
    if (format == CEL_QUANTITY_DECIMAL_SI && e >= -9 && e <= 18) {
        const char *s = si[(e + 9) / 3];
        memcpy(buf + len, s, strlen(s));
        len += strlen(s);
    } else if (e != 0) {
        len = put_exp(buf, len, (int32_t)e);
    }
    buf[len] = '\0';
    return len;
}

size_t cel_quantity_format(const struct cel_quantity *q, char buf[static CEL_QUANTITY_STR_MAX])
{
    enum cel_quantity_format format = q->format;
    u128 n;
    unsigned k;

    if (q->text_len) {
        memcpy(buf, q->text, q->text_len);
        buf[q->text_len] = '\0';
        return q->text_len;
    }
    if (q->mag == 0) {
        buf[0] = '0';
        buf[1] = '\0';
        return 1;
    }
    if (format == CEL_QUANTITY_BINARY_SI) {
        if (binary_parts(q, &n, &k))
            return format_binary(q, n, k, buf);
        format = CEL_QUANTITY_DECIMAL_SI;
    }
    return format_decimal(q, format, buf);
}
