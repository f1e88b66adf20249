/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The driver check. NVIDIA's validator runs `nvidia-smi` from the host (chroot /host) and, failing
 * that, from the driver container's root; gpuplane has no nvidia-smi and asks NVML directly, which
 * is what nvidia-smi does: the library is loaded from the same two places, in the same order, and
 * the check passes when NVML initialises, reports the driver version and every GPU it counts
 * answers (nvidia-smi exits non-zero when one does not).
 *
 * The roots belong to other file systems (the host's, the driver container's), whose absolute
 * links point inside themselves: the library is looked up one component at a time with links
 * resolved inside the root, so /host/usr/lib/.../libnvidia-ml.so.1 ->
 * /usr/lib/.../libnvidia-ml.so.550.54.15 resolves under /host, never into this container.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpu.h"
#include "validate-internal.h"

/* NVIDIA's search list for the driver's libraries, plus the plain and WSL lib directories. */
const char *const validate_lib_dirs[] = {
    "usr/lib64", "usr/lib/x86_64-linux-gnu", "usr/lib/aarch64-linux-gnu",
    "lib64",     "lib/x86_64-linux-gnu",     "lib/aarch64-linux-gnu",
    "usr/lib",   "usr/lib/wsl/lib",          NULL,
};

#define NVML_SONAME "libnvidia-ml.so.1"

/* How many links one lookup may follow (the kernel's limit). */
#define MAX_LINKS 40

/*
 * Opens rel (O_PATH) under the directory rootfd as if rootfd were "/": one component at a time,
 * never following a link by the kernel; a link's target is read and walked again, an absolute one
 * from rootfd, and ".." never climbs above rootfd. What openat2(RESOLVE_IN_ROOT) does, written out
 * so that it also works on kernels before 5.6 (and under valgrind).
 */
static int open_in_root(int rootfd, const char *rel)
{
    char rest[4096], target[4096];
    _cleanup_close_ int cur = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
    unsigned depth = 0, links = 0;
    if (cur < 0 || snprintf(rest, sizeof(rest), "%s", rel) >= (int)sizeof(rest))
        return -ENAMETOOLONG;
    for (;;) {
        char *p = rest;
        while (*p == '/')
            p++;
        if (!*p) /* the path named a directory: not a library */
            return -EISDIR;
        size_t len = strcspn(p, "/");
        char name[256];
        if (len >= sizeof(name))
            return -ENAMETOOLONG;
        memcpy(name, p, len);
        name[len] = '\0';
        memmove(rest, p + len, strlen(p + len) + 1);
        bool last = rest[strspn(rest, "/")] == '\0';
        if (strcmp(name, ".") == 0)
            continue;
        if (strcmp(name, "..") == 0) {
            if (depth == 0)
                continue;
            int up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (up < 0)
                return negative_errno();
            close(cur);
            cur = up;
            depth--;
            continue;
        }
        _cleanup_close_ int fd = openat(cur, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
            return negative_errno();
        if (S_ISLNK(st.st_mode)) {
            ssize_t n = readlinkat(fd, "", target, sizeof(target) - 1);
            if (n <= 0 || ++links > MAX_LINKS)
                return n <= 0 ? negative_errno() : -ELOOP;
            target[n] = '\0';
            if (strlen(target) + 1 + strlen(rest) >= sizeof(rest))
                return -ENAMETOOLONG;
            memmove(rest + n + 1, rest, strlen(rest) + 1);
            memcpy(rest, target, (size_t)n);
            rest[n] = '/';
            if (target[0] == '/') {
                close(cur);
                cur = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
                if (cur < 0)
                    return negative_errno();
                depth = 0;
            }
            continue;
        }
        if (last)
            return TAKE_FD(fd);
        if (!S_ISDIR(st.st_mode))
            return -ENOTDIR;
        close(cur);
        cur = TAKE_FD(fd);
        depth++;
    }
}

int validate_find_nvml(const char *root, char *ret, size_t n)
{
    _cleanup_close_ int rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0)
        return -ENOENT;
    for (size_t i = 0; validate_lib_dirs[i]; i++) {
        char rel[256], proc[64];
        struct stat st;
        snprintf(rel, sizeof(rel), "%s/%s", validate_lib_dirs[i], NVML_SONAME);
        _cleanup_close_ int fd = open_in_root(rootfd, rel);
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
            continue;
        /* The resolved path, as this process names it: dlopen needs a path, not an fd. */
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        ssize_t len = readlink(proc, ret, n - 1);
        if (len <= 0 || (size_t)len >= n - 1)
            continue;
        ret[len] = '\0';
        return 0;
    }
    return -ENOENT;
}

/* Whether path lies under dir (a path prefix at a '/'). */
static bool path_under(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    return strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

static const char *explicit_lib(const struct validate_options *o)
{
    const char *lib = cli_common_nvml_lib(&o->common);
    const char *env = getenv("GPUPLANE_NVML_LIB");
    return lib ? lib : env && *env ? env : NULL;
}

int validate_locate_driver(const struct validate_options *o, bool *ret_host, char *ret_lib,
                           size_t n, struct diag *d)
{
    const char *lib = explicit_lib(o);
    if (lib) {
        snprintf(ret_lib, n, "%s", lib);
        *ret_host = !path_under(lib, o->driver_ctr);
        return VALIDATE_READY;
    }
    if (validate_find_nvml(o->host_ctr, ret_lib, n) == 0) {
        *ret_host = true;
        return VALIDATE_READY;
    }
    if (validate_find_nvml(o->driver_ctr, ret_lib, n) == 0) {
        *ret_host = false;
        return VALIDATE_READY;
    }
    diag_fail(d, -ENOENT,
              "no NVIDIA driver found: no " NVML_SONAME " under %s (the host's root) nor under %s "
              "(the driver container's root)",
              o->host_ctr, o->driver_ctr);
    return VALIDATE_NOT_READY;
}

int validate_driver_body(const struct validate_options *o, bool is_host, struct strbuf *out)
{
    const char *root = o->host_root, *root_ctr = VALIDATE_DEFAULT_HOST_ROOT_CTR_PATH;
    const char *dev = o->host_root, *dev_ctr = VALIDATE_DEFAULT_HOST_ROOT_CTR_PATH;
    if (!is_host) {
        char devdir[4096];
        struct stat st;
        root = o->driver_dir;
        root_ctr = VALIDATE_DRIVER_ROOT_CTR_PATH;
        /* NVIDIA's rule: the driver container's root holds the device nodes when it has a dev
         * directory; otherwise they are the host's. */
        snprintf(devdir, sizeof(devdir), "%s/dev", o->driver_ctr);
        if (stat(devdir, &st) == 0 && S_ISDIR(st.st_mode)) {
            dev = o->driver_dir;
            dev_ctr = VALIDATE_DRIVER_ROOT_CTR_PATH;
        }
    }
    return strbuf_addf(out,
                       "IS_HOST_DRIVER=%s\n"
                       "NVIDIA_DRIVER_ROOT=%s\n"
                       "DRIVER_ROOT_CTR_PATH=%s\n"
                       "NVIDIA_DEV_ROOT=%s\n"
                       "DEV_ROOT_CTR_PATH=%s\n",
                       is_host ? "true" : "false", root, root_ctr, dev, dev_ctr);
}

int validate_open_nvml(const char *lib, struct gpu_nvml **ret_nvml, struct gpu_inventory **ret_inv,
                       struct diag *d)
{
    _cleanup_(gpu_nvml_closep) struct gpu_nvml *nvml = NULL;
    const struct gpu_read_options ropts = {.skip_topology = true};
    struct gpu_inventory *inv = NULL;
    int r = gpu_nvml_open(lib, d, &nvml);
    if (r >= 0)
        r = gpu_inventory_read(nvml, &ropts, d, &inv);
    if (r == -ENOMEM)
        return r;
    if (r < 0)
        return VALIDATE_NOT_READY;
    *ret_nvml = TAKE_PTR(nvml);
    *ret_inv = inv;
    return VALIDATE_READY;
}

/* Loads NVML from lib and asks it what nvidia-smi would: NOT_READY with the reason in d. */
static int probe(const char *lib, bool skip_gpu_init, struct validate_driver_info *info,
                 struct diag *d)
{
    _cleanup_(gpu_nvml_closep) struct gpu_nvml *nvml = NULL;
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = NULL;
    char bad[DIAG_MSG_MAX] = "";
    size_t used = 0, n_bad = 0;
    int r = validate_open_nvml(lib, &nvml, &inv, d);
    if (r != VALIDATE_READY)
        return r;
    snprintf(info->driver_version, sizeof(info->driver_version), "%s", inv->driver_version);
    info->n_gpus = (unsigned)inv->n_devices;
    if (skip_gpu_init)
        return VALIDATE_READY;
    if (inv->n_devices == 0) {
        diag_fail(d, -ENODEV, "NVML answers (driver %s) but finds no GPU", inv->driver_version);
        return VALIDATE_NOT_READY;
    }
    for (size_t i = 0; i < inv->n_devices; i++) {
        const struct gpu_device *dev = &inv->devices[i];
        if (!dev->error)
            continue;
        int w = snprintf(bad + used, sizeof(bad) - used, "%sGPU %u (%s%s%s): %s", n_bad ? "; " : "",
                         dev->index, dev->uuid[0] ? dev->uuid : "no UUID",
                         dev->pci_bus_id[0] ? " at " : "", dev->pci_bus_id,
                         gpu_nvml_strerror(nvml, dev->error));
        if (w > 0 && (size_t)w < sizeof(bad) - used)
            used += (size_t)w;
        n_bad++;
    }
    if (n_bad) {
        diag_fail(d, -EIO, "%zu of %zu GPUs do not answer NVML (driver %s): %s", n_bad,
                  inv->n_devices, inv->driver_version, bad);
        return VALIDATE_NOT_READY;
    }
    return VALIDATE_READY;
}

/* For the driver container: when the operator runs it, wait for its own readiness file first, as
 * NVIDIA's validator does (the libraries appear before the driver is loaded). */
static int driver_container_ready(const struct validate_options *o, struct diag *d)
{
    _cleanup_(validate_kube_closep) struct validate_kube *k = NULL;
    bool managed = false;
    if (!validate_kube_configured(o->kubeconfig)) {
        log_debug(1, "no API server configured: not asking whether the operator runs the driver");
        return VALIDATE_READY;
    }
    int r = validate_kube_open(o->kubeconfig, d, &k);
    if (r >= 0)
        r = validate_driver_managed(k, o->namespace_, &managed, d);
    if (r == -ENOMEM)
        return r;
    if (r < 0)
        return VALIDATE_NOT_READY;
    if (!managed)
        return VALIDATE_READY;
    if (validate_file_exists(o->output_dir, VALIDATE_FILE_DRIVER_CTR))
        return VALIDATE_READY;
    diag_fail(d, -EAGAIN,
              "the operator's driver container is not ready yet: %s/" VALIDATE_FILE_DRIVER_CTR
              " does not exist",
              o->output_dir);
    return VALIDATE_NOT_READY;
}

static void log_ready(const struct validate_driver_info *info)
{
    log_info("the NVIDIA driver is ready", "driver", info->driver_version, "gpus",
             LOG_INT(info->n_gpus), "host_driver", info->is_host_driver ? "true" : "false", "nvml",
             info->lib);
}

int validate_driver(const struct validate_options *o, struct strbuf *body, struct diag *d)
{
    struct validate_driver_info info = {0};
    const char *lib = explicit_lib(o);
    struct diag host_d;
    int r;
    diag_init(&host_d);
    if (lib) {
        snprintf(info.lib, sizeof(info.lib), "%s", lib);
        info.is_host_driver = !path_under(lib, o->driver_ctr);
        r = probe(lib, o->skip_gpu_init, &info, d);
    } else {
        /* The host's driver first; when it is missing or does not work, the driver container. */
        bool host_found = validate_find_nvml(o->host_ctr, info.lib, sizeof(info.lib)) == 0;
        r = host_found ? probe(info.lib, o->skip_gpu_init, &info, &host_d) : VALIDATE_NOT_READY;
        info.is_host_driver = host_found;
        if (r == VALIDATE_NOT_READY) {
            if (host_found)
                log_info("the host's driver does not work; trying the driver container", "error",
                         host_d.msg);
            info.is_host_driver = false;
            if (validate_find_nvml(o->driver_ctr, info.lib, sizeof(info.lib)) < 0) {
                if (host_found)
                    diag_fail(d, -ENOENT, "%s; and no " NVML_SONAME " under %s", host_d.msg,
                              o->driver_ctr);
                else
                    diag_fail(d, -ENOENT,
                              "no NVIDIA driver found: no " NVML_SONAME
                              " under %s (the host's root) nor under %s (the driver container's "
                              "root)",
                              o->host_ctr, o->driver_ctr);
                return VALIDATE_NOT_READY;
            }
            r = driver_container_ready(o, d);
            if (r == VALIDATE_READY)
                r = probe(info.lib, o->skip_gpu_init, &info, d);
        }
    }
    if (r != VALIDATE_READY)
        return r;
    log_ready(&info);
    r = validate_driver_body(o, info.is_host_driver, body);
    return r < 0 ? r : VALIDATE_READY;
}
