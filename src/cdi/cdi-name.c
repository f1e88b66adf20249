/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CDI names: vendors, classes, kinds, device names and fully-qualified names, checked with the
 * rules of the reference parser (pkg/parser), and the "cdi.k8s.io/<plugin>_<id>" annotations that
 * carry CDI devices from a device plugin to the runtime. These checks sit at the edge: names from
 * configs, claims and Allocate requests go through them before they reach a spec or a runtime,
 * where a bad name would make a whole spec file unloadable.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "cdi-internal.h"

/* Letters, digits and extra in between; first and last must pass their own tests. */
static bool valid_chars(const char *s, size_t len, bool first_letter, const char *extra)
{
    if (len == 0)
        return false;
    if (first_letter ? !cdi_is_alpha(s[0]) : !cdi_is_alnum(s[0]))
        return false;
    if (!cdi_is_alnum(s[len - 1]))
        return false;
    for (size_t i = 1; i + 1 < len; i++)
        if (!cdi_is_alnum(s[i]) && !strchr(extra, s[i]))
            return false;
    return true;
}

static bool valid_vendor_n(const char *s, size_t len)
{
    return valid_chars(s, len, true, "_-.");
}

static bool valid_class_n(const char *s, size_t len)
{
    return len <= CDI_CLASS_MAX && valid_chars(s, len, true, "_-.");
}

bool cdi_valid_vendor(const char *vendor)
{
    return vendor && valid_vendor_n(vendor, strlen(vendor));
}

bool cdi_valid_class(const char *class)
{
    return class && valid_class_n(class, strlen(class));
}

static bool valid_kind_n(const char *s, size_t len)
{
    const char *slash = memchr(s, '/', len);
    if (!slash)
        return false;
    size_t vlen = (size_t)(slash - s);
    return valid_vendor_n(s, vlen) && valid_class_n(slash + 1, len - vlen - 1);
}

bool cdi_valid_kind(const char *kind)
{
    return kind && valid_kind_n(kind, strlen(kind));
}

bool cdi_valid_device_name(const char *name)
{
    return name && valid_chars(name, strlen(name), false, "_-.:");
}

bool cdi_valid_qualified_name(const char *name)
{
    return cdi_parse_qualified_name(name, NULL, NULL, NULL, NULL) == 0;
}

static int dup_n(const char *s, size_t len, char **ret)
{
    if (!ret)
        return 0;
    *ret = strndup(s, len);
    return *ret ? 0 : -ENOMEM;
}

int cdi_parse_qualified_name(const char *name, struct diag *d, char **ret_vendor, char **ret_class,
                             char **ret_device)
{
    _cleanup_free_ char *vendor = NULL;
    _cleanup_free_ char *class = NULL;
    if (!name || !name[0])
        return diag_fail(d, -EINVAL, "empty CDI device name");
    if (name[0] == '/')
        return diag_fail(d, -EINVAL, "\"%s\" is a device path, not a CDI device name", name);
    const char *eq = strchr(name, '=');
    const char *slash = strchr(name, '/');
    if (!eq || !slash || slash > eq)
        return diag_fail(d, -EINVAL, "\"%s\" is not a CDI device name (vendor/class=name)", name);
    size_t vlen = (size_t)(slash - name), clen = (size_t)(eq - slash - 1);
    if (!valid_vendor_n(name, vlen))
        return diag_fail(d, -EINVAL, "CDI device \"%s\": invalid vendor \"%.*s\"", name, (int)vlen,
                         name);
    if (!valid_class_n(slash + 1, clen))
        return diag_fail(d, -EINVAL, "CDI device \"%s\": invalid class \"%.*s\"", name, (int)clen,
                         slash + 1);
    if (!cdi_valid_device_name(eq + 1))
        return diag_fail(d, -EINVAL, "CDI device \"%s\": invalid device name \"%s\"", name, eq + 1);
    if (dup_n(name, vlen, ret_vendor ? &vendor : NULL) < 0 ||
        dup_n(slash + 1, clen, ret_class ? &class : NULL) < 0 ||
        dup_n(eq + 1, strlen(eq + 1), ret_device) < 0)
        return -ENOMEM;
    if (ret_vendor)
        *ret_vendor = TAKE_PTR(vendor);
    if (ret_class)
        *ret_class = TAKE_PTR(class);
    return 0;
}

int cdi_qualified_name(const char *kind, const char *device, struct diag *d, char **ret)
{
    char *s = NULL;
    if (!cdi_valid_kind(kind))
        return diag_fail(d, -EINVAL, "invalid CDI kind \"%s\" (want vendor/class)",
                         kind ? kind : "");
    if (!cdi_valid_device_name(device))
        return diag_fail(d, -EINVAL, "invalid CDI device name \"%s\"", device ? device : "");
    if (asprintf(&s, "%s=%s", kind, device) < 0)
        return -ENOMEM;
    *ret = s;
    return 0;
}

int cdi_split_kind(const char *kind, char **ret_vendor, char **ret_class)
{
    const char *slash = strchr(kind, '/');
    _cleanup_free_ char *vendor = NULL;
    if (!slash)
        return -EINVAL;
    vendor = strndup(kind, (size_t)(slash - kind));
    char *class = strdup(slash + 1);
    if (!vendor || !class) {
        free(class);
        return -ENOMEM;
    }
    *ret_vendor = TAKE_PTR(vendor);
    *ret_class = class;
    return 0;
}

/* A DNS subdomain (the optional prefix of an annotation key): dot-separated labels of lower-case
 * letters, digits and '-', at most 253 characters. */
static bool valid_dns_subdomain(const char *s, size_t len)
{
    if (len == 0 || len > 253)
        return false;
    size_t label = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        bool ok = ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') || c == '-' || c == '.';
        if (!ok)
            return false;
        if (c == '.') {
            if (label == 0 || s[i - 1] == '-')
                return false;
            label = 0;
            continue;
        }
        if (label == 0 && c == '-')
            return false;
        label++;
    }
    return label > 0 && s[len - 1] != '-';
}

/* The name part of an annotation key (and of a CDI annotation): at most 63 characters, alphanumeric
 * at both ends, '-', '_', '.' allowed in between. */
static bool valid_annotation_name(const char *s, size_t len)
{
    return len <= CDI_ANNOTATION_NAME_MAX && valid_chars(s, len, false, "-_.");
}

bool cdi_valid_annotation_key(const char *key)
{
    if (!key)
        return false;
    const char *slash = strchr(key, '/');
    if (!slash)
        return valid_annotation_name(key, strlen(key));
    return valid_dns_subdomain(key, (size_t)(slash - key)) &&
           valid_annotation_name(slash + 1, strlen(slash + 1));
}

int cdi_annotation_key(const char *prefix, const char *plugin, const char *device_id,
                       struct diag *d, char **ret)
{
    _cleanup_free_ char *name = NULL;
    char *key = NULL;
    if (!prefix)
        prefix = CDI_ANNOTATION_PREFIX;
    size_t plen = strlen(prefix);
    if (plen < 2 || prefix[plen - 1] != '/' || !valid_dns_subdomain(prefix, plen - 1))
        return diag_fail(d, -EINVAL, "invalid CDI annotation prefix \"%s\" (want e.g. %s)", prefix,
                         CDI_ANNOTATION_PREFIX);
    if (!plugin || !plugin[0] || !device_id || !device_id[0])
        return diag_fail(d, -EINVAL, "CDI annotation: empty plugin name or device id");
    if (asprintf(&name, "%s_%s", plugin, device_id) < 0) {
        name = NULL;
        return -ENOMEM;
    }
    for (char *p = name; *p; p++)
        if (*p == '/')
            *p = '_';
    if (!valid_annotation_name(name, strlen(name)))
        return diag_fail(d, -EINVAL,
                         "invalid CDI annotation name \"%s\": at most %d characters, letters, "
                         "digits, '-', '_', '.', alphanumeric at both ends",
                         name, CDI_ANNOTATION_NAME_MAX);
    if (asprintf(&key, "%s%s", prefix, name) < 0)
        return -ENOMEM;
    *ret = key;
    return 0;
}

int cdi_annotation_key_random(const char *prefix, const char *plugin, struct diag *d, char **ret)
{
    uint8_t b[16];
    char uuid[37];
    if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
        return diag_fail(d, negative_errno(), "cannot read random bytes for a UUID");
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    snprintf(uuid, sizeof(uuid),
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
             b[15]);
    return cdi_annotation_key(prefix, plugin, uuid, d, ret);
}

int cdi_annotation_value(const char *const *names, size_t n, struct diag *d, char **ret)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    int r = 0;
    if (n == 0)
        return diag_fail(d, -EINVAL, "CDI annotation: no devices");
    for (size_t i = 0; i < n && r >= 0; i++) {
        r = cdi_parse_qualified_name(names[i], d, NULL, NULL, NULL);
        if (r >= 0 && i > 0)
            r = strbuf_addch(&sb, ',');
        if (r >= 0)
            r = strbuf_addstr(&sb, names[i]);
    }
    if (r < 0)
        return r;
    char *s = strbuf_detach(&sb, NULL);
    if (!s)
        return -ENOMEM;
    *ret = s;
    return 0;
}
