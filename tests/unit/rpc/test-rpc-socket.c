/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The socket files of a server: a stale socket is replaced, anything else is refused and left
 * alone, the mode is applied before the socket appears, several paths work at once, and a server
 * removes only the file it created, not one a successor put at the same path.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "rpc-test.h"
#include "test.pb-c.h"

struct fx {
    struct ev_loop *loop;
    struct rpc_server *srv;
    char dir[64];
    char path[128];
};

static void echo(struct rpc_call *call, const ProtobufCMessage *request, void *userdata)
{
    Gptest__Resp resp = GPTEST__RESP__INIT;

    assert_int_equal(rpc_call_reply(call, &resp.base), 0);
}

static int setup(void **state)
{
    struct fx *fx = calloc(1, sizeof(*fx));
    struct rpc_method m = {
        .path = "/gptest.Test/Echo",
        .request = &gptest__req__descriptor,
        .response = &gptest__resp__descriptor,
        .handler = echo,
    };

    assert_non_null(fx);
    assert_int_equal(ev_loop_new(&fx->loop), 0);
    (void)snprintf(fx->dir, sizeof(fx->dir), "/tmp/rpc-sock-XXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    (void)snprintf(fx->path, sizeof(fx->path), "%s/plugin.sock", fx->dir);
    assert_int_equal(rpc_server_new(fx->loop, NULL, &fx->srv), 0);
    assert_int_equal(rpc_server_add_method(fx->srv, &m), 0);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fx *fx = *state;

    fx->srv = rpc_server_free(fx->srv);
    (void)unlink(fx->path);
    assert_int_equal(rmdir(fx->dir), 0);
    fx->loop = ev_loop_free(fx->loop);
    free(fx);
    return 0;
}

/* Leaves a socket file nobody listens on, as a crashed instance does. */
static void make_stale_socket(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    close(fd);
}

static void assert_serves(struct fx *fx, const char *path)
{
    Gptest__Req req = GPTEST__REQ__INIT;
    struct tconn *tc = tc_connect(fx->loop, path);
    struct tstream *ts = tc_call(tc, "/gptest.Test/Echo", NULL, &req.base, true);

    assert_true(run_until(fx->loop, ts_is_closed, ts));
    assert_int_equal(ts_status(ts), RPC_OK);
    tc_free(tc);
}

static ino_t inode_of(const char *path)
{
    struct stat st;

    assert_int_equal(lstat(path, &st), 0);
    return st.st_ino;
}

static void test_default_mode(void **state)
{
    struct fx *fx = *state;
    struct stat st;
    struct diag d;

    assert_int_equal(rpc_server_listen(fx->srv, fx->path, &d), 0);
    assert_int_equal(lstat(fx->path, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_serves(fx, fx->path);
    /* No temporary name is left behind: the directory holds just the socket. */
    assert_int_equal(rmdir(fx->dir), -1);
}

static void test_custom_mode_and_two_paths(void **state)
{
    struct fx *fx = *state;
    struct rpc_server_options o = {.socket_mode = 0660};
    struct rpc_server *srv = NULL;
    char second[160];
    struct stat st;
    struct diag d;

    (void)snprintf(second, sizeof(second), "%s/second.sock", fx->dir);
    fx->srv = rpc_server_free(fx->srv);
    assert_int_equal(rpc_server_new(fx->loop, &o, &srv), 0);
    fx->srv = srv;
    assert_int_equal(rpc_server_listen(srv, fx->path, &d), 0);
    assert_int_equal(rpc_server_listen(srv, second, &d), 0);
    assert_int_equal(lstat(second, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0660);
    fx->srv = rpc_server_free(fx->srv);
    assert_int_equal(access(fx->path, F_OK), -1);
    assert_int_equal(access(second, F_OK), -1);
}

static void test_stale_socket_replaced(void **state)
{
    struct fx *fx = *state;
    struct diag d;
    ino_t stale;

    make_stale_socket(fx->path);
    stale = inode_of(fx->path);
    assert_int_equal(rpc_server_listen(fx->srv, fx->path, &d), 0);
    assert_true(inode_of(fx->path) != stale);
    assert_serves(fx, fx->path);
}

static void test_regular_file_refused(void **state)
{
    struct fx *fx = *state;
    struct diag d;
    int fd = open(fx->path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    char buf[8] = {0};

    assert_true(fd >= 0);
    assert_int_equal(write(fd, "data", 4), 4);
    close(fd);
    diag_init(&d);
    assert_int_equal(rpc_server_listen(fx->srv, fx->path, &d), -EEXIST);
    assert_non_null(strstr(d.msg, "not a socket"));
    fd = open(fx->path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(read(fd, buf, sizeof(buf)), 4);
    assert_string_equal(buf, "data");
    close(fd);
    /* A directory is refused as well. */
    assert_int_equal(unlink(fx->path), 0);
    assert_int_equal(mkdir(fx->path, 0700), 0);
    assert_int_equal(rpc_server_listen(fx->srv, fx->path, &d), -EEXIST);
    assert_int_equal(rmdir(fx->path), 0);
}

/* A successor replaced our socket: freeing the old server must not remove the new one. */
static void test_removes_only_own_inode(void **state)
{
    struct fx *fx = *state;
    struct diag d;
    char other[160];
    ino_t theirs;

    assert_int_equal(rpc_server_listen(fx->srv, fx->path, &d), 0);
    (void)snprintf(other, sizeof(other), "%s/.other", fx->dir);
    make_stale_socket(other);
    assert_int_equal(rename(other, fx->path), 0);
    theirs = inode_of(fx->path);
    fx->srv = rpc_server_free(fx->srv);
    assert_int_equal(inode_of(fx->path), theirs);
}

static void test_path_too_long(void **state)
{
    struct fx *fx = *state;
    char path[200];
    struct diag d;

    memset(path, 'p', sizeof(path) - 1);
    path[0] = '/';
    path[sizeof(path) - 1] = '\0';
    assert_int_equal(rpc_server_listen(fx->srv, path, &d), -ENAMETOOLONG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_default_mode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_custom_mode_and_two_paths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_socket_replaced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_regular_file_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_removes_only_own_inode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_path_too_long, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
