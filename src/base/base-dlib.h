/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Optional shared libraries loaded at first use. A daemon maps only the libraries its job needs:
 * the device plugin never touches TLS, YAML or regular expressions, so it must not pay for them. A
 * module that calls such a library declares a struct dlib naming the library, the Debian package
 * that ships it, and a table of the symbols it calls (pointers typed after the library's own
 * header, so a call through them is checked by the compiler as a direct call would be).
 *
 * dlib_acquire() loads the library and resolves every symbol the first time; dlib_release() drops a
 * reference and, for a library marked unloadable, unmaps it when the last user is gone.
 * Thread-safe.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>

#include "base-diag.h"
#include "base-macro.h"

/* The symbol's real name after macro expansion: pcre2_compile is pcre2_compile_8 in the 8-bit API.
 */
#define DLIB_NAME_(x) #x
#define DLIB_NAME(x) DLIB_NAME_(x)
/* One row of a symbol table: DLIB_SYM(pcre.compile, pcre2_compile). */
#define DLIB_SYM(ptr, fn)                                                                          \
    {                                                                                              \
        DLIB_NAME(fn), (void **)&(ptr)                                                             \
    }

struct dlib_sym {
    const char *name;
    void **ptr;
};

struct dlib {
    const char *soname;  /* "libpcre2-8.so.0": the name the dynamic linker looks up */
    const char *package; /* the Debian package that ships it, named when it is missing */
    const struct dlib_sym *syms;
    size_t n_syms;
    bool unload; /* unmap when the last reference is released */
    /* state */
    pthread_mutex_t lock;
    void *handle;
    unsigned refs;
    bool pinned;
};

#define DLIB_INIT(so, pkg, table, unloadable)                                                      \
    {                                                                                              \
        .soname = (so), .package = (pkg), .syms = (table), .n_syms = ARRAY_SIZE(table),            \
        .unload = (unloadable), .lock = PTHREAD_MUTEX_INITIALIZER                                  \
    }

/* Takes a reference, loading the library and every symbol of its table on first use. On failure
 * (library or a symbol missing) d says which, and which package to install; nothing is held. */
_wur_ int dlib_acquire(struct dlib *lib, struct diag *d);

/* Drops a reference taken by dlib_acquire(). The symbol pointers are cleared when the library is
 * unmapped. */
void dlib_release(struct dlib *lib);

/* Takes, once, a reference that is never released: for libraries whose objects outlive any scope
 * (compiled patterns, TLS contexts). Later calls only check that it is there. */
_wur_ int dlib_pin(struct dlib *lib, struct diag *d);

/* Whether the library is mapped now (for tests and /proc checks). */
bool dlib_loaded(struct dlib *lib);
