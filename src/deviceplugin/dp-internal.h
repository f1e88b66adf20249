/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the daemon's files share inside the module: one served endpoint per resource
 * (dp-plugin.c), its registration with the kubelet (dp-register.c), the watch on the kubelet's
 * directory (dp-watch.c) and the daemon that owns them all on one event loop (dp-daemon.c).
 * Everything here runs on the loop thread.
 */
#pragma once

#include <sys/stat.h>

#include "dp.h"

/* ---- one endpoint (dp-plugin.c) ---- */

struct dp_plugin;

/* What a plugin serves from; all of it outlives the plugin. */
struct dp_plugin_ctx {
    struct ev_loop *loop;
    const struct dp_config *cfg;
    const struct dp_alloc_ctx *alloc;
    const struct dp_topo *topo;
};

/* A plugin for resource res whose socket will be <dir>/<res->endpoint>. Not serving yet. */
_wur_ int dp_plugin_new(const struct dp_plugin_ctx *ctx, struct dp_resource *res, const char *dir,
                        struct dp_plugin **ret);
/* (Re)starts serving: a fresh gRPC server listening on the socket (a previous one is dropped,
 * its ListAndWatch streams end). */
_wur_ int dp_plugin_serve(struct dp_plugin *p, struct diag *d);
/* Sends the resource's current devices to every open ListAndWatch stream. */
void dp_plugin_broadcast(struct dp_plugin *p);
/* Whether the socket we bound is still there (same inode and ctime). */
bool dp_plugin_socket_ok(const struct dp_plugin *p);
/* Graceful stop: streams end with OK, calls in flight finish, the socket goes; done(userdata) runs
 * once all connections are closed. */
void dp_plugin_shutdown(struct dp_plugin *p, void (*done)(void *userdata), void *userdata);
/* Serves res from now on: a rebuilt resource of the same name (and so the same endpoint) that
 * replaces the one the plugin was made with; the open streams stay (broadcast to tell them). */
void dp_plugin_set_resource(struct dp_plugin *p, struct dp_resource *res);
/* Immediate stop (removes our socket). NULL-safe; returns NULL. */
struct dp_plugin *dp_plugin_free(struct dp_plugin *p);
DEFINE_POINTER_CLEANUP(struct dp_plugin, dp_plugin_free)

/* ---- registration (dp-register.c) ---- */

struct dp_registrar;

/* Registers resource on endpoint (a file name in the kubelet's directory) through
 * kubelet_socket. */
_wur_ int dp_registrar_new(struct ev_loop *loop, const char *kubelet_socket, const char *resource,
                           const char *endpoint, struct dp_registrar **ret);
/* Registers now, resetting the back-off, unless a call to the same kubelet.sock (same inode and
 * ctime) is already in flight; an attempt to an older kubelet is dropped. Failures are retried
 * with back-off (100 ms doubling to 30 s) forever. */
void dp_registrar_start(struct dp_registrar *r);
/* Our socket was gone and is served anew: dp_registrar_start, and should a call to this kubelet be
 * in flight, it announced the old socket, so one more Register follows its success. */
void dp_registrar_served_again(struct dp_registrar *r);
/* kubelet.sock was created: dp_registrar_start unless already registered through that very file
 * (a kubelet restart deletes our socket first; when that removal is read from inotify before the
 * creation, the Register it triggers may already have reached the new kubelet). */
void dp_registrar_kubelet_created(struct dp_registrar *r);
struct dp_registrar *dp_registrar_free(struct dp_registrar *r);
DEFINE_POINTER_CLEANUP(struct dp_registrar, dp_registrar_free)

/* ---- the kubelet directory (dp-watch.c) ---- */

enum dp_watch_what {
    DP_WATCH_KUBELET, /* kubelet.sock appeared as a new file (a kubelet (re)start) */
    DP_WATCH_REMOVED, /* a file of the directory went away (name says which) */
    DP_WATCH_RESCAN,  /* events were lost: check everything */
};

typedef void (*dp_watch_fn)(enum dp_watch_what what, const char *name, void *userdata);

struct dp_watch;

/* Watches dir (created if missing) for the kubelet socket kubelet_name being created and files
 * being removed. The kubelet socket present now counts as seen. */
_wur_ int dp_watch_new(struct ev_loop *loop, const char *dir, const char *kubelet_name,
                       dp_watch_fn fn, void *userdata, struct dp_watch **ret);
struct dp_watch *dp_watch_free(struct dp_watch *w);
DEFINE_POINTER_CLEANUP(struct dp_watch, dp_watch_free)

/* Identity of a file that survives tmpfs reusing inode numbers: inode and change time. */
struct dp_file_id {
    bool exists;
    dev_t dev;
    ino_t ino;
    struct timespec ctime;
};
void dp_file_id_get(const char *path, struct dp_file_id *ret);
bool dp_file_id_equal(const struct dp_file_id *a, const struct dp_file_id *b);

/* ---- the daemon (dp-daemon.c) ---- */

/* Runs the daemon with a parsed config until SIGTERM/SIGINT/SIGQUIT; argv is kept for SIGHUP,
 * which re-reads the configuration from it. Returns an exit code. The config is taken over. */
int dp_daemon_run(struct dp_config *cfg, int argc, char **argv);
