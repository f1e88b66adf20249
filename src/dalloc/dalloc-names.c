/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Name formats of resource.k8s.io/v1 (see dalloc-names.h). Every checker works on (pointer, length)
 * pieces so that a qualified name or a pool name is checked part by part without copying; the
 * public functions take whole NUL-terminated strings. Where a name breaks more than one rule, the
 * length is reported first, as the API server lists it first.
 */
#include <stdbool.h>
#include <string.h>

#include "dalloc-names.h"

#define WHY_LABEL                                                                                  \
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "   \
    "must start and end with an alphanumeric character"
#define WHY_SUBDOMAIN                                                                              \
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "   \
    "'.', and must start and end with an alphanumeric character"
#define WHY_C_IDENTIFIER                                                                           \
    "a valid C identifier must start with alphabetic character or '_', followed by a string of "   \
    "alphanumeric characters or '_'"
#define WHY_KEY_NAME                                                                               \
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "    \
    "alphanumeric character"

static bool lower_alnum(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
}

static bool alnum(char ch)
{
    return lower_alnum(ch) || (ch >= 'A' && ch <= 'Z');
}

/* [a-z0-9]([-a-z0-9]*[a-z0-9])? over s[0..n), without a length limit. */
static bool label_shape(const char *s, size_t n)
{
    if (n == 0 || !lower_alnum(s[0]) || !lower_alnum(s[n - 1]))
        return false;
    for (size_t i = 1; i + 1 < n; i++)
        if (!lower_alnum(s[i]) && s[i] != '-')
            return false;
    return true;
}

/* Labels joined by '.', without a length limit. */
static bool subdomain_shape(const char *s, size_t n)
{
    size_t start = 0;

    for (size_t i = 0; i <= n; i++)
        if (i == n || s[i] == '.') {
            if (!label_shape(s + start, i - start))
                return false;
            start = i + 1;
        }
    return true;
}

static const char *label_n(const char *s, size_t n)
{
    if (n > DALLOC_NAME_LABEL_MAX)
        return "must be no more than 63 characters";
    return label_shape(s, n) ? NULL : WHY_LABEL;
}

static const char *subdomain_n(const char *s, size_t n)
{
    if (n > DALLOC_NAME_SUBDOMAIN_MAX)
        return "must be no more than 253 characters";
    return subdomain_shape(s, n) ? NULL : WHY_SUBDOMAIN;
}

static const char *driver_n(const char *s, size_t n)
{
    if (n > DALLOC_NAME_DRIVER_MAX)
        return "must be no more than 63 characters";
    return subdomain_shape(s, n) ? NULL : WHY_SUBDOMAIN;
}

static const char *c_identifier_n(const char *s, size_t n)
{
    if (n > DALLOC_NAME_ID_MAX)
        return "must be no more than 32 characters";
    if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
        return WHY_C_IDENTIFIER;
    for (size_t i = 0; i < n; i++)
        if (!alnum(s[i]) && s[i] != '_')
            return WHY_C_IDENTIFIER;
    return NULL;
}

const char *dalloc_name_dns_label(const char *s)
{
    return label_n(s, strlen(s));
}

const char *dalloc_name_dns_subdomain(const char *s)
{
    return subdomain_n(s, strlen(s));
}

const char *dalloc_name_driver(const char *s)
{
    return driver_n(s, strlen(s));
}

const char *dalloc_name_c_identifier(const char *s)
{
    return c_identifier_n(s, strlen(s));
}

const char *dalloc_name_qualified(const char *s)
{
    const char *slash = strchr(s, '/');
    const char *why;

    if (!slash)
        return c_identifier_n(s, strlen(s));
    if (strchr(slash + 1, '/'))
        return "must be a C identifier, or a domain and a C identifier separated by one '/'";
    if (slash == s)
        return "the domain must not be empty";
    if ((why = driver_n(s, (size_t)(slash - s))))
        return why;
    if (!slash[1])
        return "the name must not be empty";
    return c_identifier_n(slash + 1, strlen(slash + 1));
}

const char *dalloc_name_fully_qualified(const char *s)
{
    const char *why = dalloc_name_qualified(s);

    if (why)
        return why;
    return strchr(s, '/') ? NULL : "must include a domain";
}

const char *dalloc_name_pool(const char *s)
{
    size_t n = strlen(s), start = 0;

    if (n > DALLOC_NAME_SUBDOMAIN_MAX)
        return "must be no more than 253 characters";
    for (size_t i = 0; i <= n; i++)
        if (i == n || s[i] == '/') {
            if (!subdomain_shape(s + start, i - start))
                return WHY_SUBDOMAIN;
            start = i + 1;
        }
    return NULL;
}

const char *dalloc_name_label_key(const char *s)
{
    const char *slash = strchr(s, '/'), *name = s;
    size_t n;

    if (slash) {
        if (strchr(slash + 1, '/'))
            return "a qualified name " WHY_KEY_NAME
                   ", with an optional DNS subdomain prefix and '/'";
        if (slash == s)
            return "prefix part must be non-empty";
        if ((size_t)(slash - s) > DALLOC_NAME_SUBDOMAIN_MAX)
            return "prefix part must be no more than 253 characters";
        if (!subdomain_shape(s, (size_t)(slash - s)))
            return "prefix part " WHY_SUBDOMAIN;
        name = slash + 1;
    }
    n = strlen(name);
    if (n == 0)
        return "name part must be non-empty";
    if (n > DALLOC_NAME_LABEL_MAX)
        return "name part must be no more than 63 characters";
    if (!alnum(name[0]) || !alnum(name[n - 1]))
        return "name part " WHY_KEY_NAME;
    for (size_t i = 1; i + 1 < n; i++)
        if (!alnum(name[i]) && name[i] != '-' && name[i] != '_' && name[i] != '.')
            return "name part " WHY_KEY_NAME;
    return NULL;
}
