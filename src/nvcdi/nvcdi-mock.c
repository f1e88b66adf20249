/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The driver root of a simulated node (--mock). A node with the NVIDIA driver has files on disk
 * that CDI specs name: device nodes, the driver's libraries and tools. The mock NVML library has
 * none, so that `--mock` alone is a whole node (the DRA driver prepares claims, the device plugin
 * and `cdi generate` write specs), a root is made here from what NVML reports, in a private
 * directory (mkdtemp, 0700) that the process removes when it ends. Making it at run time rather
 * than at build time works for any profile, not only the bundled ones, and can make real
 * character devices when the process may (root): a build directory cannot hold those for a user
 * who builds without privileges.
 *
 * Device nodes are character devices when mknod is allowed, regular files otherwise (nvcdi takes
 * both). /dev/nvidia<minor>, nvidiactl (255) and nvidia-modeset (254) have the driver's fixed
 * major 195; nvidia-uvm, nvidia-uvm-tools and the MIG capabilities get their majors at module
 * load (listed in /proc/devices), so the ones a loaded driver has are reused, and otherwise a
 * major of the local/experimental range 240-254 that /proc/devices does not list. The mock
 * library stands in for libnvidia-ml.so.<version>; the other libraries are empty placeholders,
 * the tools stubs that fail, and nvidia-cdi-hook and nvidia-ctk stubs that succeed, so the hooks
 * of a spec run where the NVIDIA Container Toolkit is not installed.
 *
 * `cdi generate` needs a root that outlives it instead: the spec it leaves is read by a container
 * engine later. Its root lasts, one per user and profile ($TMPDIR/gpuplane-mock-<uid>-<name>),
 * reused by later runs. That name is predictable in a shared /tmp, so what is found there is used
 * only when it is a real directory of this user with mode 0700 whose marker (written last) holds
 * the recipe the run would build from; anything else is refused, and a missing, incomplete or
 * stale root is built beside it and renamed into place: no run trusts a half-built root, and a
 * run that loses the rename to another uses the winner's.
 *
 * A profile's driverRoot key names a root of its own instead (mock-nvml/make-driver-root.sh).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "nvcdi-internal.h"

#if defined(__aarch64__)
#define LIB_DIR "/usr/lib/aarch64-linux-gnu"
#else
#define LIB_DIR "/usr/lib/x86_64-linux-gnu"
#endif

#define NVIDIA_MAJOR 195u
#define CTL_MINOR 255u
#define MODESET_MINOR 254u
#define LOCAL_MAJOR_LOW 240u
#define LOCAL_MAJOR_HIGH 254u
#define CHAR_MAJOR_MAX 512u
/* The driver's MIG capability numbering: per GPU 15 GPU instance slots of 8 compute instances. */
#define MIG_GI_SLOTS 15u
#define MIG_CI_SLOTS 8u
#define MOCK_LIB_MAX ((size_t)256 << 20)
#define MIG_MINORS_TEXT_MAX ((size_t)4 << 20)
#define PROC_DEVICES_MAX ((size_t)64 << 10)
/* The lasting root's marker, written last: the recipe the root was made from. */
#define MARKER_NAME "/gpuplane-mock-root"
#define MARKER_FORMAT 1
#define MARKER_MAX ((size_t)1 << 20)
#define MOCK_STEM_MAX 32u
#define LASTING_TRIES 4

static const char *const PLACEHOLDER_LIBS[] = {"libcuda.so", "libnvidia-ptxjitcompiler.so"};
static const char *const TOOLS[] = {"nvidia-smi", "nvidia-debugdump", "nvidia-persistenced"};
static const char *const HOOKS[] = {"nvidia-cdi-hook", "nvidia-ctk"};

static const char TOOL_STUB[] =
    "#!/bin/sh\n"
    "echo \"${0##*/}: a simulated node (gpuplane --mock) has no GPU\" >&2\n"
    "exit 1\n";
static const char HOOK_STUB[] =
    "#!/bin/sh\n"
    "# A simulated node (gpuplane --mock): its CDI hooks have nothing to do.\n"
    "exit 0\n";

unsigned nvcdi_mig_cap_minor(unsigned gpu_minor, unsigned gi, int ci)
{
    unsigned gi_minor = 3 + MIG_GI_SLOTS * (1 + MIG_CI_SLOTS) * gpu_minor + (1 + MIG_CI_SLOTS) * gi;
    return ci < 0 ? gi_minor : gi_minor + 1 + (unsigned)ci;
}

/* "<number> <name>" at line; false for anything else. */
static bool parse_devices_line(const char *line, size_t len, unsigned *ret_major,
                               const char **ret_name, size_t *ret_name_len)
{
    size_t i = 0;
    unsigned major = 0;
    while (i < len && line[i] == ' ')
        i++;
    size_t digits = i;
    while (i < len && line[i] >= '0' && line[i] <= '9' && i - digits < 6)
        major = major * 10 + (unsigned)(line[i++] - '0');
    if (i == digits || i >= len || line[i] != ' ')
        return false;
    *ret_major = major;
    *ret_name = line + i + 1;
    *ret_name_len = len - i - 1;
    return true;
}

unsigned nvcdi_mock_major(const char *proc_devices, const char *name, unsigned avoid)
{
    bool used[CHAR_MAJOR_MAX] = {false};
    bool chars = false;
    for (const char *p = proc_devices ? proc_devices : ""; *p;) {
        size_t len = strcspn(p, "\n");
        const char *dev_name;
        size_t name_len;
        unsigned major;
        if (strncmp(p, "Character devices:", 18) == 0)
            chars = true;
        else if (strncmp(p, "Block devices:", 14) == 0)
            chars = false;
        else if (chars && parse_devices_line(p, len, &major, &dev_name, &name_len)) {
            if (name_len == strlen(name) && strncmp(dev_name, name, name_len) == 0)
                return major;
            if (major < CHAR_MAJOR_MAX)
                used[major] = true;
        }
        p += len;
        if (*p == '\n')
            p++;
    }
    for (unsigned m = LOCAL_MAJOR_HIGH; m >= LOCAL_MAJOR_LOW; m--)
        if (!used[m] && m != avoid)
            return m;
    return 0;
}

/* ---- files under the root ---- */

struct maker {
    const char *root;
    bool try_mknod;       /* root, and mknod has not been refused yet */
    size_t regular_nodes; /* device nodes made as regular files */
    unsigned uvm_major;   /* 0: none could be picked (regular files) */
    unsigned caps_major;
};

static int at(const struct maker *mk, const char *rel, char path[static PATH_MAX])
{
    int n = snprintf(path, PATH_MAX, "%s%s", mk->root, rel);
    return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

static int make_parent(const char *path)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return 0;
    *slash = '\0';
    return file_mkdir_p(dir, 0755);
}

static int write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? negative_errno() : -EIO;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* A new file rel with text and mode; one that is already there is left as it is. */
static int write_text(const struct maker *mk, const char *rel, const char *text, mode_t mode)
{
    char path[PATH_MAX];
    int r = at(mk, rel, path);
    if (r >= 0)
        r = make_parent(path);
    if (r < 0)
        return r;
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0)
        return errno == EEXIST ? 0 : negative_errno();
    r = write_all(fd, text, strlen(text));
    if (r >= 0 && fchmod(fd, mode) < 0) /* the umask may have taken bits away */
        r = negative_errno();
    return r;
}

/* A character device major:minor at rel, or a regular file where mknod is not allowed. */
static int make_node(struct maker *mk, const char *rel, unsigned major, unsigned minor)
{
    char path[PATH_MAX];
    int r = at(mk, rel, path);
    if (r >= 0)
        r = make_parent(path);
    if (r < 0)
        return r;
    if (mk->try_mknod && major > 0) {
        if (mknod(path, S_IFCHR | 0666, makedev(major, minor)) == 0)
            return chmod(path, 0666) < 0 ? negative_errno() : 0;
        if (errno == EEXIST)
            return 0;
        if (errno != EPERM && errno != EACCES)
            return negative_errno();
        mk->try_mknod = false; /* a container without CAP_MKNOD */
    }
    mk->regular_nodes++;
    return write_text(mk, rel, "", 0666);
}

static int copy_file(const char *src, const char *dst, mode_t mode)
{
    char buf[65536];
    struct stat st;
    size_t total = 0;
    _cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0 || fstat(in, &st) < 0)
        return negative_errno();
    if (!S_ISREG(st.st_mode) || (size_t)st.st_size > MOCK_LIB_MAX)
        return -EINVAL;
    _cleanup_close_ int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (out < 0)
        return negative_errno();
    for (;;) {
        ssize_t n = read(in, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return negative_errno();
        if (n == 0)
            break;
        total += (size_t)n;
        if (total > MOCK_LIB_MAX)
            return -EFBIG;
        int r = write_all(out, buf, (size_t)n);
        if (r < 0)
            return r;
    }
    return fchmod(out, mode) < 0 ? negative_errno() : 0;
}

/* rel -> target (relative, in the same directory), as ldconfig leaves sonames. */
static int make_link(const struct maker *mk, const char *rel, const char *target)
{
    char path[PATH_MAX];
    int r = at(mk, rel, path);
    if (r < 0)
        return r;
    return symlink(target, path) < 0 ? negative_errno() : 0;
}

/* LIB_DIR/<base>.<version> (a copy of src, or empty) and <base>.1 -> it. */
static int make_lib(const struct maker *mk, const char *base, const char *version, const char *src)
{
    char rel[PATH_MAX], soname[PATH_MAX], file[NAME_MAX + 1], path[PATH_MAX];
    int n = snprintf(file, sizeof(file), "%s.%s", base, version);
    if (n < 0 || (size_t)n >= sizeof(file))
        return -ENAMETOOLONG;
    snprintf(rel, sizeof(rel), LIB_DIR "/%s", file);
    snprintf(soname, sizeof(soname), LIB_DIR "/%s.1", base);
    int r = at(mk, rel, path);
    if (r >= 0)
        r = make_parent(path);
    if (r >= 0)
        r = src ? copy_file(src, path, 0755) : write_text(mk, rel, "", 0755);
    if (r >= 0)
        r = make_link(mk, soname, file);
    return r;
}

static int make_libs(const struct maker *mk, const char *version, const char *mock_lib)
{
    int r = make_lib(mk, "libnvidia-ml.so", version, mock_lib);
    for (size_t i = 0; i < ARRAY_SIZE(PLACEHOLDER_LIBS) && r >= 0; i++)
        r = make_lib(mk, PLACEHOLDER_LIBS[i], version, NULL);
    if (r >= 0)
        r = make_link(mk, LIB_DIR "/libcuda.so", "libcuda.so.1");
    return r;
}

static int make_bins(const struct maker *mk)
{
    char rel[PATH_MAX];
    int r = 0;
    for (size_t i = 0; i < ARRAY_SIZE(TOOLS) && r >= 0; i++) {
        snprintf(rel, sizeof(rel), "/usr/bin/%s", TOOLS[i]);
        r = write_text(mk, rel, TOOL_STUB, 0755);
    }
    for (size_t i = 0; i < ARRAY_SIZE(HOOKS) && r >= 0; i++) {
        snprintf(rel, sizeof(rel), "/usr/bin/%s", HOOKS[i]);
        r = write_text(mk, rel, HOOK_STUB, 0755);
    }
    return r;
}

/* The GPU's minor; a GPU NVML cannot reach keeps the profile's default, its index. */
static unsigned gpu_minor(const struct gpu_device *g)
{
    return g->error ? g->index : g->minor;
}

static int check_ids(const struct gpu_inventory *inv, struct diag *d)
{
    for (size_t i = 0; i < inv->n_devices; i++) {
        const struct gpu_device *g = &inv->devices[i];
        if (gpu_minor(g) >= MODESET_MINOR)
            return diag_fail(d, -ERANGE, "GPU %u: minor %u is out of range", g->index,
                             gpu_minor(g));
        for (size_t m = 0; m < g->n_migs; m++)
            if (g->migs[m].gi_id >= MIG_GI_SLOTS || g->migs[m].ci_id >= MIG_CI_SLOTS)
                return diag_fail(d, -ERANGE,
                                 "MIG device %s: GPU instance %u or compute instance "
                                 "%u is out of range",
                                 g->migs[m].uuid, g->migs[m].gi_id, g->migs[m].ci_id);
    }
    return 0;
}

/* proc/driver/nvidia-caps/mig-minors, as the driver lists it: every slot of every GPU. */
static int mig_minors_text(const struct gpu_inventory *inv, char **ret)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    sb.cap = MIG_MINORS_TEXT_MAX;
    int r = strbuf_addstr(&sb, "config 1\nmonitor 2\n");
    for (size_t i = 0; i < inv->n_devices && r >= 0; i++) {
        unsigned g = gpu_minor(&inv->devices[i]);
        for (unsigned gi = 0; gi < MIG_GI_SLOTS && r >= 0; gi++) {
            r = strbuf_addf(&sb, "gpu%u/gi%u/access %u\n", g, gi, nvcdi_mig_cap_minor(g, gi, -1));
            for (unsigned ci = 0; ci < MIG_CI_SLOTS && r >= 0; ci++)
                r = strbuf_addf(&sb, "gpu%u/gi%u/ci%u/access %u\n", g, gi, ci,
                                nvcdi_mig_cap_minor(g, gi, (int)ci));
        }
    }
    if (r < 0)
        return r;
    *ret = strbuf_detach(&sb, NULL);
    return *ret ? 0 : -ENOMEM;
}

static int make_proc(const struct maker *mk, const struct gpu_inventory *inv)
{
    _cleanup_free_ char *minors = NULL;
    char version[GPU_VERSION_MAX + 128];
    snprintf(version, sizeof(version),
             "NVRM version: NVIDIA UNIX Open Kernel Module  %s  (gpuplane --mock)\n",
             inv->driver_version);
    int r = write_text(mk, "/proc/driver/nvidia/version", version, 0444);
    if (r >= 0)
        r = mig_minors_text(inv, &minors);
    if (r >= 0)
        r = write_text(mk, "/proc/driver/nvidia-caps/mig-minors", minors, 0444);
    return r;
}

static int make_cap_node(struct maker *mk, unsigned minor)
{
    char rel[64];
    snprintf(rel, sizeof(rel), "/dev/nvidia-caps/nvidia-cap%u", minor);
    return make_node(mk, rel, mk->caps_major, minor);
}

static int make_gpu_nodes(struct maker *mk, const struct gpu_device *g)
{
    char rel[64];
    unsigned minor = gpu_minor(g);
    snprintf(rel, sizeof(rel), "/dev/nvidia%u", minor);
    int r = make_node(mk, rel, NVIDIA_MAJOR, minor);
    for (size_t m = 0; m < g->n_migs && r >= 0; m++) {
        const struct gpu_mig_device *mig = &g->migs[m];
        r = make_cap_node(mk, nvcdi_mig_cap_minor(minor, mig->gi_id, -1));
        if (r >= 0)
            r = make_cap_node(mk, nvcdi_mig_cap_minor(minor, mig->gi_id, (int)mig->ci_id));
    }
    return r;
}

static void pick_majors(struct maker *mk)
{
    _cleanup_free_ char *text = NULL;
    if (file_read_all("/proc/devices", PROC_DEVICES_MAX, &text, NULL) < 0)
        text = NULL;
    mk->uvm_major = nvcdi_mock_major(text, "nvidia-uvm", 0);
    mk->caps_major = nvcdi_mock_major(text, "nvidia-caps", mk->uvm_major);
}

static int make_dev(struct maker *mk, const struct gpu_inventory *inv)
{
    int r = make_node(mk, "/dev/nvidiactl", NVIDIA_MAJOR, CTL_MINOR);
    if (r >= 0)
        r = make_node(mk, "/dev/nvidia-modeset", NVIDIA_MAJOR, MODESET_MINOR);
    if (r >= 0)
        r = make_node(mk, "/dev/nvidia-uvm", mk->uvm_major, 0);
    if (r >= 0)
        r = make_node(mk, "/dev/nvidia-uvm-tools", mk->uvm_major, 1);
    if (r >= 0)
        r = make_cap_node(mk, 1); /* MIG config */
    if (r >= 0)
        r = make_cap_node(mk, 2); /* MIG monitor */
    for (size_t i = 0; i < inv->n_devices && r >= 0; i++)
        r = make_gpu_nodes(mk, &inv->devices[i]);
    return r;
}

/* ---- the content ---- */

/* The recipe of a root: what its content is made from. A lasting root is reused only when its
 * marker holds the same recipe, so a changed profile, driver version or mock library gives a
 * rebuilt root rather than one that lacks a device node. */
static int recipe_text(const struct gpu_inventory *inv, const char *mock_lib, char **ret)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    struct stat st;
    sb.cap = MARKER_MAX / 2;
    if (stat(mock_lib, &st) < 0)
        return negative_errno();
    int r =
        strbuf_addf(&sb, "gpuplane mock driver root %d\ndriver %s\nlibrary %s %lld %lld.%09ld\n",
                    MARKER_FORMAT, inv->driver_version, mock_lib, (long long)st.st_size,
                    (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    for (size_t i = 0; i < inv->n_devices && r >= 0; i++) {
        const struct gpu_device *g = &inv->devices[i];
        r = strbuf_addf(&sb, "gpu %u", gpu_minor(g));
        for (size_t k = 0; k < g->n_migs && r >= 0; k++)
            r = strbuf_addf(&sb, " mig %u.%u", g->migs[k].gi_id, g->migs[k].ci_id);
        if (r >= 0)
            r = strbuf_addstr(&sb, "\n");
    }
    if (r < 0)
        return r;
    *ret = strbuf_detach(&sb, NULL);
    return *ret ? 0 : -ENOMEM;
}

static const char *nodes_line(bool char_devices)
{
    return char_devices ? "deviceNodes character\n" : "deviceNodes regular\n";
}

/* Everything of the root under dir, which exists; the marker (when recipe is given) last. */
static int fill_root(const char *dir, const struct gpu_inventory *inv, const char *mock_lib,
                     const char *recipe, bool *ret_char_devices)
{
    _cleanup_free_ char *marker = NULL;
    struct maker mk = {.root = dir, .try_mknod = geteuid() == 0};
    pick_majors(&mk);
    int r = make_dev(&mk, inv);
    if (r >= 0)
        r = make_libs(&mk, inv->driver_version, mock_lib);
    if (r >= 0)
        r = make_bins(&mk);
    if (r >= 0)
        r = make_proc(&mk, inv);
    if (r < 0)
        return r;
    *ret_char_devices = mk.regular_nodes == 0;
    if (!recipe)
        return 0;
    if (asprintf(&marker, "%s%s", recipe, nodes_line(*ret_char_devices)) < 0) {
        marker = NULL;
        return -ENOMEM;
    }
    return write_text(&mk, MARKER_NAME, marker, 0444);
}

static int check_inventory(const struct gpu_inventory *inv, const char *mock_lib, struct diag *d)
{
    if (!nvcdi_valid_driver_version(inv->driver_version))
        return diag_fail(d, -EINVAL, "unusable driver version \"%s\" from NVML",
                         inv->driver_version);
    if (!mock_lib || mock_lib[0] != '/')
        return diag_fail(d, -EINVAL, "the mock driver root needs the mock NVML library's path");
    return check_ids(inv, d);
}

/* ---- the directory ---- */

/* $TMPDIR when it is a plain absolute directory, else /tmp. */
static int base_dir(char **ret)
{
    const char *env = getenv("TMPDIR");
    if (env && nvcdi_check_root(env, "TMPDIR", NULL, ret) >= 0)
        return 0;
    *ret = strdup("/tmp");
    return *ret ? 0 : -ENOMEM;
}

/* A new directory from template (ending in XXXXXX), mode 0700 whatever the umask. */
static int make_temp_dir(const char *template, char **ret)
{
    _cleanup_free_ char *path = strdup(template);
    if (!path)
        return -ENOMEM;
    if (!mkdtemp(path))
        return negative_errno();
    if (chmod(path, 0700) < 0) {
        int r = negative_errno();
        rmdir(path);
        return r;
    }
    *ret = TAKE_PTR(path);
    return 0;
}

/* A private directory in the base directory. */
static int make_private_dir(char **ret)
{
    _cleanup_free_ char *tmp = NULL;
    char path[PATH_MAX];
    int r = base_dir(&tmp);
    if (r < 0)
        return r;
    int n = snprintf(path, sizeof(path), "%s/gpuplane-mock-XXXXXX", tmp);
    if (n < 0 || n >= (int)sizeof(path) - 256)
        return -ENAMETOOLONG;
    return make_temp_dir(path, ret);
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    remove(path); /* what cannot go stays; the caller checks the top directory */
    return 0;
}

/* Everything under dir and dir itself, depth first, never following a link or leaving the file
 * system. */
static int remove_tree(const char *dir)
{
    if (nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) < 0)
        return negative_errno();
    return access(dir, F_OK) == 0 ? -ENOTEMPTY : 0;
}

struct nvcdi_mock_root *nvcdi_mock_root_free(struct nvcdi_mock_root *m)
{
    if (!m)
        return NULL;
    /* A child the process forked owns nothing of it; a lasting root is never removed here. */
    if (m->made && m->owner == getpid() && remove_tree(m->path) < 0)
        log_debug(1, "cannot remove the mock driver root", "path", m->path);
    free(m->path);
    free(m->cdi_hook);
    free(m->ctk);
    free(m);
    return NULL;
}

/* The profile's driverRoot (relative to the profile's directory), or NULL. */
static int profile_root(struct diag *d, char **ret)
{
    _cleanup_(doc_freep) struct doc *doc = NULL;
    _cleanup_free_ char *dir = NULL;
    _cleanup_free_ char *joined = NULL;
    const char *profile = getenv("MOCK_NVML_PROFILE");
    const char *root = NULL;
    *ret = NULL;
    if (!profile)
        return 0;
    int r = doc_load_file(profile, d, &doc);
    if (r >= 0 && doc_count(doc) > 0 && json_is_object(doc_root(doc, 0)))
        r = doc_get_string(doc, doc_root(doc, 0), "driverRoot", false, NULL, d, &root);
    if (r < 0 || !root)
        return r;
    dir = strdup(profile);
    if (!dir || asprintf(&joined, "%s/%s", dirname(dir), root) < 0) {
        joined = NULL;
        return -ENOMEM;
    }
    /* Profiles say "../roots/x"; resolve it here, so the root check sees a plain path. */
    char *real = realpath(root[0] == '/' ? root : joined, NULL);
    if (!real)
        return diag_fail(d, negative_errno(), "mock profile %s: driverRoot %s: %s", profile, root,
                         strerror(errno));
    *ret = real;
    return 0;
}

static int set_hooks(struct nvcdi_mock_root *m)
{
    if (asprintf(&m->cdi_hook, "%s/usr/bin/nvidia-cdi-hook", m->path) < 0)
        m->cdi_hook = NULL;
    if (asprintf(&m->ctk, "%s/usr/bin/nvidia-ctk", m->path) < 0)
        m->ctk = NULL;
    return m->cdi_hook && m->ctk ? 0 : -ENOMEM;
}

static int make_root(struct nvcdi_mock_root *m, const struct gpu_inventory *inv,
                     const char *mock_lib, struct diag *d)
{
    int r = check_inventory(inv, mock_lib, d);
    if (r < 0)
        return r;
    r = make_private_dir(&m->path);
    if (r < 0)
        return diag_fail(d, r, "cannot make a private directory for the mock driver root: %s",
                         strerror(-r));
    m->made = true;
    m->owner = getpid();
    r = fill_root(m->path, inv, mock_lib, NULL, &m->char_devices);
    if (r >= 0)
        r = set_hooks(m);
    if (r < 0)
        return diag_fail(d, r, "cannot build the mock driver root %s: %s", m->path, strerror(-r));
    return 0;
}

int nvcdi_mock_root_new(const struct gpu_inventory *inv, const char *mock_lib, struct diag *d,
                        struct nvcdi_mock_root **ret)
{
    _cleanup_(nvcdi_mock_root_freep) struct nvcdi_mock_root *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    int r = profile_root(d, &m->path);
    if (r >= 0 && !m->path)
        r = make_root(m, inv, mock_lib, d);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(m);
    return 0;
}

/* ---- the lasting root of `cdi generate` ---- */

static bool plain_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > MOCK_STEM_MAX)
        return false;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

/* FNV-1a, 64 bits: a name, not a defence (the checks on the directory are). */
static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3u;
    return h;
}

void nvcdi_mock_root_name(const char *profile, const char *profile_path,
                          char ret[static NVCDI_MOCK_NAME_MAX])
{
    const char *path = profile_path && profile_path[0] ? profile_path : profile ? profile : "";
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t n = strlen(base);
    char stem[MOCK_STEM_MAX + 1];
    /* A bundled name resolves to <name>.yaml: keep the name. */
    if (profile && plain_name(profile) && n == strlen(profile) + 5 &&
        strncmp(base, profile, n - 5) == 0 && strcmp(base + n - 5, ".yaml") == 0) {
        snprintf(ret, NVCDI_MOCK_NAME_MAX, "%s", profile);
        return;
    }
    if (n > 5 && strcmp(base + n - 5, ".yaml") == 0)
        n -= 5;
    else if (n > 4 && strcmp(base + n - 4, ".yml") == 0)
        n -= 4;
    if (n > MOCK_STEM_MAX)
        n = MOCK_STEM_MAX;
    for (size_t i = 0; i < n; i++) {
        char c = base[i];
        bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_';
        stem[i] = keep ? c : '_';
    }
    stem[n] = '\0';
    snprintf(ret, NVCDI_MOCK_NAME_MAX, "%s%s%012llx", stem, n ? "-" : "",
             (unsigned long long)(fnv1a(path) >> 16));
}

/* 0 when nothing is at path, 1 when it is a directory this user may trust (a real directory, not
 * a link, owned by the effective uid, mode 0700), else the refusal. */
static int check_lasting(const char *path, struct diag *d)
{
    struct stat st;
    if (lstat(path, &st) < 0) {
        if (errno == ENOENT)
            return 0;
        return diag_fail(d, negative_errno(), "the mock driver root %s: %s", path, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode))
        return diag_fail(d, -ENOTDIR,
                         "the mock driver root %s is not a directory (%s): refusing to use it; "
                         "remove it or set TMPDIR to another directory",
                         path, S_ISLNK(st.st_mode) ? "a symbolic link" : "another kind of file");
    if (st.st_uid != geteuid())
        return diag_fail(d, -EPERM,
                         "the mock driver root %s belongs to uid %u, not to this user (uid %u): "
                         "refusing to use it; remove it or set TMPDIR to another directory",
                         path, (unsigned)st.st_uid, (unsigned)geteuid());
    if ((st.st_mode & 07777) != 0700)
        return diag_fail(d, -EPERM,
                         "the mock driver root %s has mode %04o, not 0700: refusing to use it; "
                         "remove it or set TMPDIR to another directory",
                         path, (unsigned)(st.st_mode & 07777));
    return 1;
}

/* Whether the root at path is complete and of this recipe: its marker, written last, says so. */
static bool complete(const char *path, const char *recipe, bool *ret_char_devices)
{
    _cleanup_free_ char *marker = NULL;
    char file[PATH_MAX];
    size_t len = strlen(recipe);
    int n = snprintf(file, sizeof(file), "%s%s", path, MARKER_NAME);
    if (n < 0 || n >= (int)sizeof(file) || file_read_all(file, MARKER_MAX, &marker, NULL) < 0)
        return false;
    if (strncmp(marker, recipe, len) != 0)
        return false;
    bool chars = strcmp(marker + len, nodes_line(true)) == 0;
    if (!chars && strcmp(marker + len, nodes_line(false)) != 0)
        return false;
    *ret_char_devices = chars;
    return true;
}

/* A complete root of recipe in a new directory beside final; the caller owns *ret. */
static int build_beside(const char *final, const struct gpu_inventory *inv, const char *mock_lib,
                        const char *recipe, char **ret, bool *ret_char_devices)
{
    _cleanup_free_ char *template = NULL;
    _cleanup_free_ char *dir = NULL;
    if (asprintf(&template, "%s.XXXXXX", final) < 0) {
        template = NULL;
        return -ENOMEM;
    }
    int r = make_temp_dir(template, &dir);
    if (r < 0)
        return r;
    r = fill_root(dir, inv, mock_lib, recipe, ret_char_devices);
    if (r < 0) {
        remove_tree(dir);
        return r;
    }
    *ret = TAKE_PTR(dir);
    return 0;
}

/* Puts the built root in place of what check_lasting found (0: nothing, 1: a stale root of ours).
 * A stale root is swapped out in one step where the file system allows it, so the paths of specs
 * that name it are never missing; what was swapped out is removed. */
static int install(const char *built, const char *final, int found)
{
    if (found == 0)
        return rename(built, final) < 0 ? negative_errno() : 0;
    if (renameat2(AT_FDCWD, built, AT_FDCWD, final, RENAME_EXCHANGE) == 0) {
        if (remove_tree(built) < 0)
            log_debug(1, "cannot remove a stale mock driver root", "path", built);
        return 0;
    }
    if (errno != EINVAL && errno != ENOSYS)
        return negative_errno();
    int r = remove_tree(final);
    if (r < 0)
        return r;
    return rename(built, final) < 0 ? negative_errno() : 0;
}

static int open_lasting(struct nvcdi_mock_root *m, const struct gpu_inventory *inv,
                        const char *mock_lib, const char *recipe, struct diag *d)
{
    int r = 0;
    for (int i = 0; i < LASTING_TRIES; i++) {
        _cleanup_free_ char *built = NULL;
        bool char_devices = false;
        int found = check_lasting(m->path, d);
        if (found < 0)
            return found;
        if (found && complete(m->path, recipe, &m->char_devices))
            return 0;
        r = build_beside(m->path, inv, mock_lib, recipe, &built, &char_devices);
        if (r < 0)
            return diag_fail(d, r, "cannot build the mock driver root beside %s: %s", m->path,
                             strerror(-r));
        r = install(built, m->path, found);
        if (r >= 0) {
            m->char_devices = char_devices;
            return 0;
        }
        /* Another run was quicker (or the path changed under us): look again. */
        if (access(built, F_OK) == 0)
            remove_tree(built);
    }
    return diag_fail(d, r, "cannot put the mock driver root in place at %s: %s", m->path,
                     strerror(-r));
}

int nvcdi_mock_root_open_lasting(const struct gpu_inventory *inv, const char *mock_lib,
                                 const char *profile, struct diag *d, struct nvcdi_mock_root **ret)
{
    _cleanup_(nvcdi_mock_root_freep) struct nvcdi_mock_root *m = calloc(1, sizeof(*m));
    _cleanup_free_ char *base = NULL;
    _cleanup_free_ char *recipe = NULL;
    char name[NVCDI_MOCK_NAME_MAX];
    if (!m)
        return -ENOMEM;
    int r = profile_root(d, &m->path);
    if (r < 0 || m->path) {
        if (r < 0)
            return r;
        *ret = TAKE_PTR(m);
        return 0;
    }
    r = check_inventory(inv, mock_lib, d);
    if (r < 0)
        return r;
    r = recipe_text(inv, mock_lib, &recipe);
    if (r < 0)
        return diag_fail(d, r, "the mock driver root: %s: %s", mock_lib, strerror(-r));
    r = base_dir(&base);
    if (r < 0)
        return r;
    nvcdi_mock_root_name(profile, getenv("MOCK_NVML_PROFILE"), name);
    if (asprintf(&m->path, "%s/gpuplane-mock-%u-%s", base, (unsigned)geteuid(), name) < 0) {
        m->path = NULL;
        return -ENOMEM;
    }
    if (strlen(m->path) > PATH_MAX - 256)
        return diag_fail(d, -ENAMETOOLONG, "the mock driver root %s: %s", m->path,
                         strerror(ENAMETOOLONG));
    m->lasting = true;
    m->owner = getpid();
    r = open_lasting(m, inv, mock_lib, recipe, d);
    if (r >= 0)
        r = set_hooks(m);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(m);
    return 0;
}
