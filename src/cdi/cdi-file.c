/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Spec files in a spec directory (/var/run/cdi, /etc/cdi). Runtimes rescan these directories on
 * every container create or on inotify events, so a half-written file would be read as a broken
 * spec: we write a temporary file whose name does not end in .json/.yaml (runtimes ignore it),
 * fsync it and rename it over the final name (file_write_atomic). Names follow the reference
 * library's convention (cdi.md §5) so two producers never write the same file.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdi-internal.h"

#define SPEC_FILE_MODE 0644
#define SPEC_DIR_MODE 0755

/* A transient id becomes part of a file name: after '/' -> '_', only characters that cannot
 * escape the directory or hide the file. */
static bool valid_transient_id(const char *id)
{
    if (!id[0] || id[0] == '.')
        return false;
    for (const char *p = id; *p; p++)
        if (!cdi_is_alnum(*p) && !strchr("_-./", *p))
            return false;
    return true;
}

int cdi_spec_file_name(const char *kind, const char *transient_id, enum cdi_format format,
                       struct diag *d, char **ret)
{
    _cleanup_free_ char *vendor = NULL;
    _cleanup_free_ char *class = NULL;
    char *name = NULL;
    int r;
    if (!cdi_valid_kind(kind))
        return diag_fail(d, -EINVAL, "invalid CDI kind \"%s\"", kind ? kind : "");
    if (transient_id && !valid_transient_id(transient_id))
        return diag_fail(d, -EINVAL, "invalid transient CDI spec id \"%s\"", transient_id);
    r = cdi_split_kind(kind, &vendor, &class);
    if (r < 0)
        return r;
    if (transient_id)
        r = asprintf(&name, "%s-%s_%s.%s", vendor, class, transient_id,
                     cdi_format_extension(format));
    else
        r = asprintf(&name, "%s-%s.%s", vendor, class, cdi_format_extension(format));
    if (r < 0)
        return -ENOMEM;
    /* Only the id part can hold a '/'; the kind's is gone with the split. */
    for (char *p = name; *p; p++)
        if (*p == '/')
            *p = '_';
    *ret = name;
    return 0;
}

/* Makes sure dir is a directory, creating it (and its parents) when missing. */
static int ensure_dir(const char *dir, struct diag *d)
{
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            return diag_fail(d, -ENOTDIR, "CDI spec directory %s is not a directory", dir);
        return 0;
    }
    if (errno != ENOENT)
        return diag_fail(d, negative_errno(), "CDI spec directory %s: %s", dir, strerror(errno));
    int r = file_mkdir_p(dir, SPEC_DIR_MODE);
    if (r < 0)
        return diag_fail(d, r, "cannot create the CDI spec directory %s: %s", dir, strerror(-r));
    return 0;
}

static int path_join(const char *dir, const char *name, char **ret)
{
    size_t len = strlen(dir);
    const char *sep = len > 0 && dir[len - 1] == '/' ? "" : "/";
    if (asprintf(ret, "%s%s%s", dir, sep, name) < 0)
        return -ENOMEM;
    return 0;
}

int cdi_spec_write(const struct cdi_spec *spec, const char *dir, const char *transient_id,
                   enum cdi_format format, struct diag *d, char **ret_path)
{
    _cleanup_free_ char *name = NULL;
    _cleanup_free_ char *path = NULL;
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    if (!dir)
        dir = CDI_SPEC_DIR_DYNAMIC;
    int r = cdi_spec_file_name(spec->kind, transient_id, format, d, &name);
    if (r >= 0)
        r = cdi_spec_format(spec, format, d, &text, &len);
    if (r >= 0)
        r = ensure_dir(dir, d);
    if (r < 0)
        return r;
    r = path_join(dir, name, &path);
    if (r < 0)
        return r;
    r = file_write_atomic(path, text, len, SPEC_FILE_MODE);
    if (r < 0)
        return diag_fail(d, r, "cannot write the CDI spec %s: %s", path, strerror(-r));
    if (ret_path)
        *ret_path = TAKE_PTR(path);
    return 0;
}

static int remove_one(const char *dir, const char *kind, const char *transient_id,
                      enum cdi_format format, struct diag *d)
{
    _cleanup_free_ char *name = NULL;
    _cleanup_free_ char *path = NULL;
    int r = cdi_spec_file_name(kind, transient_id, format, d, &name);
    if (r >= 0)
        r = path_join(dir, name, &path);
    if (r < 0)
        return r;
    if (unlink(path) < 0 && errno != ENOENT)
        return diag_fail(d, negative_errno(), "cannot remove the CDI spec %s: %s", path,
                         strerror(errno));
    return 0;
}

int cdi_spec_remove(const char *dir, const char *kind, const char *transient_id, struct diag *d)
{
    if (!dir)
        dir = CDI_SPEC_DIR_DYNAMIC;
    int r = remove_one(dir, kind, transient_id, CDI_FORMAT_JSON, d);
    if (r >= 0)
        r = remove_one(dir, kind, transient_id, CDI_FORMAT_YAML, d);
    return r;
}
