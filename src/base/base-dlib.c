/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Loading optional libraries at first use (base-dlib.h). RTLD_LOCAL keeps their symbols out of the
 * global namespace, so two modules loading the same library do not see each other's choices, and
 * RTLD_NOW makes a missing symbol an error here rather than a crash in the middle of a call.
 */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>

#include "base-dlib.h"

static void clear_syms(const struct dlib *lib)
{
    for (size_t i = 0; i < lib->n_syms; i++)
        *lib->syms[i].ptr = NULL;
}

static int load(struct dlib *lib, struct diag *d)
{
    void *h = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return diag_fail(d, -ENOENT, "%s cannot be loaded (install the %s package): %s",
                         lib->soname, lib->package, dlerror());
    for (size_t i = 0; i < lib->n_syms; i++) {
        void *p = dlsym(h, lib->syms[i].name);
        if (!p) {
            clear_syms(lib);
            dlclose(h);
            return diag_fail(d, -ENOENT, "%s has no symbol %s: is the %s package too old?",
                             lib->soname, lib->syms[i].name, lib->package);
        }
        *lib->syms[i].ptr = p;
    }
    lib->handle = h;
    return 0;
}

int dlib_acquire(struct dlib *lib, struct diag *d)
{
    int r = 0;
    pthread_mutex_lock(&lib->lock);
    if (!lib->handle)
        r = load(lib, d);
    if (r >= 0)
        lib->refs++;
    pthread_mutex_unlock(&lib->lock);
    return r;
}

int dlib_pin(struct dlib *lib, struct diag *d)
{
    int r = 0;
    pthread_mutex_lock(&lib->lock);
    if (!lib->pinned) {
        if (!lib->handle)
            r = load(lib, d);
        if (r >= 0) {
            lib->refs++;
            lib->pinned = true;
        }
    }
    pthread_mutex_unlock(&lib->lock);
    return r;
}

void dlib_release(struct dlib *lib)
{
    pthread_mutex_lock(&lib->lock);
    unsigned floor = lib->pinned ? 1 : 0; /* a pin is never given back */
    if (lib->refs > floor && --lib->refs == 0 && lib->unload && lib->handle) {
        clear_syms(lib);
        dlclose(lib->handle);
        lib->handle = NULL;
    }
    pthread_mutex_unlock(&lib->lock);
}

bool dlib_loaded(struct dlib *lib)
{
    pthread_mutex_lock(&lib->lock);
    bool loaded = lib->handle != NULL;
    pthread_mutex_unlock(&lib->lock);
    return loaded;
}
