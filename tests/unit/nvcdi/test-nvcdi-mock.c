/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the driver root of a simulated node (nvcdi-mock.c) with a hand-made inventory and a
 * stand-in for the mock library, under a scratch $TMPDIR: the majors picked from /proc/devices
 * text, the MIG capability numbering, the layout (device nodes, character devices when the test
 * runs as root, the library copy and its links, the stubs, mig-minors) and that nvcdi finds what it
 * needs there; removal by the owner only; a profile's driverRoot taking the place of a made root;
 * refusals that leave nothing behind. The lasting root of `cdi generate`: its name, reuse, a
 * rebuild when it is incomplete or of another recipe, refusal of what it must not trust (a link,
 * a file, another mode, another owner when the test runs as root), concurrent runs.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "nvcdi-internal.h"
#include "nvcdi.h"
#include "test-tmpdir.h"

#define LIBDIR "/usr/lib/x86_64-linux-gnu"
#define LIB_TEXT "not really a library"

struct fixture {
    char scratch[64];
    char lib[128];
    struct gpu_mig_device migs[1];
    struct gpu_device devices[3];
    struct gpu_inventory inv;
};

static void write_file(const char *path, const char *text)
{
    assert_int_equal(file_write_atomic(path, text, strlen(text), 0644), 0);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    if (!f)
        return -1;
    snprintf(f->scratch, sizeof(f->scratch), "/tmp/test_nvcdi_mock_XXXXXX");
    if (!mkdtemp(f->scratch))
        return -1;
    snprintf(f->lib, sizeof(f->lib), "%s/libnvidia-ml.so.1", f->scratch);
    write_file(f->lib, LIB_TEXT);
    setenv("TMPDIR", f->scratch, 1);
    unsetenv("MOCK_NVML_PROFILE");
    f->migs[0] = (struct gpu_mig_device){
        .index = 0, .gi_id = 1, .ci_id = 0, .uuid = "MIG-00000000-0000-4000-8000-000000000001"};
    f->devices[0] = (struct gpu_device){.index = 0,
                                        .minor = 0,
                                        .mig_enabled = true,
                                        .uuid = "GPU-00000000-0000-4000-8000-00000000000a",
                                        .n_migs = 1,
                                        .migs = f->migs};
    f->devices[1] = (struct gpu_device){
        .index = 1, .minor = 3, .uuid = "GPU-00000000-0000-4000-8000-00000000000b"};
    /* A lost GPU: NVML gave no minor; the profile's default is its index. */
    f->devices[2] = (struct gpu_device){.index = 2, .error = 15, .lost = true};
    snprintf(f->inv.driver_version, sizeof(f->inv.driver_version), "550.54.15");
    f->inv.n_devices = 3;
    f->inv.devices = f->devices;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    int r = test_tmpdir_remove(f->scratch);
    unsetenv("TMPDIR");
    free(f);
    return r == 0 ? 0 : -1;
}

/* The number of entries in dir, "." and ".." aside. */
static size_t entries(const char *dir)
{
    size_t n = 0;
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static struct nvcdi_mock_root *make(struct fixture *f)
{
    struct nvcdi_mock_root *m = NULL;
    struct diag d;
    diag_init(&d);
    if (nvcdi_mock_root_new(&f->inv, f->lib, &d, &m) < 0)
        fail_msg("nvcdi_mock_root_new: %s", d.msg);
    return m;
}

static void stat_in(const struct nvcdi_mock_root *m, const char *rel, struct stat *st)
{
    char path[512];
    snprintf(path, sizeof(path), "%s%s", m->path, rel);
    if (lstat(path, st) < 0)
        fail_msg("%s is missing", path);
}

static const struct {
    const char *proc_devices;
    const char *name;
    unsigned avoid;
    unsigned want;
} MAJOR_CASES[] = {
    {NULL, "nvidia-uvm", 0, 254},
    {"", "nvidia-uvm", 0, 254},
    {"Character devices:\n  1 mem\n510 nvidia-uvm\n195 nvidia\n", "nvidia-uvm", 0, 510},
    /* "nvidia-uvm-tools" is not "nvidia-uvm"; a block major does not count. */
    {"Character devices:\n236 nvidia-uvm-tools\n\nBlock devices:\n254 nvidia-uvm\n", "nvidia-uvm",
     0, 254},
    {"Character devices:\n254 ndctl\n253 dimmctl\n\nBlock devices:\n252 virtblk\n", "nvidia-caps",
     0, 252},
    {"Character devices:\n254 ndctl\n", "nvidia-caps", 253, 252},
    {"Character devices:\n240 a\n241 a\n242 a\n243 a\n244 a\n245 a\n246 a\n247 a\n248 a\n249 a\n"
     "250 a\n251 a\n252 a\n253 a\n254 a\n",
     "nvidia-caps", 0, 0},
    {"Character devices:\n  x garbage\n9999999 big\n", "nvidia-caps", 0, 254},
};

static void test_major(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(MAJOR_CASES); i++) {
        unsigned got = nvcdi_mock_major(MAJOR_CASES[i].proc_devices, MAJOR_CASES[i].name,
                                        MAJOR_CASES[i].avoid);
        if (got != MAJOR_CASES[i].want)
            fail_msg("case %zu: major %u, want %u", i, got, MAJOR_CASES[i].want);
    }
}

static void test_mig_cap_minor(void **state)
{
    (void)state;
    assert_int_equal(nvcdi_mig_cap_minor(0, 1, -1), 12);
    assert_int_equal(nvcdi_mig_cap_minor(0, 1, 0), 13);
    assert_int_equal(nvcdi_mig_cap_minor(0, 2, -1), 21);
    assert_int_equal(nvcdi_mig_cap_minor(1, 1, -1), 147);
    assert_int_equal(nvcdi_mig_cap_minor(1, 14, 7), 3 + 135 + 9 * 14 + 8);
}

static void check_node(const struct nvcdi_mock_root *m, const char *rel, int major, unsigned minor)
{
    struct stat st;
    stat_in(m, rel, &st);
    if (!m->char_devices) {
        assert_true(S_ISREG(st.st_mode));
        return;
    }
    assert_true(S_ISCHR(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0666);
    if (major >= 0)
        assert_int_equal(major(st.st_rdev), major);
    assert_int_equal(minor(st.st_rdev), minor);
}

static void test_layout(void **state)
{
    struct fixture *f = *state;
    struct nvcdi_mock_root *m = make(f);
    struct stat st;
    char *text = NULL;
    char path[512];
    assert_true(m->made);
    assert_int_equal(strncmp(m->path, f->scratch, strlen(f->scratch)), 0);
    assert_int_equal(stat(m->path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(m->char_devices, geteuid() == 0);
    check_node(m, "/dev/nvidia0", 195, 0);
    check_node(m, "/dev/nvidia3", 195, 3);
    check_node(m, "/dev/nvidia2", 195, 2);
    check_node(m, "/dev/nvidiactl", 195, 255);
    check_node(m, "/dev/nvidia-modeset", 195, 254);
    check_node(m, "/dev/nvidia-uvm", -1, 0);
    check_node(m, "/dev/nvidia-uvm-tools", -1, 1);
    check_node(m, "/dev/nvidia-caps/nvidia-cap1", -1, 1);
    check_node(m, "/dev/nvidia-caps/nvidia-cap12", -1, 12);
    check_node(m, "/dev/nvidia-caps/nvidia-cap13", -1, 13);
    snprintf(path, sizeof(path), "%s" LIBDIR "/libnvidia-ml.so.1", m->path);
    assert_int_equal(file_read_all(path, 1024, &text, NULL), 0);
    assert_string_equal(text, LIB_TEXT);
    free(text);
    stat_in(m, LIBDIR "/libcuda.so", &st);
    assert_true(S_ISLNK(st.st_mode));
    stat_in(m, "/usr/bin/nvidia-cdi-hook", &st);
    assert_true(S_ISREG(st.st_mode) && (st.st_mode & 0111) == 0111);
    assert_int_equal(access(m->cdi_hook, X_OK), 0);
    assert_int_equal(access(m->ctk, X_OK), 0);
    snprintf(path, sizeof(path), "%s/proc/driver/nvidia-caps/mig-minors", m->path);
    assert_int_equal(file_read_all(path, 1 << 20, &text, NULL), 0);
    assert_non_null(strstr(text, "config 1\nmonitor 2\n"));
    assert_non_null(strstr(text, "gpu3/gi1/access 417\n"));
    assert_non_null(strstr(text, "gpu0/gi1/ci0/access 13\n"));
    free(text);
    nvcdi_mock_root_free(m);
    assert_int_equal(entries(f->scratch), 1); /* only the stand-in library is left */
}

/* What nvcdi needs is there: the spec of the inventory builds, under the root's paths. */
static void test_nvcdi_finds_it(void **state)
{
    struct fixture *f = *state;
    struct nvcdi_mock_root *m = make(f);
    struct nvcdi *nv = NULL;
    struct cdi_spec *spec = NULL;
    struct diag d;
    diag_init(&d);
    const struct nvcdi_options o = {.driver_root = m->path, .hook_path = m->cdi_hook};
    f->inv.n_devices = 2; /* the lost GPU would be left out anyway */
    if (nvcdi_new(&f->inv, &o, &d, &nv) < 0 || nvcdi_spec_new(nv, &f->inv, &d, &spec, NULL) < 0)
        fail_msg("nvcdi: %s", d.msg);
    assert_non_null(cdi_spec_find_device(spec, "0:0"));
    const struct cdi_mount *mount = VEC_AT(&spec->edits.mounts, struct cdi_mount, 0);
    assert_int_equal(strncmp(mount->host_path, m->path, strlen(m->path)), 0);
    const struct cdi_hook *hook = VEC_AT(&spec->edits.hooks, struct cdi_hook, 0);
    assert_string_equal(hook->path, m->cdi_hook);
    assert_int_equal(spec->edits.device_nodes.len, 4);
    cdi_spec_free(spec);
    nvcdi_free(nv);
    nvcdi_mock_root_free(m);
}

/* A forked child owns nothing: freeing its copy leaves the root to the parent. */
static void test_only_the_owner_removes(void **state)
{
    struct fixture *f = *state;
    struct nvcdi_mock_root *m = make(f);
    int status = 0;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        nvcdi_mock_root_free(m);
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(access(m->path, F_OK), 0);
    nvcdi_mock_root_free(m);
    assert_int_equal(entries(f->scratch), 1);
}

static void test_profile_root_wins(void **state)
{
    struct fixture *f = *state;
    char profile[128], root[128];
    snprintf(root, sizeof(root), "%s/root", f->scratch);
    assert_int_equal(mkdir(root, 0755), 0);
    snprintf(profile, sizeof(profile), "%s/node.yaml", f->scratch);
    write_file(profile, "driverRoot: root\ngpus: []\n");
    setenv("MOCK_NVML_PROFILE", profile, 1);
    struct nvcdi_mock_root *m = make(f);
    assert_false(m->made);
    assert_string_equal(m->path, root);
    assert_null(m->cdi_hook);
    nvcdi_mock_root_free(m);
    assert_int_equal(access(root, F_OK), 0);
    unsetenv("MOCK_NVML_PROFILE");
}

static void test_refusals_leave_nothing(void **state)
{
    struct fixture *f = *state;
    struct nvcdi_mock_root *m = NULL;
    struct diag d;
    diag_init(&d);
    assert_int_equal(nvcdi_mock_root_new(&f->inv, "relative.so", &d, &m), -EINVAL);
    snprintf(f->inv.driver_version, sizeof(f->inv.driver_version), "../x");
    assert_int_equal(nvcdi_mock_root_new(&f->inv, f->lib, &d, &m), -EINVAL);
    snprintf(f->inv.driver_version, sizeof(f->inv.driver_version), "550.54.15");
    f->migs[0].gi_id = 15;
    assert_int_equal(nvcdi_mock_root_new(&f->inv, f->lib, &d, &m), -ERANGE);
    f->migs[0].gi_id = 1;
    /* The library cannot be copied: the half-made root goes. */
    char missing[160];
    snprintf(missing, sizeof(missing), "%s/missing.so", f->scratch);
    assert_true(nvcdi_mock_root_new(&f->inv, missing, &d, &m) < 0);
    assert_null(m);
    assert_int_equal(entries(f->scratch), 1);
}

/* An unusable $TMPDIR falls back to /tmp. */
static void test_bad_tmpdir(void **state)
{
    struct fixture *f = *state;
    setenv("TMPDIR", "/tmp/../tmp", 1);
    struct nvcdi_mock_root *m = make(f);
    assert_int_equal(strncmp(m->path, "/tmp/gpuplane-mock-", 19), 0);
    nvcdi_mock_root_free(m);
}

/* ---- the lasting root ---- */

static const struct {
    const char *profile;
    const char *path;
    const char *want; /* the name, or its stem followed by '-' and 12 hex digits when it ends so */
} NAME_CASES[] = {
    {"dgx-h100", "/src/examples/nodes/dgx-h100.yaml", "dgx-h100"},
    {"a100-mig", "/usr/share/gpuplane/nodes/a100-mig.yaml", "a100-mig"},
    /* A file that happens to have a bundled name is a path. */
    {"dgx-h100", "/home/u/dgx-h100", "dgx-h100-"},
    {"node.yaml", "/home/u/node.yaml", "node-"},
    {"../n/My node!.yml", "/home/n/My node!.yml", "My_node_-"},
    {"x", "/p/0123456789012345678901234567890123456789.yaml", "01234567890123456789012345678901-"},
    {NULL, NULL, "-"},
};

static void test_root_name(void **state)
{
    (void)state;
    char name[NVCDI_MOCK_NAME_MAX], other[NVCDI_MOCK_NAME_MAX];
    for (size_t i = 0; i < ARRAY_SIZE(NAME_CASES); i++) {
        const char *want = NAME_CASES[i].want;
        size_t stem = strlen(want) - 1;
        nvcdi_mock_root_name(NAME_CASES[i].profile, NAME_CASES[i].path, name);
        if (want[stem] != '-') {
            assert_string_equal(name, want);
            continue;
        }
        stem = stem == 0 ? 0 : stem + 1;
        if (strncmp(name, want, stem) != 0 || strlen(name) != stem + 12 ||
            strspn(name + stem, "0123456789abcdef") != 12)
            fail_msg("case %zu: name \"%s\", want \"%sXXXXXXXXXXXX\"", i, name, want);
    }
    /* Two files of the same name in different places have different roots. */
    nvcdi_mock_root_name("node.yaml", "/a/node.yaml", name);
    nvcdi_mock_root_name("node.yaml", "/b/node.yaml", other);
    assert_string_not_equal(name, other);
    nvcdi_mock_root_name("node.yaml", "/a/node.yaml", other);
    assert_string_equal(name, other);
}

/* The path nvcdi_mock_root_open_lasting uses for profile under the scratch $TMPDIR. */
static void lasting_path(const struct fixture *f, const char *profile, char path[static 256])
{
    char name[NVCDI_MOCK_NAME_MAX];
    nvcdi_mock_root_name(profile, NULL, name);
    snprintf(path, 256, "%s/gpuplane-mock-%u-%s", f->scratch, (unsigned)geteuid(), name);
}

static struct nvcdi_mock_root *open_lasting(struct fixture *f)
{
    struct nvcdi_mock_root *m = NULL;
    struct diag d;
    diag_init(&d);
    if (nvcdi_mock_root_open_lasting(&f->inv, f->lib, "node", &d, &m) < 0)
        fail_msg("nvcdi_mock_root_open_lasting: %s", d.msg);
    return m;
}

static ino_t inode(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        fail_msg("%s is missing", path);
    return st.st_ino;
}

static void check_complete(const struct nvcdi_mock_root *m, const char *version)
{
    struct stat st;
    char rel[128];
    stat_in(m, "/gpuplane-mock-root", &st);
    assert_true(S_ISREG(st.st_mode));
    check_node(m, "/dev/nvidia3", 195, 3);
    check_node(m, "/dev/nvidia-caps/nvidia-cap13", -1, 13);
    snprintf(rel, sizeof(rel), LIBDIR "/libnvidia-ml.so.%s", version);
    stat_in(m, rel, &st);
    assert_int_equal(access(m->cdi_hook, X_OK), 0);
}

static void test_lasting_reused(void **state)
{
    struct fixture *f = *state;
    char want[256];
    lasting_path(f, "node", want);
    struct nvcdi_mock_root *m = open_lasting(f);
    struct stat st;
    assert_string_equal(m->path, want);
    assert_true(m->lasting);
    assert_false(m->made);
    assert_int_equal(m->char_devices, geteuid() == 0);
    assert_int_equal(lstat(m->path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0700);
    check_complete(m, "550.54.15");
    ino_t dir = inode(m->path), hook = inode(m->cdi_hook);
    nvcdi_mock_root_free(m);
    assert_int_equal(access(want, F_OK), 0); /* it stays */
    m = open_lasting(f);
    assert_string_equal(m->path, want);
    assert_int_equal(m->char_devices, geteuid() == 0);
    assert_true(inode(m->path) == dir && inode(m->cdi_hook) == hook); /* not rebuilt */
    nvcdi_mock_root_free(m);
    assert_int_equal(entries(f->scratch), 2); /* the library and the root, no leftovers */
}

static void test_lasting_rebuilt(void **state)
{
    struct fixture *f = *state;
    char path[256], junk[512];
    lasting_path(f, "node", path);
    /* An interrupted run of an older version: the directory, no marker. */
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(junk, sizeof(junk), "%s/junk", path);
    write_file(junk, "x");
    struct nvcdi_mock_root *m = open_lasting(f);
    check_complete(m, "550.54.15");
    assert_int_equal(access(junk, F_OK), -1);
    ino_t dir = inode(m->path);
    nvcdi_mock_root_free(m);
    /* Another recipe (a new driver version): rebuilt, the old library gone. */
    snprintf(f->inv.driver_version, sizeof(f->inv.driver_version), "560.1.2");
    m = open_lasting(f);
    check_complete(m, "560.1.2");
    assert_true(inode(m->path) != dir);
    snprintf(junk, sizeof(junk), "%s" LIBDIR "/libnvidia-ml.so.550.54.15", path);
    assert_int_equal(access(junk, F_OK), -1);
    nvcdi_mock_root_free(m);
    /* A marker cut short is not complete either. */
    snprintf(junk, sizeof(junk), "%s/gpuplane-mock-root", path);
    assert_int_equal(truncate(junk, 10), 0);
    dir = inode(path);
    m = open_lasting(f);
    check_complete(m, "560.1.2");
    assert_true(inode(m->path) != dir);
    nvcdi_mock_root_free(m);
    assert_int_equal(entries(f->scratch), 2);
}

/* Whatever the path holds that is not this user's private directory is refused, and left alone. */
static void expect_refused(struct fixture *f, const char *path, int err)
{
    struct nvcdi_mock_root *m = NULL;
    struct diag d;
    diag_init(&d);
    assert_int_equal(nvcdi_mock_root_open_lasting(&f->inv, f->lib, "node", &d, &m), err);
    assert_null(m);
    if (!strstr(d.msg, path))
        fail_msg("the refusal does not name %s: %s", path, d.msg);
}

static void test_lasting_refusals(void **state)
{
    struct fixture *f = *state;
    char path[256], target[128];
    struct stat st;
    lasting_path(f, "node", path);
    snprintf(target, sizeof(target), "%s/elsewhere", f->scratch);
    assert_int_equal(mkdir(target, 0700), 0);
    assert_int_equal(symlink(target, path), 0);
    expect_refused(f, path, -ENOTDIR);
    assert_int_equal(entries(target), 0);
    assert_int_equal(unlink(path), 0);
    write_file(path, "");
    expect_refused(f, path, -ENOTDIR);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(chmod(path, 0755), 0);
    expect_refused(f, path, -EPERM);
    assert_int_equal(chmod(path, 01700), 0);
    expect_refused(f, path, -EPERM);
    assert_int_equal(chmod(path, 0700), 0);
    if (geteuid() == 0) {
        assert_int_equal(chown(path, 65534, 65534), 0);
        expect_refused(f, path, -EPERM);
        assert_int_equal(lstat(path, &st), 0);
        assert_int_equal(st.st_uid, 65534);
        assert_int_equal(entries(path), 0);
    }
    assert_int_equal(rmdir(path), 0);
    assert_int_equal(rmdir(target), 0);
    assert_int_equal(entries(f->scratch), 1); /* nothing built beside it was left */
}

/* Runs racing to make the same root: all succeed with it, one root and nothing else is left. */
static void test_lasting_concurrent(void **state)
{
    struct fixture *f = *state;
    enum {
        RUNS = 4
    };
    pid_t pids[RUNS];
    for (int i = 0; i < RUNS; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            struct nvcdi_mock_root *m = NULL;
            struct diag d;
            diag_init(&d);
            int r = nvcdi_mock_root_open_lasting(&f->inv, f->lib, "node", &d, &m);
            bool ok = r >= 0 && access(m->cdi_hook, X_OK) == 0;
            nvcdi_mock_root_free(m);
            _exit(ok ? 0 : 1);
        }
    }
    for (int i = 0; i < RUNS; i++) {
        int status = 0;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    assert_int_equal(entries(f->scratch), 2);
    struct nvcdi_mock_root *m = open_lasting(f);
    check_complete(m, "550.54.15");
    nvcdi_mock_root_free(m);
}

static void test_lasting_profile_root_wins(void **state)
{
    struct fixture *f = *state;
    char profile[128], root[128];
    snprintf(root, sizeof(root), "%s/root", f->scratch);
    assert_int_equal(mkdir(root, 0755), 0);
    snprintf(profile, sizeof(profile), "%s/node.yaml", f->scratch);
    write_file(profile, "driverRoot: root\ngpus: []\n");
    setenv("MOCK_NVML_PROFILE", profile, 1);
    struct nvcdi_mock_root *m = open_lasting(f);
    assert_false(m->made || m->lasting);
    assert_string_equal(m->path, root);
    assert_null(m->cdi_hook);
    nvcdi_mock_root_free(m);
    assert_int_equal(entries(f->scratch), 3); /* the library, the profile, its root */
    unsetenv("MOCK_NVML_PROFILE");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_major),
        cmocka_unit_test(test_mig_cap_minor),
        cmocka_unit_test_setup_teardown(test_layout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nvcdi_finds_it, setup, teardown),
        cmocka_unit_test_setup_teardown(test_only_the_owner_removes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_profile_root_wins, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals_leave_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_tmpdir, setup, teardown),
        cmocka_unit_test(test_root_name),
        cmocka_unit_test_setup_teardown(test_lasting_reused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lasting_rebuilt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lasting_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lasting_concurrent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lasting_profile_root_wins, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
