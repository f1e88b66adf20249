/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Small language helpers used everywhere: cleanup attributes so every early return frees what the
 * function holds, ownership transfer (TAKE_PTR / TAKE_FD), and attribute shorthands.
 */
#pragma once

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define _wur_ __attribute__((warn_unused_result))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _unused_ __attribute__((unused))
#define _noreturn_ __attribute__((noreturn))
#define _cleanup_(f) __attribute__((cleanup(f)))

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Hand ownership of a pointer or fd out of a cleanup variable: returns the value and clears the
 * variable so the cleanup handler does nothing. */
#define TAKE_PTR(p)                                                                                \
    ({                                                                                             \
        __typeof__(p) _taken = (p);                                                                \
        (p) = NULL;                                                                                \
        _taken;                                                                                    \
    })
#define TAKE_FD(fd)                                                                                \
    ({                                                                                             \
        int _taken = (fd);                                                                         \
        (fd) = -1;                                                                                 \
        _taken;                                                                                    \
    })

static inline void freep(void *p)
{
    free(*(void **)p);
}

/* Closes and keeps errno, so a cleanup on an error path does not hide the error. */
static inline void closep(int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        close(*fd);
        errno = saved;
    }
}

static inline void fclosep(FILE **f)
{
    if (*f)
        fclose(*f);
}

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)

/* Declares `static inline void funcp(type **p)` that calls func(*p) when *p is not NULL. */
#define DEFINE_POINTER_CLEANUP(type, func)                                                         \
    static inline void func##p(type **p)                                                           \
    {                                                                                              \
        if (*p)                                                                                    \
            func(*p);                                                                              \
    }

/* The value of a hexadecimal digit (either case), or -1 for any other character. */
static inline int hex_digit_value(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A negative errno from a libc call that set errno; never 0, so a caller can rely on failure. */
static inline int negative_errno(void)
{
    return errno > 0 ? -errno : -EIO;
}
