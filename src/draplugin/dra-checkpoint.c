/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The DRA driver's checkpoint file. After a crash or a restart the driver answers a retried
 * NodePrepareResources from this file, so trusting a damaged one would hand a pod the wrong
 * devices or leak a prepared claim. Hence: the checksum covers every member that carries meaning
 * (the boot ID and the version too, not only the claims, so that a flipped byte in the boot ID is
 * caught rather than silently dropping every claim), every entry is checked field by field before
 * it is used, and claim UIDs are checked before anyone turns them into file names. The format is
 * described in docs/dra-driver.md ("Checkpoint").
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dra-checkpoint.h"

#define CKPT_VERSION 1
/* An entry is a few hundred bytes and a node holds at most a few hundred claims; a file this big
 * was not written by gpuplane, and the cap bounds what a load may allocate. */
#define CKPT_MAX_BYTES ((size_t)16 << 20)
#define BOOT_ID_MAX 64

/* CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), four bits at a time: the table is small
 * enough to check by eye and fast enough for files of a few kilobytes. */
static const uint32_t crc_nibble[16] = {
    0x00000000, 0x1db71064, 0x3b6e20c8, 0x26d930ac, 0x76dc4190, 0x6b6b51f4, 0x4db26158, 0x5005713c,
    0xedb88320, 0xf00f9344, 0xd6d6a3e8, 0xcb61b38c, 0x9b64c2b0, 0x86d3d2d4, 0xa00ae278, 0xbdbdf21c,
};

static uint32_t crc32_ieee(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint32_t crc = 0xffffffffu;

    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        crc = (crc >> 4) ^ crc_nibble[crc & 0xf];
        crc = (crc >> 4) ^ crc_nibble[crc & 0xf];
    }
    return crc ^ 0xffffffffu;
}

bool dra_claim_uid_valid(const char *uid)
{
    if (!uid || strnlen(uid, 37) != 36)
        return false;
    for (size_t i = 0; i < 36; i++) {
        char c = uid[i];

        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-')
                return false;
        } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return false;
        }
    }
    return true;
}

/* The kernel's boot ID is a UUID; anything of letters, digits and dashes is accepted so that test
 * roots may use readable IDs. The file writes it unescaped, which this makes safe. */
static bool boot_id_valid(const char *s)
{
    size_t n;

    if (!s)
        return false;
    n = strnlen(s, BOOT_ID_MAX + 1);
    if (n == 0 || n > BOOT_ID_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];

        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              c == '-'))
            return false;
    }
    return true;
}

int dra_boot_id(const char *root, char **ret)
{
    _cleanup_free_ char *path = NULL;
    _cleanup_free_ char *data = NULL;
    size_t len;
    int r;

    if (!root || !root[0])
        root = "/";
    if (asprintf(&path, "%s%sproc/sys/kernel/random/boot_id", root,
                 root[strlen(root) - 1] == '/' ? "" : "/") < 0) {
        path = NULL;
        return -ENOMEM;
    }
    r = file_read_all(path, 4096, &data, &len);
    if (r < 0)
        return r;
    while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == ' ' || data[len - 1] == '\t'))
        data[--len] = '\0';
    if (strlen(data) != len || !boot_id_valid(data))
        return -EBADMSG;
    *ret = TAKE_PTR(data);
    return 0;
}

/* Writes s into buf for a message: printable ASCII as is, anything else as '?', cut at the end of
 * buf. A UID that failed the check may hold anything, including terminal escapes. */
static const char *printable(const char *s, char *buf, size_t n)
{
    size_t i;

    for (i = 0; s[i] && i + 1 < n; i++)
        buf[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    buf[i] = '\0';
    return buf;
}

/* Where a check is looking: the file (NULL for a caller's values) and the claim. */
struct where {
    struct diag *d;
    const char *file;
    const char *uid;
};

/* -EBADMSG with "<file>: claim <uid>: <message>"; put and serialize turn it into -EINVAL. */
static int fail(const struct where *w, const char *fmt, ...) _printf_(2, 3);
static int fail(const struct where *w, const char *fmt, ...)
{
    char msg[DIAG_MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (w->file && w->uid)
        return diag_fail(w->d, -EBADMSG, "%s: claim %s: %s", w->file, w->uid, msg);
    if (w->file)
        return diag_fail(w->d, -EBADMSG, "%s: %s", w->file, msg);
    if (w->uid)
        return diag_fail(w->d, -EBADMSG, "claim %s: %s", w->uid, msg);
    return diag_fail(w->d, -EBADMSG, "%s", msg);
}

static bool key_known(const char *key, const char *const *keys, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(key, keys[i]) == 0)
            return true;
    return false;
}

/* Refuses members not in keys: the format has one version, so an unknown member means damage or a
 * writer this reader does not understand. */
static int check_keys(const struct where *w, json_t *obj, const char *field,
                      const char *const *keys, size_t n)
{
    const char *key;
    json_t *v;
    char buf[64];

    json_object_foreach(obj, key, v)
    {
        if (key_known(key, keys, n))
            continue;
        printable(key, buf, sizeof(buf));
        /* field is "" or ends in '.': "devices[0]: unknown field ..." */
        if (field[0])
            return fail(w, "%.*s: unknown field \"%s\"", (int)strlen(field) - 1, field, buf);
        return fail(w, "unknown field \"%s\"", buf);
    }
    return 0;
}

static int check_string(const struct where *w, json_t *obj, const char *field, const char *key,
                        bool required)
{
    json_t *v = json_object_get(obj, key);

    if (!v) {
        if (!required)
            return 0;
        return fail(w, "%s%s: missing", field, key);
    }
    if (!json_is_string(v))
        return fail(w, "%s%s: not a string", field, key);
    if (json_string_length(v) == 0)
        return fail(w, "%s%s: empty", field, key);
    return 0;
}

static int check_strv(const struct where *w, json_t *obj, const char *field, const char *key)
{
    json_t *v = json_object_get(obj, key);
    json_t *s;
    size_t i;

    if (!v)
        return fail(w, "%s%s: missing", field, key);
    if (!json_is_array(v))
        return fail(w, "%s%s: not an array", field, key);
    json_array_foreach(v, i, s)
    {
        if (!json_is_string(s))
            return fail(w, "%s%s[%zu]: not a string", field, key, i);
        if (json_string_length(s) == 0)
            return fail(w, "%s%s[%zu]: empty", field, key, i);
    }
    return 0;
}

static int check_device(const struct where *w, json_t *dev, size_t i)
{
    static const char *const keys[] = {"requests", "poolName", "deviceName", "cdiDeviceIDs",
                                       "shareID"};
    char field[48];
    int r;

    snprintf(field, sizeof(field), "devices[%zu].", i);
    if (!json_is_object(dev))
        return fail(w, "devices[%zu]: not an object", i);
    r = check_keys(w, dev, field, keys, ARRAY_SIZE(keys));
    if (r >= 0)
        r = check_strv(w, dev, field, "requests");
    if (r >= 0)
        r = check_string(w, dev, field, "poolName", true);
    if (r >= 0)
        r = check_string(w, dev, field, "deviceName", true);
    if (r >= 0)
        r = check_strv(w, dev, field, "cdiDeviceIDs");
    if (r >= 0)
        r = check_string(w, dev, field, "shareID", false);
    return r;
}

static int check_devices(const struct where *w, json_t *devices)
{
    json_t *dev;
    size_t i;
    int r;

    if (!json_is_array(devices))
        return fail(w, "devices: not an array");
    json_array_foreach(devices, i, dev)
    {
        r = check_device(w, dev, i);
        if (r < 0)
            return r;
    }
    return 0;
}

static bool state_valid(const char *s)
{
    return s && (strcmp(s, DRA_STATE_STARTED) == 0 || strcmp(s, DRA_STATE_COMPLETED) == 0);
}

static int check_entry(const struct where *w, json_t *entry)
{
    static const char *const keys[] = {"state", "namespace", "name", "devices"};
    json_t *devices;
    int r;

    if (!json_is_object(entry))
        return fail(w, "not an object");
    r = check_keys(w, entry, "", keys, ARRAY_SIZE(keys));
    if (r >= 0)
        r = check_string(w, entry, "", "state", true);
    if (r >= 0 && !state_valid(json_string_value(json_object_get(entry, "state"))))
        r = fail(w, "state: want \"%s\" or \"%s\"", DRA_STATE_STARTED, DRA_STATE_COMPLETED);
    if (r >= 0)
        r = check_string(w, entry, "", "namespace", true);
    if (r >= 0)
        r = check_string(w, entry, "", "name", true);
    if (r < 0)
        return r;
    devices = json_object_get(entry, "devices");
    if (!devices)
        return fail(w, "devices: missing");
    return check_devices(w, devices);
}

/* Checks every entry of claims (UID -> entry); file is NULL for the caller's own values. */
static int check_claims(json_t *claims, const char *file, struct diag *d)
{
    struct where w = {.d = d, .file = file};
    const char *uid;
    json_t *entry;
    char buf[48];
    int r;

    json_object_foreach(claims, uid, entry)
    {
        w.uid = NULL;
        if (!dra_claim_uid_valid(uid))
            return fail(&w, "invalid claim UID \"%s\" (want a lower-case UUID)",
                        printable(uid, buf, sizeof(buf)));
        w.uid = uid;
        r = check_entry(&w, entry);
        if (r < 0)
            return r;
    }
    return 0;
}

int dra_checkpoint_checksum(const json_t *doc, uint32_t *ret)
{
    _cleanup_json_ json_t *rest = NULL;
    _cleanup_free_ char *text = NULL;

    if (!json_is_object(doc))
        return -EINVAL;
    /* A shallow copy: the members are shared, only the object itself is new. */
    rest = json_copy((json_t *)doc);
    if (!rest)
        return -ENOMEM;
    (void)json_object_del(rest, "checksum");
    text = json_dumps(rest, JSON_COMPACT | JSON_SORT_KEYS);
    if (!text)
        return -ENOMEM;
    *ret = crc32_ieee(text, strlen(text));
    return 0;
}

int dra_checkpoint_new(const char *boot_id, struct dra_checkpoint **ret)
{
    _cleanup_(dra_checkpoint_freep) struct dra_checkpoint *cp = NULL;

    if (!boot_id_valid(boot_id))
        return -EINVAL;
    cp = calloc(1, sizeof(*cp));
    if (!cp)
        return -ENOMEM;
    cp->claims = json_object();
    cp->boot_id = strdup(boot_id);
    if (!cp->claims || !cp->boot_id)
        return -ENOMEM;
    *ret = TAKE_PTR(cp);
    return 0;
}

struct dra_checkpoint *dra_checkpoint_free(struct dra_checkpoint *cp)
{
    if (!cp)
        return NULL;
    json_decref(cp->claims);
    free(cp->boot_id);
    free(cp);
    return NULL;
}

/* The version, then the checksum, then the rest: a newer file says "unsupported version" rather
 * than "checksum mismatch", and nothing past the checksum is looked at in a damaged file. */
static int check_header(json_t *doc, const char *name, struct diag *d)
{
    static const char *const keys[] = {"version", "nodeBootID", "checksum", "preparedClaims"};
    struct where w = {.d = d, .file = name};
    json_t *v = json_object_get(doc, "version");
    json_t *sum = json_object_get(doc, "checksum");
    uint32_t want;
    int r;

    if (!json_is_integer(v))
        return fail(&w, "version: missing or not an integer");
    if (json_integer_value(v) != CKPT_VERSION)
        return fail(&w, "unsupported version %" JSON_INTEGER_FORMAT, json_integer_value(v));
    if (!json_is_integer(sum) || json_integer_value(sum) < 0 ||
        json_integer_value(sum) > UINT32_MAX)
        return fail(&w, "checksum: missing or not a 32-bit unsigned integer");
    r = dra_checkpoint_checksum(doc, &want);
    if (r < 0)
        return diag_fail(d, r, "%s: cannot compute the checksum", name);
    if ((uint32_t)json_integer_value(sum) != want)
        return fail(&w, "checksum mismatch");
    r = check_keys(&w, doc, "", keys, ARRAY_SIZE(keys));
    if (r < 0)
        return r;
    if (!boot_id_valid(json_string_value(json_object_get(doc, "nodeBootID"))))
        return fail(&w, "nodeBootID: missing or not a boot ID");
    if (!json_is_object(json_object_get(doc, "preparedClaims")))
        return fail(&w, "preparedClaims: missing or not an object");
    return 0;
}

int dra_checkpoint_parse(const char *data, size_t len, const char *name, const char *boot_id,
                         struct diag *d, struct dra_checkpoint **ret)
{
    _cleanup_(dra_checkpoint_freep) struct dra_checkpoint *cp = NULL;
    _cleanup_json_ json_t *doc = NULL;
    json_error_t err;
    json_t *claims;
    const char *file_boot;
    int r;

    if (!name)
        name = "checkpoint";
    if (!boot_id_valid(boot_id))
        return diag_fail(d, -EINVAL, "%s: invalid boot ID for this boot", name);
    if (len > CKPT_MAX_BYTES)
        return diag_fail(d, -EBADMSG, "%s: larger than %zu bytes", name, CKPT_MAX_BYTES);
    /* Duplicate keys would let a damaged file say two things at once; refuse them. */
    doc = json_loadb(data ? data : "", len, JSON_REJECT_DUPLICATES, &err);
    if (!doc) {
        r = diag_fail(d, -EBADMSG, "%s: line %d col %d: %s", name, err.line, err.column, err.text);
        if (d) {
            d->line = err.line;
            d->col = err.column;
        }
        return r;
    }
    if (!json_is_object(doc))
        return diag_fail(d, -EBADMSG, "%s: not a JSON object", name);
    r = check_header(doc, name, d);
    if (r < 0)
        return r;
    claims = json_object_get(doc, "preparedClaims");
    r = check_claims(claims, name, d);
    if (r < 0)
        return r;

    r = dra_checkpoint_new(boot_id, &cp);
    if (r < 0)
        return r;
    file_boot = json_string_value(json_object_get(doc, "nodeBootID"));
    if (strcmp(file_boot, boot_id) != 0) {
        /* Their CDI specs lived in /run and their containers are gone: nothing left to roll back.
         */
        log_info("checkpoint written before a reboot: dropping its claims", "path", name, "claims",
                 LOG_INT(json_object_size(claims)), "checkpointBootID", file_boot, "bootID",
                 boot_id);
    } else {
        json_decref(cp->claims);
        cp->claims = json_incref(claims);
    }
    *ret = TAKE_PTR(cp);
    return 0;
}

int dra_checkpoint_load(const char *path, const char *boot_id, struct diag *d,
                        struct dra_checkpoint **ret)
{
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    int r;

    r = file_read_all(path, CKPT_MAX_BYTES, &data, &len);
    if (r == -ENOENT)
        return dra_checkpoint_new(boot_id, ret);
    if (r == -EFBIG)
        return diag_fail(d, -EBADMSG, "%s: larger than %zu bytes", path, CKPT_MAX_BYTES);
    if (r < 0)
        return diag_fail(d, r, "%s: cannot read: %s", path, strerror(-r));
    return dra_checkpoint_parse(data, len, path, boot_id, d, ret);
}

int dra_checkpoint_serialize(const struct dra_checkpoint *cp, char **ret, size_t *len)
{
    _cleanup_json_ json_t *doc = NULL;
    _cleanup_free_ char *claims = NULL;
    char *out = NULL;
    uint32_t sum;
    int n, r;

    if (check_claims(cp->claims, NULL, NULL) < 0)
        return -EINVAL;
    doc = json_pack("{s:i, s:s, s:O}", "version", CKPT_VERSION, "nodeBootID", cp->boot_id,
                    "preparedClaims", cp->claims);
    if (!doc)
        return -ENOMEM;
    r = dra_checkpoint_checksum(doc, &sum);
    if (r < 0)
        return r;
    claims = json_dumps(cp->claims, JSON_COMPACT | JSON_SORT_KEYS);
    if (!claims)
        return -ENOMEM;
    /* Written by hand for the member order a reader expects; the boot ID needs no escaping
     * (boot_id_valid), and the claims are already canonical, so the file's claims are exactly
     * the bytes the checksum covers. */
    n = asprintf(&out,
                 "{\"version\":%d,\"nodeBootID\":\"%s\",\"checksum\":%" PRIu32
                 ",\"preparedClaims\":%s}\n",
                 CKPT_VERSION, cp->boot_id, sum, claims);
    if (n < 0)
        return -ENOMEM;
    if ((size_t)n > CKPT_MAX_BYTES) {
        free(out);
        return -EFBIG;
    }
    *ret = out;
    *len = (size_t)n;
    return 0;
}

int dra_checkpoint_write(const char *path, const char *data, size_t len, struct diag *d)
{
    int r = file_write_atomic(path, data, len, 0600);

    if (r < 0)
        return diag_fail(d, r, "%s: cannot write: %s", path, strerror(-r));
    return 0;
}

int dra_checkpoint_save(const struct dra_checkpoint *cp, const char *path, struct diag *d)
{
    _cleanup_free_ char *data = NULL;
    size_t len;
    int r;

    r = dra_checkpoint_serialize(cp, &data, &len);
    if (r < 0)
        return diag_fail(d, r, "%s: cannot serialize: %s", path, strerror(-r));
    return dra_checkpoint_write(path, data, len, d);
}

json_t *dra_checkpoint_get(const struct dra_checkpoint *cp, const char *uid)
{
    if (!cp || !uid)
        return NULL;
    return json_object_get(cp->claims, uid);
}

int dra_checkpoint_put(struct dra_checkpoint *cp, const char *uid, const char *state,
                       const char *ns, const char *name, json_t *devices)
{
    _cleanup_json_ json_t *entry = NULL;
    struct where w = {.uid = uid};

    if (!dra_claim_uid_valid(uid) || !state_valid(state) || !ns || !name)
        return -EINVAL;
    if (devices && !json_is_array(devices))
        return -EINVAL;
    entry = json_object();
    if (!entry)
        return -ENOMEM;
    /* json_string() refuses invalid UTF-8, the likely failure here. The devices are copied, so
     * that later changes to the caller's array cannot reach the checkpoint. */
    if (json_object_set_new(entry, "state", json_string(state)) < 0 ||
        json_object_set_new(entry, "namespace", json_string(ns)) < 0 ||
        json_object_set_new(entry, "name", json_string(name)) < 0 ||
        json_object_set_new(entry, "devices", devices ? json_deep_copy(devices) : json_array()) < 0)
        return -EINVAL;
    if (check_entry(&w, entry) < 0)
        return -EINVAL;
    if (json_object_set(cp->claims, uid, entry) < 0)
        return -ENOMEM;
    return 0;
}

void dra_checkpoint_drop(struct dra_checkpoint *cp, const char *uid)
{
    if (cp && uid)
        (void)json_object_del(cp->claims, uid);
}
