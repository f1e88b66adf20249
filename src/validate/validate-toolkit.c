/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The toolkit check. NVIDIA's validator runs nvidia-smi in a container of runtime class `nvidia`:
 * it passes when the NVIDIA Container Toolkit injected the driver. gpuplane checks, without running
 * a container, what the toolkit leaves on the host for a runtime to do that:
 *
 *  - a CDI spec of kind nvidia.com/gpu in the CDI directories (/etc/cdi, /var/run/cdi) that loads
 *    as a runtime would load it (src/cdi) and names at least one device; or
 *  - the runtime's handler for the runtime class: containerd's
 *    plugins.<cri>.containerd.runtimes.nvidia or CRI-O's crio.runtime.runtimes.nvidia, in the main
 *    configuration or a drop-in, and the runtime binary it names present on the host.
 *
 * Every path is the host's, read under the host's root as this container mounts it.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cdi.h"
#include "validate-internal.h"

/* Configuration files are small; a larger one is not a runtime's. */
#define CONFIG_MAX_BYTES ((size_t)1 << 20)
#define KEY_MAX_SEGS 12
#define KEY_SEG_MAX 128

/* ---- a line-oriented TOML reader, enough for runtime configurations ---- */

struct key {
    char seg[KEY_MAX_SEGS][KEY_SEG_MAX];
    size_t n;
};

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

static bool bare_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

/*
 * string = basic-string | literal-string
 * One-line strings only; escapes in basic strings keep the escaped character (\" -> "), which is
 * all keys and paths use. Returns the position after the closing quote, or NULL.
 */
static const char *parse_string(const char *p, char *out, size_t size)
{
    char quote = *p++;
    size_t n = 0;
    while (*p && *p != quote && *p != '\n') {
        char c = *p++;
        if (quote == '"' && c == '\\' && *p)
            c = *p++;
        if (n + 1 < size)
            out[n++] = c;
    }
    out[n] = '\0';
    return *p == quote ? p + 1 : NULL;
}

/* key = simple-key { "." simple-key } ; simple-key = bare-key | string */
static const char *parse_key(const char *p, struct key *k)
{
    k->n = 0;
    for (;;) {
        p = skip_ws(p);
        if (k->n == KEY_MAX_SEGS)
            return NULL;
        char *seg = k->seg[k->n];
        if (*p == '"' || *p == '\'') {
            p = parse_string(p, seg, KEY_SEG_MAX);
            if (!p)
                return NULL;
        } else {
            size_t n = 0;
            while (bare_char(*p)) {
                if (n + 1 >= KEY_SEG_MAX)
                    return NULL;
                seg[n++] = *p++;
            }
            if (n == 0)
                return NULL;
            seg[n] = '\0';
        }
        k->n++;
        p = skip_ws(p);
        if (*p != '.')
            return p;
        p++;
    }
}

/* The end of a line is blank or a comment. */
static bool rest_empty(const char *p)
{
    p = skip_ws(p);
    return !*p || *p == '#' || *p == '\r' || *p == '\n';
}

/* Where the handler's tables live, per runtime and configuration version. */
static const char *const PREFIXES[][5] = {
    {"plugins", "io.containerd.grpc.v1.cri", "containerd", "runtimes", NULL},
    {"plugins", "io.containerd.cri.v1.runtime", "containerd", "runtimes", NULL},
    {"plugins", "cri", "containerd", "runtimes", NULL},
    {"crio", "runtime", "runtimes", NULL, NULL},
};

/* How many segments of prefix p there are, when k starts with them and then handler; else 0. */
static size_t handler_at(const struct key *k, const char *const *p, const char *handler)
{
    size_t m = 0;
    while (p[m])
        m++;
    if (k->n <= m)
        return 0;
    for (size_t i = 0; i < m; i++)
        if (strcmp(k->seg[i], p[i]) != 0)
            return 0;
    return strcmp(k->seg[m], handler) == 0 ? m : 0;
}

static void match(const struct key *k, const char *handler, const char *value,
                  struct validate_runtime_hit *hit)
{
    for (size_t i = 0; i < ARRAY_SIZE(PREFIXES); i++) {
        size_t m = handler_at(k, PREFIXES[i], handler);
        if (!m)
            continue;
        hit->found = true;
        if (!value)
            return;
        bool crio = strcmp(PREFIXES[i][0], "crio") == 0;
        bool binary = crio ? k->n == m + 2 && strcmp(k->seg[m + 1], "runtime_path") == 0
                           : k->n == m + 3 && strcmp(k->seg[m + 1], "options") == 0 &&
                                 strcmp(k->seg[m + 2], "BinaryName") == 0;
        if (binary)
            snprintf(hit->binary, sizeof(hit->binary), "%s", value);
        return;
    }
}

/* Whether line opens a multi-line string that it does not close. */
static bool opens_multiline(const char *line, const char **ret_delim)
{
    static const char *const delims[] = {"\"\"\"", "'''"};
    for (size_t i = 0; i < ARRAY_SIZE(delims); i++) {
        const char *a = strstr(line, delims[i]);
        if (a && !strstr(a + 3, delims[i])) {
            *ret_delim = delims[i];
            return true;
        }
    }
    return false;
}

/* One line: a table header, or key = value under the current table. */
static void scan_line(const char *line, struct key *table, const char *handler,
                      struct validate_runtime_hit *hit)
{
    struct key k;
    const char *p = skip_ws(line);
    if (*p == '[') {
        bool array = p[1] == '[';
        p = parse_key(p + (array ? 2 : 1), &k);
        if (!p || *p != ']' || (array && p[1] != ']') || !rest_empty(p + (array ? 2 : 1)))
            return; /* not a header (e.g. a line inside a multi-line array) */
        *table = k;
        match(table, handler, NULL, hit);
        return;
    }
    p = parse_key(p, &k);
    if (!p || *p != '=')
        return;
    p = skip_ws(p + 1);
    struct key full = *table;
    for (size_t i = 0; i < k.n && full.n < KEY_MAX_SEGS; i++)
        memcpy(full.seg[full.n++], k.seg[i], KEY_SEG_MAX);
    if (full.n != table->n + k.n)
        return;
    char value[1024];
    bool is_string = (*p == '"' || *p == '\'') && strncmp(p, "\"\"\"", 3) != 0 &&
                     strncmp(p, "'''", 3) != 0 && parse_string(p, value, sizeof(value));
    match(&full, handler, is_string ? value : NULL, hit);
}

void validate_scan_runtime_config(const char *text, const char *handler,
                                  struct validate_runtime_hit *ret)
{
    struct key table = {.n = 0};
    const char *delim = NULL;
    char line[4096];
    *ret = (struct validate_runtime_hit){0};
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        snprintf(line, sizeof(line), "%.*s", (int)(len < sizeof(line) ? len : sizeof(line) - 1), p);
        p += len + (nl ? 1 : 0);
        if (delim) { /* inside a multi-line string */
            if (strstr(line, delim))
                delim = NULL;
            continue;
        }
        char *hash = NULL;
        /* A comment outside strings: cut it, unless a quote comes before it. */
        if ((hash = strchr(line, '#')) && !memchr(line, '"', (size_t)(hash - line)) &&
            !memchr(line, '\'', (size_t)(hash - line)))
            *hash = '\0';
        scan_line(line, &table, handler, ret);
        if (opens_multiline(line, &delim))
            continue;
    }
}

/* ---- files under the host's root ---- */

/* root + path ("/" as root adds nothing). */
static int under_root(const char *root, const char *path, char *buf, size_t size)
{
    const char *r = strcmp(root, "/") == 0 ? "" : root;
    int n = snprintf(buf, size, "%s%s%s", r, path[0] == '/' ? "" : "/", path);
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static bool is_regular(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Appends "; text" (or text) to d's message, keeping its first error code. */
static void note(struct diag *d, const char *text)
{
    if (!d)
        return;
    size_t used = strlen(d->msg);
    snprintf(d->msg + used, sizeof(d->msg) - used, "%s%s", used ? "; " : "", text);
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

typedef int (*file_fn)(const char *path, void *userdata);

/* Calls fn for each regular file of dir whose name ends in suffix ("" for all), by name; stops at
 * the first fn that returns non-zero and returns that. A missing dir has no files. */
static int each_file(const char *dir, const char *suffix, file_fn fn, void *userdata)
{
    struct dirent **list = NULL;
    int n = scandir(dir, &list, NULL, by_name), r = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        const char *name = list[i]->d_name;
        if (r == 0 && name[0] != '.' && ends_with(name, suffix) &&
            (size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) < sizeof(path) &&
            is_regular(path))
            r = fn(path, userdata);
        free(list[i]);
    }
    free(list);
    return r;
}

/* ---- CDI ---- */

struct cdi_search {
    const char *kind;
    char *path;
    size_t size;
    size_t devices;
    struct diag *d;
    unsigned bad;
};

static int try_spec(const char *path, void *userdata)
{
    struct cdi_search *s = userdata;
    _cleanup_(cdi_spec_freep) struct cdi_spec *spec = NULL;
    struct diag d;
    diag_init(&d);
    int r = cdi_spec_load_file(path, &d, &spec);
    if (r == -ENOMEM)
        return r;
    if (r < 0) {
        log_warn("a CDI spec does not load; runtimes skip it too", "file", path, "error", d.msg);
        if (s->bad++ == 0)
            note(s->d, d.msg);
        return 0;
    }
    if (strcmp(spec->kind, s->kind) != 0)
        return 0;
    snprintf(s->path, s->size, "%s", path);
    s->devices = spec->devices.len;
    return 1;
}

int validate_find_cdi_spec(const char *root, const char *dirs, const char *kind, char *ret_path,
                           size_t n, size_t *ret_devices, struct diag *d)
{
    struct cdi_search s = {.kind = kind, .path = ret_path, .size = n, .d = d};
    char list[4096];
    diag_init(d);
    snprintf(list, sizeof(list), "%s", dirs);
    for (char *save = NULL, *dir = strtok_r(list, ",", &save); dir;
         dir = strtok_r(NULL, ",", &save)) {
        char path[4096];
        if (!*dir || under_root(root, dir, path, sizeof(path)) < 0)
            continue;
        int r = each_file(path, ".json", try_spec, &s);
        if (r == 0)
            r = each_file(path, ".yaml", try_spec, &s);
        if (r < 0)
            return r;
        if (r > 0) {
            *ret_devices = s.devices;
            return VALIDATE_READY;
        }
    }
    char why[512];
    snprintf(why, sizeof(why), "no CDI spec of kind %s in %s (under %s)", kind, dirs, root);
    note(d, why);
    return VALIDATE_NOT_READY;
}

/* ---- the runtime's handler ---- */

struct runtime_search {
    const char *root;
    const char *handler;
    char found_in[4096];
    char binary[1024];
    bool binary_ok;
    bool found;
};

static int try_config(const char *path, void *userdata)
{
    struct runtime_search *s = userdata;
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    struct validate_runtime_hit hit;
    if (file_read_all(path, CONFIG_MAX_BYTES, &text, &len) < 0)
        return 0;
    validate_scan_runtime_config(text, s->handler, &hit);
    if (!hit.found)
        return 0;
    /* A later drop-in may set the binary of a handler an earlier file declared. */
    if (!s->found)
        snprintf(s->found_in, sizeof(s->found_in), "%s", path);
    s->found = true;
    if (hit.binary[0])
        snprintf(s->binary, sizeof(s->binary), "%s", hit.binary);
    return 0;
}

/* The configuration file and its drop-in directory (dir of file + "/" + dropin). */
static void search_runtime(struct runtime_search *s, const char *config, const char *dropin,
                           const char *suffix)
{
    char path[4096], dir[4096];
    if (under_root(s->root, config, path, sizeof(path)) < 0)
        return;
    if (is_regular(path))
        (void)try_config(path, s);
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        return;
    snprintf(slash + 1, sizeof(dir) - (size_t)(slash + 1 - dir), "%s", dropin);
    (void)each_file(dir, suffix, try_config, s);
}

static bool valid_handler(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
              s[i] == '.'))
            return false;
    return true;
}

/* VALIDATE_READY when a configuration declares the handler (and its binary exists). */
static int runtime_check(const struct validate_options *o, struct runtime_search *s, struct diag *d)
{
    char why[6144];
    search_runtime(s, o->containerd_config, "conf.d", ".toml");
    search_runtime(s, o->crio_config, "crio.conf.d", "");
    if (!s->found) {
        snprintf(why, sizeof(why), "no runtime handler \"%s\" in %s or %s (or their drop-ins)",
                 s->handler, o->containerd_config, o->crio_config);
        note(d, why);
        return VALIDATE_NOT_READY;
    }
    if (!s->binary[0] || !strchr(s->binary, '/'))
        return VALIDATE_READY; /* the runtime looks a bare name up in its PATH */
    char path[4096];
    if (under_root(s->root, s->binary, path, sizeof(path)) == 0 && is_regular(path))
        return VALIDATE_READY;
    snprintf(why, sizeof(why), "runtime handler \"%s\" in %s names %s, which does not exist",
             s->handler, s->found_in, s->binary);
    note(d, why);
    return VALIDATE_NOT_READY;
}

int validate_toolkit(const struct validate_options *o, struct diag *d)
{
    char spec[4096];
    size_t devices = 0;
    struct runtime_search rs = {.root = o->host_ctr, .handler = o->runtime_class};
    if (!valid_handler(o->runtime_class))
        return diag_fail(d, -EINVAL,
                         "invalid runtime class \"%s\": a lower-case DNS label (--runtime-class, "
                         "VALIDATOR_RUNTIME_CLASS)",
                         o->runtime_class);
    int r = validate_find_cdi_spec(o->host_ctr, o->cdi_dirs, VALIDATE_CDI_KIND, spec, sizeof(spec),
                                   &devices, d);
    if (r < 0)
        return r;
    if (r == VALIDATE_READY) {
        log_info("the NVIDIA Container Toolkit is in place: a CDI spec names the GPUs", "spec",
                 spec, "kind", VALIDATE_CDI_KIND, "devices", LOG_INT(devices));
        return VALIDATE_READY;
    }
    r = runtime_check(o, &rs, d);
    if (r == VALIDATE_READY) {
        log_info("the NVIDIA Container Toolkit is in place: the runtime has its handler", "config",
                 rs.found_in, "handler", rs.handler, "binary", rs.binary[0] ? rs.binary : "<nil>");
        return VALIDATE_READY;
    }
    return VALIDATE_NOT_READY;
}
