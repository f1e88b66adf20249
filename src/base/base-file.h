/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Files that survive a crash: an atomic replace (write a temporary file beside the target, fsync
 * it, rename it over the target, fsync the directory), whole-file reads with a size cap, and
 * advisory locks (flock) that say which process holds a state directory. All return 0 or a negative
 * errno.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base-macro.h"

/* Replaces path with data, atomically: after a crash at any point the file holds either the old or
 * the new contents in full, never a mix. The file gets the given mode (e.g. 0600). */
_wur_ int file_write_atomic(const char *path, const void *data, size_t len, mode_t mode);

/* Reads a whole file. -EFBIG if it is larger than cap bytes. The caller frees *ret_data, which is
 * NUL-terminated (not counted in *ret_len). */
_wur_ int file_read_all(const char *path, size_t cap, char **ret_data, size_t *ret_len);

/* Opens (creating, mode 0600) and flocks path exclusively. wait=false returns -EWOULDBLOCK when
 * another process holds it. The lock lives as long as the returned fd; close it to release. */
_wur_ int file_lock(const char *path, bool wait, int *ret_fd);

/* mkdir -p with the given mode for the directories it creates. */
_wur_ int file_mkdir_p(const char *path, mode_t mode);
