/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the NVIDIA driver has on disk under a driver root: control device nodes, libraries of the
 * running driver version, GSP firmware, IPC sockets, tools, and the MIG capability minors. The
 * root may be a container's file system (a containerised driver under /run/nvidia/driver), so
 * nothing here follows a symlinked directory below the root (an absolute link would lead to the
 * host's files, not the driver's), only regular files are mounted, and names are kept to a plain
 * character set before they go into a spec. Directory listings are sorted: the same node must
 * give the same file byte for byte.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#include "nvcdi-internal.h"

#define MIG_MINORS_MAX ((size_t)4 << 20)

static const char *const CONTROL_NODES[] = {
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
    "/dev/nvidia-modeset",
};

/* Multiarch directories first: on a merged-/usr system /lib is a symlink and is skipped. */
static const char *const LIB_DIRS[] = {
    "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
    "/lib/x86_64-linux-gnu",     "/lib/aarch64-linux-gnu",     "/lib64",     "/lib",
};

static const char *const BIN_DIRS[] = {"/usr/bin", "/usr/sbin", "/bin", "/sbin"};

static const char *const BINARIES[] = {
    "nvidia-smi",
    "nvidia-debugdump",
    "nvidia-persistenced",
    "nvidia-cuda-mps-control",
    "nvidia-cuda-mps-server",
    "nvidia-imex",
    "nvidia-imex-ctl",
};

static const char *const IPC_PATHS[] = {
    "/run/nvidia-persistenced/socket",
    "/run/nvidia-fabricmanager/socket",
    "/tmp/nvidia-mps",
};

/* Development links applications open by the unversioned name, which ldconfig does not make. */
static const struct {
    const char *lib; /* the library, without ".<driver version>" */
    const char *soname;
    const char *link;
} SO_LINKS[] = {
    {"libcuda.so", "libcuda.so.1", "libcuda.so"},
    {"libnvidia-opticalflow.so", "libnvidia-opticalflow.so.1", "libnvidia-opticalflow.so"},
};

static bool printable_ascii(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p > 0x7e)
            return false;
    return true;
}

/* Collapses "//", drops a trailing '/', refuses "." and ".." components. */
static int normalise(const char *path, char **ret)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    const char *p = path;
    int r = 0;
    while (*p && r >= 0) {
        while (*p == '/')
            p++;
        size_t len = strcspn(p, "/");
        if (len == 0)
            break;
        if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
            return -EINVAL;
        r = strbuf_addch(&sb, '/');
        if (r >= 0)
            r = strbuf_add(&sb, p, len);
        p += len;
    }
    if (r < 0)
        return r;
    char *s = strbuf_detach(&sb, NULL);
    if (!s)
        return -ENOMEM;
    *ret = s;
    return 0;
}

int nvcdi_check_root(const char *path, const char *what, struct diag *d, char **ret)
{
    _cleanup_free_ char *norm = NULL;
    struct stat st;
    if (!path || path[0] != '/')
        return diag_fail(d, -EINVAL, "%s \"%s\" must be an absolute path", what, path ? path : "");
    if (strlen(path) >= PATH_MAX / 2 || !printable_ascii(path))
        return diag_fail(d, -EINVAL, "%s \"%s\": too long or not printable ASCII", what, path);
    if (normalise(path, &norm) < 0)
        return diag_fail(d, -EINVAL, "%s \"%s\" must not contain \".\" or \"..\" components", what,
                         path);
    if (stat(path, &st) < 0)
        return diag_fail(d, negative_errno(), "%s %s: %s", what, path, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return diag_fail(d, -ENOTDIR, "%s %s is not a directory", what, path);
    *ret = TAKE_PTR(norm);
    return 0;
}

static int join(const char *a, const char *b, char **ret)
{
    return asprintf(ret, "%s%s", a, b) < 0 ? -ENOMEM : 0;
}

/* Whether every directory of rel (absolute) under root exists and is not a symlink. */
static bool plain_dir(const char *root, const char *rel)
{
    char path[PATH_MAX];
    struct stat st;
    int n = snprintf(path, sizeof(path), "%s%s", root, rel);
    if (n < 0 || (size_t)n >= sizeof(path))
        return false;
    size_t start = strlen(root);
    for (size_t i = start + 1; i <= (size_t)n; i++) {
        if (path[i] != '/' && path[i] != '\0')
            continue;
        char saved = path[i];
        path[i] = '\0';
        bool ok = lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
        path[i] = saved;
        if (!ok)
            return false;
    }
    return true;
}

/* What present() accepts. Fake roots in tests use regular files for device nodes. */
enum {
    IS_REG = 1 << 0,
    IS_CHR = 1 << 1,
    IS_SOCK = 1 << 2,
    IS_DIR = 1 << 3,
};

/* rel under root: its directory is plain and it is a file of one of the types. */
static bool present(const char *root, const char *rel, unsigned types)
{
    char path[PATH_MAX], dir[PATH_MAX];
    struct stat st;
    const char *slash = strrchr(rel, '/');
    int n = snprintf(dir, sizeof(dir), "%.*s", (int)(slash - rel), rel);
    if (n < 0 || (size_t)n >= sizeof(dir) || (dir[0] && !plain_dir(root, dir)))
        return false;
    n = snprintf(path, sizeof(path), "%s%s", root, rel);
    if (n < 0 || (size_t)n >= sizeof(path) || lstat(path, &st) < 0)
        return false;
    return ((types & IS_REG) && S_ISREG(st.st_mode)) || ((types & IS_CHR) && S_ISCHR(st.st_mode)) ||
           ((types & IS_SOCK) && S_ISSOCK(st.st_mode)) || ((types & IS_DIR) && S_ISDIR(st.st_mode));
}

static int push_str(struct vec *v, const char *s)
{
    char *copy = strdup(s);
    if (!copy)
        return -ENOMEM;
    int r = vec_push(v, &copy);
    if (r < 0)
        free(copy);
    return r;
}

static void free_strs(struct vec *v)
{
    for (size_t i = 0; i < v->len; i++)
        free(*VEC_AT(v, char *, i));
    vec_release(v);
}

static bool plain_name(const char *name)
{
    if (name[0] == '.')
        return false;
    for (const char *p = name; *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-", *p))
            return false;
    return true;
}

static bool has_prefix_suffix(const char *s, const char *prefix, const char *suffix)
{
    size_t n = strlen(s), p = strlen(prefix), x = strlen(suffix);
    return n >= p + x && strncmp(s, prefix, p) == 0 && strcmp(s + n - x, suffix) == 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted names in root+dir that match prefix*suffix and are regular files. */
static int list_matching(const char *root, const char *dir, const char *prefix, const char *suffix,
                         struct vec *ret)
{
    _cleanup_free_ char *path = NULL;
    if (!plain_dir(root, dir))
        return 0;
    int r = join(root, dir, &path);
    if (r < 0)
        return r;
    DIR *dp = opendir(path);
    if (!dp)
        return 0;
    struct dirent *de;
    while (r >= 0 && (de = readdir(dp))) {
        struct stat st;
        if (!plain_name(de->d_name) || !has_prefix_suffix(de->d_name, prefix, suffix))
            continue;
        if (fstatat(dirfd(dp), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            r = push_str(ret, de->d_name);
    }
    closedir(dp);
    if (r >= 0 && ret->len > 1)
        qsort(ret->items, ret->len, sizeof(char *), cmp_str);
    return r;
}

static int add_so_links(struct nvcdi *nv, const char *dir, const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(SO_LINKS); i++) {
        size_t n = strlen(SO_LINKS[i].lib);
        _cleanup_free_ char *link = NULL;
        if (strncmp(name, SO_LINKS[i].lib, n) != 0 || name[n] != '.' ||
            strcmp(name + n + 1, nv->driver_version) != 0)
            continue;
        if (asprintf(&link, "%s::%s/%s", SO_LINKS[i].soname, dir, SO_LINKS[i].link) < 0) {
            link = NULL;
            return -ENOMEM;
        }
        if (i == 0 && !nv->libcuda_dir && !(nv->libcuda_dir = strdup(dir)))
            return -ENOMEM;
        return push_str(&nv->links, link);
    }
    return 0;
}

/* The driver's libraries in one directory: lib*.so.<version>. */
static int scan_lib_dir(struct nvcdi *nv, const char *dir, const char *suffix)
{
    struct vec names;
    char rel[PATH_MAX];
    vec_init(&names, sizeof(char *), CDI_LIST_MAX);
    int r = list_matching(nv->root, dir, "lib", suffix, &names);
    if (r >= 0 && names.len > 0)
        r = push_str(&nv->lib_dirs, dir);
    for (size_t i = 0; i < names.len && r >= 0; i++) {
        const char *name = *VEC_AT(&names, char *, i);
        snprintf(rel, sizeof(rel), "%s/%s", dir, name);
        r = push_str(&nv->mounts, rel);
        if (r >= 0)
            r = add_so_links(nv, dir, name);
    }
    free_strs(&names);
    return r;
}

static int scan_libs(struct nvcdi *nv, struct diag *d)
{
    _cleanup_free_ char *suffix = NULL;
    char vdpau[PATH_MAX];
    int r = asprintf(&suffix, ".so.%s", nv->driver_version) < 0 ? -ENOMEM : 0;
    for (size_t i = 0; i < ARRAY_SIZE(LIB_DIRS) && r >= 0; i++) {
        r = scan_lib_dir(nv, LIB_DIRS[i], suffix);
        snprintf(vdpau, sizeof(vdpau), "%s/vdpau", LIB_DIRS[i]);
        if (r >= 0)
            r = scan_lib_dir(nv, vdpau, suffix);
    }
    if (r < 0)
        return r;
    if (nv->lib_dirs.len == 0)
        return diag_fail(d, -ENOENT,
                         "no libraries of driver %s (lib*.so.%s) under %s: is the NVIDIA driver "
                         "root right (--nvidia-driver-root)?",
                         nv->driver_version, nv->driver_version, nv->root[0] ? nv->root : "/");
    return 0;
}

static int scan_firmware(struct nvcdi *nv)
{
    static const char *const FW_DIRS[] = {"/lib/firmware/nvidia", "/usr/lib/firmware/nvidia"};
    char dir[PATH_MAX], rel[PATH_MAX * 2];
    int r = 0;
    for (size_t i = 0; i < ARRAY_SIZE(FW_DIRS) && r >= 0; i++) {
        struct vec names;
        vec_init(&names, sizeof(char *), CDI_LIST_MAX);
        snprintf(dir, sizeof(dir), "%s/%s", FW_DIRS[i], nv->driver_version);
        r = list_matching(nv->root, dir, "gsp", ".bin", &names);
        for (size_t j = 0; j < names.len && r >= 0; j++) {
            snprintf(rel, sizeof(rel), "%s/%s", dir, *VEC_AT(&names, char *, j));
            r = push_str(&nv->mounts, rel);
        }
        free_strs(&names);
    }
    return r;
}

static int scan_ipc_and_tools(struct nvcdi *nv)
{
    char rel[PATH_MAX];
    int r = 0;
    for (size_t i = 0; i < ARRAY_SIZE(IPC_PATHS) && r >= 0; i++)
        if (present(nv->root, IPC_PATHS[i], IS_REG | IS_SOCK | IS_DIR))
            r = push_str(&nv->mounts, IPC_PATHS[i]);
    for (size_t i = 0; i < ARRAY_SIZE(BINARIES) && r >= 0; i++) {
        for (size_t j = 0; j < ARRAY_SIZE(BIN_DIRS); j++) {
            snprintf(rel, sizeof(rel), "%s/%s", BIN_DIRS[j], BINARIES[i]);
            if (present(nv->root, rel, IS_REG)) {
                r = push_str(&nv->mounts, rel);
                break;
            }
        }
    }
    return r;
}

static int scan_nodes(struct nvcdi *nv)
{
    int r = 0;
    for (size_t i = 0; i < ARRAY_SIZE(CONTROL_NODES) && r >= 0; i++)
        if (present(nv->dev_root, CONTROL_NODES[i], IS_CHR | IS_REG))
            r = push_str(&nv->nodes, CONTROL_NODES[i]);
    return r;
}

/* Reads a decimal number at *p (at most 7 digits: minors are small) and moves past it. */
static bool parse_uint(const char **p, unsigned *ret)
{
    unsigned v = 0;
    int n = 0;
    while (**p >= '0' && **p <= '9' && n < 7) {
        v = v * 10 + (unsigned)(**p - '0');
        (*p)++;
        n++;
    }
    *ret = v;
    return n > 0 && !(**p >= '0' && **p <= '9');
}

static bool skip(const char **p, const char *lit)
{
    size_t n = strlen(lit);
    if (strncmp(*p, lit, n) != 0)
        return false;
    *p += n;
    return true;
}

/* "gpu<G>/gi<I>/access <m>" or "gpu<G>/gi<I>/ci<C>/access <m>"; other lines are not ours. */
static bool parse_cap_line(const char *line, struct nvcdi_cap *ret)
{
    struct nvcdi_cap cap = {.ci = -1};
    unsigned ci;
    const char *p = line;
    if (!skip(&p, "gpu") || !parse_uint(&p, &cap.gpu) || !skip(&p, "/gi") ||
        !parse_uint(&p, &cap.gi))
        return false;
    if (skip(&p, "/ci")) {
        if (!parse_uint(&p, &ci))
            return false;
        cap.ci = (int)ci;
    }
    if (!skip(&p, "/access ") || !parse_uint(&p, &cap.minor) || (*p && *p != '\n'))
        return false;
    *ret = cap;
    return true;
}

static int scan_caps(struct nvcdi *nv, struct diag *d)
{
    _cleanup_free_ char *path = NULL;
    _cleanup_free_ char *text = NULL;
    size_t len;
    int r = join(nv->root, "/proc/driver/nvidia-caps/mig-minors", &path);
    if (r < 0)
        return r;
    r = file_read_all(path, MIG_MINORS_MAX, &text, &len);
    if (r < 0)
        return diag_fail(d, r, "MIG devices need %s: %s", path, strerror(-r));
    for (char *line = text; line && *line && r >= 0;) {
        char *nl = strchr(line, '\n');
        struct nvcdi_cap cap;
        if (nl)
            *nl = '\0';
        if (parse_cap_line(line, &cap))
            r = vec_push(&nv->caps, &cap);
        line = nl ? nl + 1 : NULL;
    }
    return r;
}

int nvcdi_cap_minor(const struct nvcdi *nv, unsigned gpu, unsigned gi, int ci, unsigned *ret)
{
    for (size_t i = 0; i < nv->caps.len; i++) {
        const struct nvcdi_cap *cap = VEC_AT(&nv->caps, struct nvcdi_cap, i);
        if (cap->gpu == gpu && cap->gi == gi && cap->ci == ci) {
            *ret = cap->minor;
            return 0;
        }
    }
    return -ENOENT;
}

bool nvcdi_dev_present(const struct nvcdi *nv, const char *rel)
{
    return present(nv->dev_root, rel, IS_CHR | IS_REG);
}

int nvcdi_scan(struct nvcdi *nv, bool need_caps, struct diag *d)
{
    int r = scan_nodes(nv);
    if (r >= 0)
        r = scan_libs(nv, d);
    if (r >= 0)
        r = scan_firmware(nv);
    if (r >= 0)
        r = scan_ipc_and_tools(nv);
    if (r >= 0 && need_caps)
        r = scan_caps(nv, d);
    return r;
}
