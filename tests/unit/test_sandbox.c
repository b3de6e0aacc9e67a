/* The worker sandbox (lib/sandbox/sandbox.c), applied in forked children:
 * what it lets through and what it refuses, each checked by its outcome
 * (the call's result and errno, or how the child died). Where the kernel
 * lacks Landlock or seccomp, the checks of that layer are skipped with the
 * reason printed, never passed. Children end with _exit (no atexit, no
 * leak check: LeakSanitizer needs ptrace, which the sandbox refuses). */
#include "helpers.h"

#include "driver/context_impl.h"
#include "sandbox/sandbox.h"

#include <jansson.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Under AddressSanitizer a failed large malloc must return NULL (the
 * address-space test), not end the process. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}

/* ---- running a child in the sandbox ---- */

typedef struct {
    int ok;  /* the call did what was asked */
    int err; /* errno when it did not */
} outcome;

#define MAX_CHECKS 80

typedef struct {
    int applied; /* kr__sandbox_apply's return */
    char why[256];
    kr__sandbox_status st;
    outcome o[MAX_CHECKS];
    char detail[256]; /* what the body wants to say */
} child_result;

typedef struct {
    char root[4096];  /* the test's temporary directory */
    char rdir[4200];  /* read tree, holding allowed.txt */
    char wdir[4200];  /* write tree */
    char odir[4200];  /* outside both, holding secret.txt */
} dirs;

typedef void (*child_body)(const dirs *d, child_result *r);
typedef void (*child_prepare)(const dirs *d, kr__sandbox_spec *spec); /* before applying */

static outcome rc_outcome(long rc)
{
    outcome o = {rc >= 0, rc >= 0 ? 0 : errno};
    return o;
}

static outcome try_open(const char *path, int flags)
{
    int fd = open(path, flags | O_CLOEXEC, 0600);
    outcome o = rc_outcome(fd);
    if (fd >= 0)
        close(fd);
    return o;
}

/* Opens and reads path; ok when it read at least one byte (and, with
 * expect, exactly that text). */
static outcome try_read(const char *path, const char *expect)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return rc_outcome(-1);
    char buf[256];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    int err = errno;
    close(fd);
    if (n < 0) {
        outcome o = {0, err};
        return o;
    }
    buf[n] = '\0';
    outcome o = {n > 0 && (!expect || strcmp(buf, expect) == 0), 0};
    return o;
}

static void write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t k = write(fd, c, n);
        if (k <= 0)
            return;
        c += k;
        n -= (size_t)k;
    }
}

/* Forks a child that runs prepare, applies spec, writes what it applied,
 * runs body and writes its outcomes. Returns the child's wait status (it is
 * killed after timeout_s); r holds what it wrote, zeros where it died
 * first. */
static int in_sandbox_prepared(const kr__sandbox_spec *spec, child_prepare prepare,
                               child_body body, const dirs *d, child_result *r, int timeout_s)
{
    memset(r, 0, sizeof *r);
    r->applied = -2; /* never written */
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        child_result c;
        memset(&c, 0, sizeof c);
        kr__sandbox_spec s = *spec;
        if (prepare)
            prepare(d, &s);
        c.applied = kr__sandbox_apply(&s, &c.st, c.why, sizeof c.why);
        write_all(p[1], &c, offsetof(child_result, o)); /* before the body can die */
        if (c.applied == 0 && body)
            body(d, &c);
        write_all(p[1], c.o, sizeof c - offsetof(child_result, o));
        _exit(0);
    }
    close(p[1]);
    int status = 0, done = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char *dst = (char *)r;
    size_t got = 0;
    int open_pipe = 1;
    while (!done || open_pipe) {
        if (open_pipe) {
            struct pollfd pfd = {p[0], POLLIN, 0};
            if (poll(&pfd, 1, 20) > 0) {
                ssize_t n = got < sizeof *r ? read(p[0], dst + got, sizeof *r - got) : 0;
                if (n > 0)
                    got += (size_t)n;
                else
                    open_pipe = 0; /* end of file: every holder of the pipe is gone */
            }
        } else {
            usleep(20000);
        }
        /* a stop (a traced child, say) is no end: only exit or death is */
        if (!done && waitpid(pid, &status, WNOHANG) == pid && (WIFEXITED(status) ||
                                                                  WIFSIGNALED(status)))
            done = 1;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > timeout_s) {
            kill(pid, SIGKILL);
            while (!done && waitpid(pid, &status, 0) == pid && !WIFEXITED(status) &&
                   !WIFSIGNALED(status))
                ;
            close(p[0]);
            fail_msg("the sandboxed child ran past %d s (or a child of it kept its pipe)",
                     timeout_s);
        }
    }
    close(p[0]);
    if (got < offsetof(child_result, o))
        r->applied = -2;
    return status;
}

static void remove_tree(dirs *d)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d->root);
    assert_int_equal(system(cmd), 0);
}

static int in_sandbox(const kr__sandbox_spec *spec, child_body body, const dirs *d,
                      child_result *r, int timeout_s)
{
    return in_sandbox_prepared(spec, NULL, body, d, r, timeout_s);
}

static void make_dirs(dirs *d)
{
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(d->root, sizeof d->root, "%s/krsandbox-XXXXXX", base);
    assert_non_null(mkdtemp(d->root));
    snprintf(d->rdir, sizeof d->rdir, "%s/read", d->root);
    snprintf(d->wdir, sizeof d->wdir, "%s/write", d->root);
    snprintf(d->odir, sizeof d->odir, "%s/outside", d->root);
    assert_int_equal(mkdir(d->rdir, 0755), 0);
    assert_int_equal(mkdir(d->wdir, 0755), 0);
    assert_int_equal(mkdir(d->odir, 0755), 0);
    char path[4300];
    snprintf(path, sizeof path, "%s/allowed.txt", d->rdir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("allowed", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/secret.txt", d->odir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("secret", f);
    fclose(f);
}

/* What this kernel offers, said once per test that depends on it. */
static kr__sandbox_status offered(void)
{
    kr__sandbox_status st;
    kr__sandbox_probe(&st);
    return st;
}

static void expect(const child_result *r, int i, int ok, int err, const char *what)
{
    if (r->o[i].ok != ok || (!ok && err && r->o[i].err != err))
        fail_msg("%s: expected %s%s%s, got %s%s%s", what, ok ? "success" : "failure",
                 !ok && err ? " with " : "", !ok && err ? strerror(err) : "",
                 r->o[i].ok ? "success" : "failure", r->o[i].ok ? "" : " with ",
                 r->o[i].ok ? "" : strerror(r->o[i].err));
}

/* A check that only Landlock makes true: skipped, saying why, without it. */
static void expect_ll(const child_result *r, int i, int ok, int err, const char *what)
{
    if (!r->st.landlock) {
        print_message("SKIP %s: Landlock not applied (%s)\n", what, r->st.landlock_why);
        return;
    }
    expect(r, i, ok, err, what);
}

static void expect_sc(const child_result *r, int i, int ok, int err, const char *what)
{
    if (!r->st.seccomp) {
        print_message("SKIP %s: seccomp not applied (%s)\n", what, r->st.seccomp_why);
        return;
    }
    expect(r, i, ok, err, what);
}

static void applied_ok(const child_result *r)
{
    if (r->applied != 0)
        fail_msg("kr__sandbox_apply returned %d: %s", r->applied, r->why);
    assert_int_equal(r->st.no_new_privs, 1);
    assert_int_equal(r->st.rlimits, 1);
    kr__sandbox_status k = offered();
    /* a layer the kernel offers is applied; one it lacks says why */
    assert_int_equal(r->st.landlock, k.landlock_abi > 0);
    assert_int_equal(r->st.landlock_abi, k.landlock_abi);
    if (!r->st.landlock)
        assert_true(r->st.landlock_why[0] != '\0');
    if (!r->st.seccomp)
        assert_true(r->st.seccomp_why[0] != '\0');
    else
        assert_string_equal(k.seccomp_why, "");
}

/* ---- the file system, system calls and limits of a compile worker ---- */

enum {
    C_READ_ALLOWED, C_LIST_READ, C_PASSWD, C_ENVIRON, C_OUTSIDE, C_OUTSIDE_LIST, C_MISSING_SKIPPED,
    C_CREATE_W, C_CREATE_R, C_CREATE_OUTSIDE, C_WRITE_ALLOWED, C_MKDIR_W, C_RENAME_W, C_UNLINK_W,
    C_SYMLINK_W, C_MKFIFO_W, C_TMP_CREATE, C_EXECVE, C_EXECVEAT, C_INET, C_INET6, C_NETLINK,
    C_PACKET, C_INET_HIGH, C_UNIX, C_UNIX_HIGH, C_UNIX_PAIR, C_INET_PAIR, C_CONNECT, C_TRACEME,
    C_VM_READV, C_MOUNT, C_UMOUNT, C_UNSHARE, C_SETNS, C_CHROOT, C_PIVOT, C_CLONE_NEWUSER,
    C_CLONE3, C_BPF, C_KEYCTL, C_ADD_KEY, C_IO_URING, C_USERFAULTFD, C_PERF, C_KEXEC,
    C_INIT_MODULE, C_FINIT_MODULE, C_TIOCSTI, C_TIOCSTI_HIGH, C_SET_DUMPABLE, C_DUMPABLE,
    C_SETRLIMIT, C_SETRLIMIT_RAW, C_SETUID, C_CORE_LIMIT, C_NNP, C_SECCOMP_MODE, C_THREAD,
    C_THREAD_PASSWD, C_THREAD_EXEC, C_FORK, C_KILL_PARENT, C_KILL_SELF, C_DEV_NULL, C_URANDOM,
    N_CHECKS
};
_Static_assert(N_CHECKS <= MAX_CHECKS, "child_result holds every check");

static void *thread_tries(void *arg)
{
    outcome *o = arg;
    o[0] = try_open("/etc/passwd", O_RDONLY);
    char *argv[] = {"true", NULL};
    o[1] = rc_outcome(execve("/bin/true", argv, (char *[]){NULL}));
    return NULL;
}

static void compile_worker_body(const dirs *d, child_result *r)
{
    outcome *o = r->o;
    int ll = r->st.landlock, sc = r->st.seccomp;
    char path[4300], path2[4300];
    snprintf(path, sizeof path, "%s/allowed.txt", d->rdir);
    o[C_READ_ALLOWED] = try_read(path, "allowed");
    o[C_LIST_READ] = try_open(d->rdir, O_RDONLY | O_DIRECTORY);
    o[C_PASSWD] = try_open("/etc/passwd", O_RDONLY);
    o[C_ENVIRON] = try_open("/proc/self/environ", O_RDONLY);
    snprintf(path, sizeof path, "%s/secret.txt", d->odir);
    o[C_OUTSIDE] = try_open(path, O_RDONLY);
    o[C_OUTSIDE_LIST] = try_open(d->odir, O_RDONLY | O_DIRECTORY);
    o[C_MISSING_SKIPPED] = rc_outcome(r->applied == 0 ? 0 : -1);
    if (ll) { /* writes that would land on the disk without Landlock are not tried */
        snprintf(path, sizeof path, "%s/new.bin", d->wdir);
        o[C_CREATE_W] = try_open(path, O_WRONLY | O_CREAT | O_EXCL);
        snprintf(path, sizeof path, "%s/new.bin", d->rdir);
        o[C_CREATE_R] = try_open(path, O_WRONLY | O_CREAT | O_EXCL);
        snprintf(path, sizeof path, "%s/new.bin", d->odir);
        o[C_CREATE_OUTSIDE] = try_open(path, O_WRONLY | O_CREAT | O_EXCL);
        snprintf(path, sizeof path, "%s/allowed.txt", d->rdir);
        o[C_WRITE_ALLOWED] = try_open(path, O_WRONLY);
        snprintf(path, sizeof path, "%s/sub", d->wdir);
        o[C_MKDIR_W] = rc_outcome(mkdir(path, 0755));
        snprintf(path, sizeof path, "%s/new.bin", d->wdir);
        snprintf(path2, sizeof path2, "%s/sub/renamed.bin", d->wdir);
        o[C_RENAME_W] = rc_outcome(rename(path, path2));
        o[C_UNLINK_W] = rc_outcome(unlink(path2));
        snprintf(path, sizeof path, "%s/link", d->wdir);
        o[C_SYMLINK_W] = rc_outcome(symlink("/etc/passwd", path));
        snprintf(path, sizeof path, "%s/fifo", d->wdir);
        o[C_MKFIFO_W] = rc_outcome(mkfifo(path, 0600));
        o[C_TMP_CREATE] = try_open("/tmp", O_RDONLY | O_DIRECTORY);
    }
    if (sc || ll) {
        char *argv[] = {"true", NULL};
        o[C_EXECVE] = rc_outcome(execve("/bin/true", argv, (char *[]){NULL}));
        o[C_EXECVEAT] = rc_outcome(syscall(SYS_execveat, AT_FDCWD, "/bin/true", argv,
                                           (char *[]){NULL}, 0));
    }
    /* sockets: the family compared on all 64 bits; AF_UNIX with a high bit
     * is refused too (the kernel would read it as AF_UNIX) */
    int fd;
    o[C_INET] = rc_outcome(fd = socket(AF_INET, SOCK_STREAM, 0));
    if (fd >= 0)
        close(fd);
    o[C_INET6] = rc_outcome(fd = socket(AF_INET6, SOCK_DGRAM, 0));
    if (fd >= 0)
        close(fd);
    o[C_NETLINK] = rc_outcome(fd = socket(AF_NETLINK, SOCK_RAW, 0));
    if (fd >= 0)
        close(fd);
    o[C_PACKET] = rc_outcome(fd = socket(AF_PACKET, SOCK_RAW, 0));
    if (fd >= 0)
        close(fd);
    fd = (int)syscall(SYS_socket, (1L << 32) | AF_INET, SOCK_STREAM, 0);
    o[C_INET_HIGH] = rc_outcome(fd);
    if (fd >= 0)
        close(fd);
    o[C_UNIX] = rc_outcome(fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (fd >= 0) {
        /* no connection to a named socket of the host */
        struct sockaddr_un addr = {AF_UNIX, "/run/any.sock"};
        o[C_CONNECT] = rc_outcome(connect(fd, (struct sockaddr *)&addr, sizeof addr));
        close(fd);
    }
    fd = (int)syscall(SYS_socket, (1L << 32) | AF_UNIX, SOCK_STREAM, 0);
    o[C_UNIX_HIGH] = rc_outcome(fd);
    if (fd >= 0)
        close(fd);
    int sv[2];
    o[C_UNIX_PAIR] = rc_outcome(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    if (o[C_UNIX_PAIR].ok) {
        close(sv[0]);
        close(sv[1]);
    }
    o[C_INET_PAIR] = rc_outcome(socketpair(AF_INET, SOCK_STREAM, 0, sv));
    if (o[C_INET_PAIR].ok) {
        close(sv[0]);
        close(sv[1]);
    }
    char buf[8];
    struct iovec local = {buf, sizeof buf}, remote = {(void *)&local, sizeof buf};
    o[C_VM_READV] = rc_outcome(process_vm_readv(getppid(), &local, 1, &remote, 1, 0));
    if (sc) { /* calls that would change the machine without the filter are not tried */
        o[C_TRACEME] = rc_outcome(ptrace(PTRACE_TRACEME, 0, NULL, NULL));
        o[C_MOUNT] = rc_outcome(mount("none", d->wdir, "tmpfs", 0, NULL));
        o[C_UMOUNT] = rc_outcome(umount2(d->wdir, MNT_DETACH));
        o[C_UNSHARE] = rc_outcome(unshare(CLONE_NEWUSER));
        o[C_SETNS] = rc_outcome(setns(0, 0));
        o[C_CHROOT] = rc_outcome(chroot(d->wdir));
        o[C_PIVOT] = rc_outcome(syscall(SYS_pivot_root, ".", "."));
        long pid = syscall(SYS_clone, (long)(CLONE_NEWUSER | SIGCHLD), 0L, 0L, 0L, 0L);
        if (pid == 0)
            _exit(0);
        if (pid > 0)
            waitpid((pid_t)pid, NULL, 0);
        o[C_CLONE_NEWUSER] = rc_outcome(pid);
        o[C_CLONE3] = rc_outcome(syscall(SYS_clone3, NULL, 0L));
        o[C_BPF] = rc_outcome(syscall(SYS_bpf, 0L, NULL, 0L));
        o[C_KEYCTL] = rc_outcome(syscall(SYS_keyctl, 0L, -1L, 0L));
        o[C_ADD_KEY] = rc_outcome(syscall(SYS_add_key, "user", "kr", "x", 1L, -2L));
        char params[120] = {0};
        o[C_IO_URING] = rc_outcome(syscall(SYS_io_uring_setup, 1L, params));
        o[C_USERFAULTFD] = rc_outcome(syscall(SYS_userfaultfd, 0L));
        char attr[128] = {0};
        o[C_PERF] = rc_outcome(syscall(SYS_perf_event_open, attr, 0L, -1L, -1L, 0L));
        o[C_KEXEC] = rc_outcome(syscall(SYS_kexec_load, 0L, 0L, NULL, 0L));
        o[C_INIT_MODULE] = rc_outcome(syscall(SYS_init_module, NULL, 0L, ""));
        o[C_FINIT_MODULE] = rc_outcome(syscall(SYS_finit_module, -1L, "", 0L));
        int pp[2];
        if (pipe(pp) == 0) {
            char c = 'x';
            o[C_TIOCSTI] = rc_outcome(ioctl(pp[0], TIOCSTI, &c));
            o[C_TIOCSTI_HIGH] = rc_outcome(syscall(SYS_ioctl, pp[0], (1L << 32) | TIOCSTI, &c));
            close(pp[0]);
            close(pp[1]);
        }
        o[C_SET_DUMPABLE] = rc_outcome(prctl(PR_SET_DUMPABLE, 1, 0, 0, 0));
        struct rlimit zero = {0, 0};
        o[C_SETRLIMIT] = rc_outcome(setrlimit(RLIMIT_CORE, &zero)); /* prlimit64 */
        o[C_SETRLIMIT_RAW] = rc_outcome(syscall(SYS_setrlimit, (long)RLIMIT_CORE, &zero));
        o[C_SETUID] = rc_outcome(syscall(SYS_setresuid, -1L, -1L, -1L)); /* a no-op, refused */
        o[C_SECCOMP_MODE] = rc_outcome(prctl(PR_GET_SECCOMP, 0, 0, 0, 0) == 2 ? 0 : -1);
    }
    o[C_DUMPABLE] = rc_outcome(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0 ? 0 : -1);
    struct rlimit core;
    o[C_CORE_LIMIT] = rc_outcome(getrlimit(RLIMIT_CORE, &core) == 0 && core.rlim_cur == 0 &&
                                         core.rlim_max == 0 ? 0 : -1);
    o[C_NNP] = rc_outcome(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1 ? 0 : -1);
    /* a thread started in the sandbox (clone3 refused: the C library falls
     * back to clone) is in it */
    pthread_t th;
    outcome to[2] = {{0, 0}, {0, 0}};
    int err = pthread_create(&th, NULL, thread_tries, to);
    if (err == 0)
        pthread_join(th, NULL);
    o[C_THREAD] = rc_outcome(err == 0 ? 0 : (errno = err, -1));
    o[C_THREAD_PASSWD] = to[0];
    o[C_THREAD_EXEC] = to[1];
    /* so is a forked child */
    pid_t child = fork();
    if (child == 0)
        _exit(open("/etc/passwd", O_RDONLY) < 0 && errno == EACCES ? 0 : 1);
    int status = 0;
    if (child > 0)
        waitpid(child, &status, 0);
    o[C_FORK] = rc_outcome(child > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1);
    o[C_KILL_PARENT] = rc_outcome(kill(getppid(), 0));
    o[C_KILL_SELF] = rc_outcome(kill(getpid(), 0));
    o[C_DEV_NULL] = try_open("/dev/null", O_WRONLY);
    o[C_URANDOM] = try_read("/dev/urandom", NULL);
}

static void child_exited(int status)
{
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("the sandboxed child %s %d", WIFSIGNALED(status) ? "died of signal" : "exited",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

static int exists(const char *dir, const char *name)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

static void compile_worker(void **state)
{
    (void)state;
    dirs d;
    make_dirs(&d);
    const char *reads[] = {d.rdir, "/nonexistent/kreward-sandbox-test"};
    const char *writes[] = {d.wdir};
    kr__sandbox_spec spec = {reads, 2, writes, 1, 0, 0, 0, 0, 0, 0};
    child_result r;
    child_exited(in_sandbox(&spec, compile_worker_body, &d, &r, 60));
    applied_ok(&r);
    const child_result *c = &r;
    int sc = c->st.seccomp, ll = c->st.landlock;

    expect(c, C_MISSING_SKIPPED, 1, 0, "a read path that does not exist is skipped");
    expect(c, C_READ_ALLOWED, 1, 0, "reading a file of read_paths");
    expect(c, C_LIST_READ, 1, 0, "listing a folder of read_paths");
    expect_ll(c, C_PASSWD, 0, EACCES, "reading /etc/passwd");
    expect_ll(c, C_ENVIRON, 0, EACCES, "reading /proc/self/environ");
    expect_ll(c, C_OUTSIDE, 0, EACCES, "reading a file outside the trees");
    expect_ll(c, C_OUTSIDE_LIST, 0, EACCES, "listing a folder outside the trees");
    expect_ll(c, C_TMP_CREATE, 0, EACCES, "opening /tmp");
    expect_ll(c, C_CREATE_W, 1, 0, "creating a file in write_paths");
    expect_ll(c, C_CREATE_R, 0, EACCES, "creating a file in read_paths");
    expect_ll(c, C_CREATE_OUTSIDE, 0, EACCES, "creating a file outside the trees");
    expect_ll(c, C_WRITE_ALLOWED, 0, EACCES, "opening a file of read_paths for writing");
    expect_ll(c, C_MKDIR_W, 1, 0, "a folder in write_paths");
    expect_ll(c, C_RENAME_W, 1, 0, "renaming into a subfolder of write_paths");
    expect_ll(c, C_UNLINK_W, 1, 0, "removing a file in write_paths");
    expect_ll(c, C_SYMLINK_W, 0, EACCES, "a symbolic link in write_paths");
    /* mkfifo is mknodat: the filter answers before Landlock does */
    expect_ll(c, C_MKFIFO_W, 0, sc ? EPERM : EACCES, "a FIFO in write_paths");
    if (ll) {
        assert_false(exists(d.rdir, "new.bin"));
        assert_false(exists(d.odir, "new.bin"));
        assert_false(exists(d.wdir, "link"));
    }
    if (sc || ll) {
        expect(c, C_EXECVE, 0, sc ? EPERM : EACCES, "execve(/bin/true)");
        expect(c, C_EXECVEAT, 0, sc ? EPERM : EACCES, "execveat(/bin/true)");
    } else {
        print_message("SKIP execve: neither Landlock nor seccomp applied\n");
    }

    expect_sc(c, C_INET, 0, EPERM, "socket(AF_INET)");
    expect_sc(c, C_INET6, 0, EPERM, "socket(AF_INET6)");
    expect_sc(c, C_NETLINK, 0, EPERM, "socket(AF_NETLINK)");
    expect_sc(c, C_PACKET, 0, EPERM, "socket(AF_PACKET)");
    expect_sc(c, C_INET_HIGH, 0, EPERM, "socket(AF_INET with a high bit set)");
    expect_sc(c, C_UNIX_HIGH, 0, EPERM, "socket(AF_UNIX with a high bit set)");
    expect_sc(c, C_INET_PAIR, 0, EPERM, "socketpair(AF_INET)");
    expect(c, C_UNIX, 1, 0, "socket(AF_UNIX)");
    expect(c, C_UNIX_PAIR, 1, 0, "socketpair(AF_UNIX)");
    expect_sc(c, C_CONNECT, 0, EPERM, "connect() to a named socket");

    expect_sc(c, C_TRACEME, 0, EPERM, "ptrace(PTRACE_TRACEME)");
    /* Landlock alone refuses it too (no access to processes outside) */
    if (sc || ll)
        expect(c, C_VM_READV, 0, EPERM, "process_vm_readv(parent)");
    expect_sc(c, C_MOUNT, 0, EPERM, "mount(tmpfs)");
    expect_sc(c, C_UMOUNT, 0, EPERM, "umount2");
    expect_sc(c, C_UNSHARE, 0, EPERM, "unshare(CLONE_NEWUSER)");
    expect_sc(c, C_SETNS, 0, EPERM, "setns");
    expect_sc(c, C_CHROOT, 0, EPERM, "chroot");
    expect_sc(c, C_PIVOT, 0, EPERM, "pivot_root");
    expect_sc(c, C_CLONE_NEWUSER, 0, EPERM, "clone(CLONE_NEWUSER)");
    expect_sc(c, C_CLONE3, 0, ENOSYS, "clone3 (ENOSYS: the C library falls back to clone)");
    expect_sc(c, C_BPF, 0, EPERM, "bpf");
    expect_sc(c, C_KEYCTL, 0, EPERM, "keyctl");
    expect_sc(c, C_ADD_KEY, 0, EPERM, "add_key");
    expect_sc(c, C_IO_URING, 0, EPERM, "io_uring_setup");
    expect_sc(c, C_USERFAULTFD, 0, EPERM, "userfaultfd");
    expect_sc(c, C_PERF, 0, EACCES, "perf_event_open");
    expect_sc(c, C_KEXEC, 0, EPERM, "kexec_load");
    expect_sc(c, C_INIT_MODULE, 0, EPERM, "init_module");
    expect_sc(c, C_FINIT_MODULE, 0, EPERM, "finit_module");
    expect_sc(c, C_TIOCSTI, 0, EPERM, "ioctl(TIOCSTI)");
    expect_sc(c, C_TIOCSTI_HIGH, 0, EPERM, "ioctl(TIOCSTI with a high bit set)");
    expect_sc(c, C_SET_DUMPABLE, 0, EPERM, "prctl(PR_SET_DUMPABLE, 1)");
    expect_sc(c, C_SETRLIMIT, 0, EPERM, "setrlimit after the sandbox (prlimit64)");
    expect_sc(c, C_SETRLIMIT_RAW, 0, EPERM, "the setrlimit system call after the sandbox");
    expect_sc(c, C_SETUID, 0, EPERM, "setresuid");
    expect_sc(c, C_SECCOMP_MODE, 1, 0, "PR_GET_SECCOMP says filter mode");

    expect(c, C_DUMPABLE, 1, 0, "PR_GET_DUMPABLE is 0");
    expect(c, C_CORE_LIMIT, 1, 0, "RLIMIT_CORE is 0 (soft and hard)");
    expect(c, C_NNP, 1, 0, "no_new_privs is set");
    expect(c, C_THREAD, 1, 0, "a thread started in the sandbox");
    expect_ll(c, C_THREAD_PASSWD, 0, EACCES, "reading /etc/passwd from that thread");
    expect_sc(c, C_THREAD_EXEC, 0, EPERM, "execve from that thread");
    expect_ll(c, C_FORK, 1, 0, "a forked child cannot read /etc/passwd either");
    if (c->st.landlock_abi >= 6)
        expect(c, C_KILL_PARENT, 0, EPERM, "signalling the parent (Landlock scope, ABI >= 6)");
    else
        print_message("SKIP signal scope: Landlock ABI %d < 6\n", c->st.landlock_abi);
    expect(c, C_KILL_SELF, 1, 0, "signalling itself");
    expect(c, C_DEV_NULL, 1, 0, "writing /dev/null");
    expect(c, C_URANDOM, 1, 0, "reading /dev/urandom");
    remove_tree(&d);
}

/* ---- what allow_gpu adds (no GPU needed: the rules, not the device) ---- */

enum {
    G_MAPS, G_STATUS, G_ENVIRON, G_TASK_ENVIRON, G_COMM, G_COMM_TRUNC, G_SETNAME, G_TASK_MEM, G_TASK_NET, G_PARENT_COMM, G_MEM, G_INIT_ENVIRON, G_INIT_CMDLINE,
    G_PARENT_STATUS, G_PROC_SYS, G_PASSWD, G_OUTSIDE, G_CPU_ONLINE, G_LDSO_CACHE, G_SHM_CREATE,
    G_SHM_MKDIR, G_SHM_OTHER, G_DLOPEN, G_TMP, N_GPU
};
_Static_assert(N_GPU <= MAX_CHECKS, "child_result holds every check");

/* a thread that lives until released, so another can name it */
static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cond = PTHREAD_COND_INITIALIZER;
static int idle_released;

static void *idle_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&idle_lock);
    while (!idle_released)
        pthread_cond_wait(&idle_cond, &idle_lock);
    pthread_mutex_unlock(&idle_lock);
    return NULL;
}

static void idle_thread_release(void)
{
    pthread_mutex_lock(&idle_lock);
    idle_released = 1;
    pthread_cond_broadcast(&idle_cond);
    pthread_mutex_unlock(&idle_lock);
}

static void gpu_worker_body(const dirs *d, child_result *r)
{
    outcome *o = r->o;
    char path[4300];
    pid_t tid = (pid_t)syscall(SYS_gettid);
    o[G_MAPS] = try_read("/proc/self/maps", NULL);
    o[G_STATUS] = try_read("/proc/self/status", NULL);
    o[G_ENVIRON] = try_open("/proc/self/environ", O_RDONLY);
    snprintf(path, sizeof path, "/proc/self/task/%d/environ", (int)tid);
    o[G_TASK_ENVIRON] = try_open(path, O_RDONLY);
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    o[G_COMM] = rc_outcome(fd >= 0 ? write(fd, "kr-sandboxed", 12) : -1);
    if (fd >= 0)
        close(fd);
    /* fopen(comm, "w") opens with O_TRUNC, which Landlock checks as its
     * own right (truncate, ABI 3) */
    FILE *f = fopen(path, "w");
    o[G_COMM_TRUNC] = rc_outcome(f && fputs("kr-trunc", f) >= 0 ? 0 : -1);
    if (f)
        fclose(f);
    /* what the driver does: glibc names another thread by opening its
     * task/<tid>/comm read-write (a write-only grant made cuInit fail
     * with 304 on the H200) */
    pthread_t th;
    int err = pthread_create(&th, NULL, idle_thread, NULL);
    if (err == 0) {
        err = pthread_setname_np(th, "kr-named");
        idle_thread_release();
        pthread_join(th, NULL);
    }
    errno = err;
    o[G_SETNAME] = rc_outcome(err ? -1 : 0);
    /* what the task grant also opens (known, docs/sandbox.md): the
     * thread's view of its own memory, and the network namespace's tables */
    snprintf(path, sizeof path, "/proc/self/task/%d/mem", (int)tid);
    o[G_TASK_MEM] = try_open(path, O_RDONLY);
    snprintf(path, sizeof path, "/proc/self/task/%d/net/unix", (int)tid);
    o[G_TASK_NET] = try_read(path, NULL);
    /* the grant is this process's task folder: never its parent's */
    snprintf(path, sizeof path, "/proc/%d/task/%d/comm", (int)getppid(), (int)getppid());
    o[G_PARENT_COMM] = try_open(path, O_WRONLY);
    o[G_MEM] = try_open("/proc/self/mem", O_RDONLY);
    o[G_INIT_ENVIRON] = try_open("/proc/1/environ", O_RDONLY);
    o[G_INIT_CMDLINE] = try_open("/proc/1/cmdline", O_RDONLY);
    snprintf(path, sizeof path, "/proc/%d/status", (int)getppid());
    o[G_PARENT_STATUS] = try_open(path, O_RDONLY);
    o[G_PROC_SYS] = try_open("/proc/sys/kernel/hostname", O_RDONLY);
    o[G_PASSWD] = try_open("/etc/passwd", O_RDONLY);
    snprintf(path, sizeof path, "%s/secret.txt", d->odir);
    o[G_OUTSIDE] = try_open(path, O_RDONLY);
    o[G_CPU_ONLINE] = try_read("/sys/devices/system/cpu/online", NULL);
    o[G_LDSO_CACHE] = try_read("/etc/ld.so.cache", NULL);
    snprintf(path, sizeof path, "/dev/shm/kr-sandbox-test-%d", (int)getpid());
    o[G_SHM_CREATE] = try_open(path, O_RDWR | O_CREAT | O_EXCL);
    if (o[G_SHM_CREATE].ok && unlink(path) != 0)
        o[G_SHM_CREATE] = rc_outcome(-1);
    o[G_SHM_MKDIR] = rc_outcome(mkdir(path, 0700));
    /* the same user's shared memory: another process's segment (a
     * trainer's DataLoader tensors), made by the parent (shm_other) */
    snprintf(path, sizeof path, "/dev/shm/kr-sandbox-other-%d", (int)getppid());
    o[G_SHM_OTHER] = try_read(path, NULL);
    /* a library not loaded yet: the loader reads ld.so.cache and the
     * library folders */
    if (dlopen("libresolv.so.2", RTLD_NOW | RTLD_NOLOAD)) {
        errno = EEXIST;
        o[G_DLOPEN] = rc_outcome(-1);
    } else {
        void *lib = dlopen("libresolv.so.2", RTLD_NOW);
        errno = ENOENT;
        o[G_DLOPEN] = rc_outcome(lib ? 0 : -1);
    }
    o[G_TMP] = try_open("/tmp", O_RDONLY | O_DIRECTORY);
}

/* another process's POSIX shared memory for the worker to find; 0 when
 * /dev/shm cannot be written here */
static int shm_other(int make)
{
    char path[64];
    snprintf(path, sizeof path, "/dev/shm/kr-sandbox-other-%d", (int)getpid());
    if (!make)
        return unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return 0;
    write_all(fd, "the trainer's tensors", 21);
    close(fd);
    return 1;
}

/* gpu_worker_body in a GPU worker's sandbox without the grants named by
 * `without` (KR__GPU_WITHOUT_*), another process's shared memory beside
 * it; returns whether that file could be made */
static int run_gpu_worker(unsigned without, dirs *d, child_result *r)
{
    make_dirs(d);
    const char *reads[] = {d->rdir};
    kr__sandbox_spec spec = {reads, 1, NULL, 0, 0, 0, 0, 1, 0, without};
    int other = shm_other(1);
    child_exited(in_sandbox(&spec, gpu_worker_body, d, r, 60));
    if (other)
        shm_other(0);
    applied_ok(r);
    return other;
}

static void gpu_worker(void **state)
{
    (void)state;
    dirs d;
    child_result r;
    int other = run_gpu_worker(0, &d, &r);
    const child_result *c = &r;
    expect(c, G_MAPS, 1, 0, "reading /proc/self/maps");
    expect(c, G_STATUS, 1, 0, "reading /proc/self/status");
    expect_ll(c, G_ENVIRON, 0, EACCES, "reading /proc/self/environ");
    /* the task files are this process's own (readable since the grant
     * had to include read for pthread_setname_np); never another's */
    expect(c, G_TASK_ENVIRON, 1, 0, "reading its own /proc/self/task/<tid>/environ");
    expect(c, G_COMM, 1, 0, "naming a thread through /proc/self/task/<tid>/comm");
    expect(c, G_COMM_TRUNC, 1, 0, "naming a thread through comm opened with O_TRUNC");
    expect(c, G_SETNAME, 1, 0, "pthread_setname_np on another thread");
    /* known exposures of the task grant, kept visible: a change that
     * closes them (a private network namespace) should update the docs */
    expect(c, G_TASK_MEM, 1, 0, "opening its own /proc/self/task/<tid>/mem (its own memory)");
    if (!c->o[G_TASK_NET].ok && c->o[G_TASK_NET].err == ENOENT)
        print_message("SKIP task/<tid>/net: no such folder in this procfs\n");
    else
        expect(c, G_TASK_NET, 1, 0, "reading /proc/self/task/<tid>/net/unix (the namespace's sockets)");
    expect_ll(c, G_PARENT_COMM, 0, EACCES, "writing the parent's /proc/<pid>/task/<tid>/comm");
    expect_ll(c, G_MEM, 0, EACCES, "opening /proc/self/mem");
    expect_ll(c, G_INIT_ENVIRON, 0, EACCES, "reading /proc/1/environ");
    expect_ll(c, G_INIT_CMDLINE, 0, EACCES, "reading /proc/1/cmdline");
    expect_ll(c, G_PARENT_STATUS, 0, EACCES, "reading the parent's /proc/<pid>/status");
    expect_ll(c, G_PROC_SYS, 0, EACCES, "reading /proc/sys");
    expect_ll(c, G_PASSWD, 0, EACCES, "reading /etc/passwd");
    expect_ll(c, G_OUTSIDE, 0, EACCES, "reading a file outside the trees");
    expect_ll(c, G_TMP, 0, EACCES, "opening /tmp");
    expect(c, G_CPU_ONLINE, 1, 0, "reading /sys/devices/system/cpu/online");
    expect(c, G_LDSO_CACHE, 1, 0, "reading /etc/ld.so.cache");
    expect(c, G_DLOPEN, 1, 0, "dlopen of a library not loaded yet");
    if (access("/dev/shm", W_OK) == 0) {
        expect(c, G_SHM_CREATE, 1, 0, "a file in /dev/shm");
        expect_ll(c, G_SHM_MKDIR, 0, EACCES, "a folder in /dev/shm");
        /* a known exposure of the /dev/shm grant (docs/sandbox.md) */
        if (other)
            expect(c, G_SHM_OTHER, 1, 0, "reading another process's file in /dev/shm");
    } else {
        print_message("SKIP /dev/shm: not writable here\n");
    }
    remove_tree(&d);
}

/* "gpu_shm": false and "gpu_task_read": false (KR__GPU_WITHOUT_*): no
 * /dev/shm at all, and the task files written (a thread named the way the
 * driver names its own, fopen "w") but never read, so neither the same
 * user's shared memory nor task/<tid>/net */
static void gpu_worker_narrowed(void **state)
{
    (void)state;
    dirs d;
    child_result r;
    int other = run_gpu_worker(KR__GPU_WITHOUT_SHM | KR__GPU_WITHOUT_TASK_READ, &d, &r);
    const child_result *c = &r;
    expect(c, G_COMM, 1, 0, "naming a thread through /proc/self/task/<tid>/comm");
    expect(c, G_COMM_TRUNC, 1, 0, "naming a thread through comm opened with O_TRUNC");
    /* glibc's pthread_setname_np opens comm read-write: refused without read */
    expect_ll(c, G_SETNAME, 0, EACCES, "pthread_setname_np (read-write) without read");
    expect_ll(c, G_TASK_ENVIRON, 0, EACCES, "reading /proc/self/task/<tid>/environ");
    expect_ll(c, G_TASK_MEM, 0, EACCES, "opening /proc/self/task/<tid>/mem");
    if (!c->o[G_TASK_NET].ok && c->o[G_TASK_NET].err == ENOENT)
        print_message("SKIP task/<tid>/net: no such folder in this procfs\n");
    else
        expect_ll(c, G_TASK_NET, 0, EACCES, "reading /proc/self/task/<tid>/net/unix");
    expect(c, G_MAPS, 1, 0, "reading /proc/self/maps");
    if (access("/dev/shm", W_OK) == 0) {
        expect_ll(c, G_SHM_CREATE, 0, EACCES, "a file in /dev/shm");
        if (other)
            expect_ll(c, G_SHM_OTHER, 0, EACCES, "reading another process's file in /dev/shm");
    } else {
        print_message("SKIP /dev/shm: not writable here\n");
    }
    remove_tree(&d);
}

/* ---- threads started before the sandbox ---- */

static int g_go[2], g_done[2];
static outcome g_early[2];

static void *early_thread(void *arg)
{
    (void)arg;
    char c;
    if (read(g_go[0], &c, 1) == 1) {
        g_early[0] = try_open("/etc/passwd", O_RDONLY);
        char *argv[] = {"true", NULL};
        g_early[1] = rc_outcome(execve("/bin/true", argv, (char *[]){NULL}));
    }
    write_all(g_done[1], "x", 1);
    return NULL;
}

static void start_early_thread(const dirs *d, kr__sandbox_spec *spec)
{
    (void)d;
    (void)spec;
    pthread_t th;
    if (pipe(g_go) == 0 && pipe(g_done) == 0)
        pthread_create(&th, NULL, early_thread, NULL);
}

static void early_thread_body(const dirs *d, child_result *r)
{
    (void)d;
    char c;
    write_all(g_go[1], "x", 1);
    if (read(g_done[0], &c, 1) == 1) {
        r->o[0] = g_early[0];
        r->o[1] = g_early[1];
    }
}

/* Landlock restricts the calling thread and the threads it starts (the
 * kernel offers no way yet to restrict the others): the status says so.
 * The seccomp filter covers every thread (thread sync). */
static void threads_started_before(void **state)
{
    (void)state;
    dirs d;
    make_dirs(&d);
    const char *reads[] = {d.rdir};
    kr__sandbox_spec spec = {reads, 1, NULL, 0, 0, 0, 0, 0, 0, 0};
    child_result r;
    child_exited(in_sandbox_prepared(&spec, start_early_thread, early_thread_body, &d, &r, 60));
    applied_ok(&r);
    if (r.st.landlock) {
        if (!strstr(r.st.landlock_why, "not to the 1 started before"))
            fail_msg("the status does not say that an earlier thread is outside Landlock: '%s'",
                     r.st.landlock_why);
        /* the gap the status names, as it is */
        expect(&r, 0, 1, 0, "a thread started before the sandbox reads /etc/passwd");
    } else {
        print_message("SKIP Landlock and earlier threads: %s\n", r.st.landlock_why);
    }
    expect_sc(&r, 1, 0, EPERM, "execve from a thread started before the sandbox");
    remove_tree(&d);
}

/* ---- limits ---- */

static void spin(const dirs *d, child_result *r)
{
    (void)d;
    (void)r;
    for (volatile unsigned long i = 0;; i++)
        ;
}

static double children_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static void cpu_limit(void **state)
{
    (void)state;
    kr__sandbox_spec spec = {NULL, 0, NULL, 0, 0, 1, 0, 0, 0, 0};
    child_result r;
    double before = children_cpu_s();
    int status = in_sandbox(&spec, spin, NULL, &r, 60);
    double cpu = children_cpu_s() - before;
    applied_ok(&r);
    if (!WIFSIGNALED(status) || (WTERMSIG(status) != SIGXCPU && WTERMSIG(status) != SIGKILL))
        fail_msg("a child spinning past its CPU limit was not killed by SIGXCPU/SIGKILL (status "
                 "%#x)", status);
    /* the child's own CPU time, not the wall clock: on a loaded machine 1 s
     * of CPU takes many seconds of wall (this was flaky as a wall bound
     * under a build beside it). Killed at its limit: about 1 s (SIGXCPU),
     * 2 s at most (SIGKILL a second later), never the spin's whole run */
    if (cpu > 3.0)
        fail_msg("the child used %.2f s of CPU against a limit of 1 s", cpu);
}

static void measure_address_space(const dirs *d, kr__sandbox_spec *spec)
{
    (void)d;
    /* the limit is what this child maps already plus 256 MiB (sanitizers
     * reserve terabytes of shadow memory) */
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    unsigned long long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %llu kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    spec->address_space_bytes = (kib << 10) + (256ull << 20);
}

static void allocate(const dirs *d, child_result *r)
{
    (void)d;
    void *big = malloc((size_t)1 << 30);
    r->o[0] = rc_outcome(big ? 0 : -1); /* expected to fail */
    free(big);
    void *small = malloc((size_t)1 << 20);
    if (small)
        memset(small, 1, (size_t)1 << 20);
    r->o[1] = rc_outcome(small ? 0 : -1);
    free(small);
}

static void address_space_limit(void **state)
{
    (void)state;
    kr__sandbox_spec spec = {NULL, 0, NULL, 0, 1, 0, 0, 0, 0, 0};
    child_result r;
    child_exited(in_sandbox_prepared(&spec, measure_address_space, allocate, NULL, &r, 60));
    applied_ok(&r);
    expect(&r, 0, 0, 0, "malloc(1 GiB) past the address-space limit");
    expect(&r, 1, 1, 0, "malloc(1 MiB) within it");
}

static void read_nofile(const dirs *d, child_result *r)
{
    (void)d;
    struct rlimit lim;
    r->o[0] = rc_outcome(getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur == 64 &&
                                 lim.rlim_max == 64 ? 0 : -1);
}

static void open_files_limit(void **state)
{
    (void)state;
    kr__sandbox_spec spec = {NULL, 0, NULL, 0, 0, 0, 64, 0, 0, 0};
    child_result r;
    child_exited(in_sandbox(&spec, read_nofile, NULL, &r, 60));
    applied_ok(&r);
    expect(&r, 0, 1, 0, "RLIMIT_NOFILE is 64 (soft and hard)");
}

/* file_bytes: a file in the write tree grows to the limit and no further
 * (EFBIG where SIGXFSZ is ignored), so one file cannot fill the disk */
static long write_to(const dirs *d, const char *name, size_t n)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/%s", d->wdir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    static const char block[1024];
    long rc = 0;
    for (size_t done = 0; done < n && rc >= 0; done += sizeof block)
        rc = write(fd, block, sizeof block) == (ssize_t)sizeof block ? 0 : -1;
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

static void grow_file(const dirs *d, child_result *r)
{
    signal(SIGXFSZ, SIG_IGN);
    r->o[0] = rc_outcome(write_to(d, "small", 4096));
    r->o[1] = rc_outcome(write_to(d, "big", 8192));
}

static void grow_file_unguarded(const dirs *d, child_result *r)
{
    (void)r;
    write_to(d, "big", 8192);
}

static void file_size_limit(void **state)
{
    (void)state;
    dirs d;
    make_dirs(&d);
    const char *writes[] = {d.wdir};
    kr__sandbox_spec spec = {NULL, 0, writes, 1, 0, 0, 0, 0, 4096, 0};
    child_result r;
    child_exited(in_sandbox(&spec, grow_file, &d, &r, 60));
    applied_ok(&r);
    expect(&r, 0, 1, 0, "a file of 4096 bytes, the limit");
    expect(&r, 1, 0, EFBIG, "a file past the limit");
    int status = in_sandbox(&spec, grow_file_unguarded, &d, &r, 60);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGXFSZ); /* and no core: RLIMIT_CORE is 0 */
    if (WCOREDUMP(status))
        fail_msg("a sandboxed process dumped core");
    remove_tree(&d);
}

static void quit(const dirs *d, child_result *r)
{
    (void)d;
    (void)r;
    /* the default action (terminate with a core dump), whatever this test
     * inherited: a shell's background job starts with SIGQUIT ignored */
    signal(SIGQUIT, SIG_DFL);
    sigset_t quit_set;
    sigemptyset(&quit_set);
    sigaddset(&quit_set, SIGQUIT);
    sigprocmask(SIG_UNBLOCK, &quit_set, NULL);
    raise(SIGQUIT);
}

static void no_core_dump(void **state)
{
    (void)state;
    kr__sandbox_spec spec = {NULL, 0, NULL, 0, 0, 0, 0, 0, 0, 0};
    child_result r;
    int status = in_sandbox(&spec, quit, NULL, &r, 30);
    applied_ok(&r);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGQUIT);
    if (WCOREDUMP(status))
        fail_msg("a sandboxed process dumped core");
}

/* ---- other system call tables ---- */

static void x32_call(const dirs *d, child_result *r)
{
    (void)d;
    r->o[0] = rc_outcome(syscall(0x40000000L | SYS_getpid));
}

static void x32_killed(void **state)
{
    (void)state;
    kr__sandbox_spec spec = {NULL, 0, NULL, 0, 0, 0, 0, 0, 0, 0};
    child_result r;
    int status = in_sandbox(&spec, x32_call, NULL, &r, 30);
    applied_ok(&r);
    if (!r.st.seccomp) {
        print_message("SKIP x32: seccomp not applied (%s)\n", r.st.seccomp_why);
        return;
    }
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSYS)
        fail_msg("an x32 system call was not killed by the filter (status %#x)", status);
}

#if defined(__x86_64__)
static long ia32_getpid(void)
{
    long rc;
    __asm__ volatile("int $0x80" : "=a"(rc) : "a"(20L) : "memory");
    return rc;
}

static void ia32_call(const dirs *d, child_result *r)
{
    (void)d;
    r->o[0] = rc_outcome(ia32_getpid());
}
#endif

static void ia32_killed(void **state)
{
    (void)state;
#if defined(__x86_64__)
    /* whether this kernel runs 32-bit calls at all (IA32_EMULATION) */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(ia32_getpid() == (long)getpid() ? 0 : 1);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        print_message("SKIP ia32: this kernel does not run 32-bit system calls\n");
        return;
    }
    kr__sandbox_spec spec = {NULL, 0, NULL, 0, 0, 0, 0, 0, 0, 0};
    child_result r;
    status = in_sandbox(&spec, ia32_call, NULL, &r, 30);
    applied_ok(&r);
    if (!r.st.seccomp) {
        print_message("SKIP ia32: seccomp not applied (%s)\n", r.st.seccomp_why);
        return;
    }
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSYS)
        fail_msg("an int 0x80 (ia32) system call was not killed by the filter (status %#x)",
                 status);
#else
    print_message("SKIP ia32: not an x86-64 machine\n");
#endif
}

/* ---- NVRTC in a sandboxed compile worker (no GPU needed) ---- */

static const char *ADD_SRC =
    "extern \"C\" __global__ void add(const float* a, const float* b, float* c, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) c[i] = a[i] + b[i];\n"
    "}\n";

static kr_context *g_ctx;
static const char *g_reads[12];

static kr_context *compile_context(const char *cache_dir)
{
    kr_context_options o;
    kr_context_options_init(&o, KR_CONTEXT_OPTIONS_VERSION);
    o.flags = KR_CONTEXT_NO_DEVICE;
    o.cache_dir = cache_dir;
    kr_context *ctx = NULL;
    return kr_context_new(&ctx, &o) == KR_OK ? ctx : NULL;
}

/* As the compile worker does (lib/pool/worker.c): the context first, then
 * the sandbox with the toolkit, the library folders and the cache. NVRTC
 * itself is loaded by the first compile, inside the sandbox. */
static void compile_worker_prepare(const dirs *d, kr__sandbox_spec *spec)
{
    g_ctx = compile_context(d->wdir);
    const char *reads[] = {g_ctx ? g_ctx->cuda_home : "/usr/local/cuda", "/usr/lib",
                           "/usr/lib64", "/lib", "/lib64", "/usr/local/cuda", "/etc/ld.so.cache"};
    memcpy(g_reads, reads, sizeof reads);
    spec->read_paths = g_reads;
    spec->num_read = sizeof reads / sizeof reads[0];
    measure_address_space(d, spec);
    spec->address_space_bytes += 8ull << 30;
}

static void compile_in_sandbox(const dirs *d, child_result *r)
{
    (void)d;
    kr_program *p = NULL;
    errno = EINVAL;
    r->o[0] = rc_outcome(g_ctx && kr_compile(&p, g_ctx, ADD_SRC, 0, NULL) == KR_OK &&
                                 kr_program_kernel_count(p) == 1 ? 0 : -1);
    if (!r->o[0].ok && g_ctx)
        snprintf(r->detail, sizeof r->detail, "%s", kr_context_errmsg(g_ctx));
    kr_program_free(p);
}

static void nvrtc_compile(void **state)
{
    (void)state;
    dirs d;
    make_dirs(&d);
    /* whether NVRTC compiles here at all, in a child (this process keeps
     * NVRTC unloaded, so the sandboxed child loads it itself) */
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        kr_context *ctx = compile_context(NULL);
        kr_program *p = NULL;
        _exit(ctx && kr_compile(&p, ctx, ADD_SRC, 0, NULL) == KR_OK ? 0 : 1);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        print_message("SKIP NVRTC in the sandbox: no NVRTC compile works here at all\n");
        remove_tree(&d);
        return;
    }
    kr__sandbox_spec spec = {NULL, 0, NULL, 1, 0, 0, 0, 0, 0, 0};
    const char *writes[] = {d.wdir};
    spec.write_paths = writes;
    child_result r;
    child_exited(in_sandbox_prepared(&spec, compile_worker_prepare, compile_in_sandbox, &d, &r,
                                     120));
    applied_ok(&r);
    if (!r.o[0].ok)
        fail_msg("NVRTC compile in the sandbox failed: %s", r.detail);
    remove_tree(&d);
}

/* ---- probing, and a spec that is missing ---- */

static void probe(void **state)
{
    (void)state;
    int nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
    kr__sandbox_status st;
    memset(&st, 0x5a, sizeof st);
    kr__sandbox_probe(&st);
    assert_int_equal(st.landlock, 0);
    assert_int_equal(st.seccomp, 0);
    assert_int_equal(st.rlimits, 0);
    assert_int_equal(st.no_new_privs, nnp == 1);
    assert_int_equal(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), nnp); /* nothing applied */
    long abi = syscall(444 /* landlock_create_ruleset */, NULL, 0L, 1L);
    assert_int_equal(st.landlock_abi, abi > 0 ? (int)abi : 0);
    if (st.landlock_abi == 0)
        assert_true(st.landlock_why[0] != '\0');
    else
        assert_string_equal(st.landlock_why, "");
    print_message("this kernel: Landlock ABI %d%s%s; seccomp %s\n", st.landlock_abi,
                  st.landlock_abi ? "" : ": ", st.landlock_why,
                  st.seccomp_why[0] ? st.seccomp_why : "available");
}

static void missing_spec(void **state)
{
    (void)state;
    int nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
    char why[128];
    kr__sandbox_status st;
    assert_int_equal(kr__sandbox_apply(NULL, &st, why, sizeof why), -1);
    assert_string_equal(why, "no sandbox spec");
    assert_int_equal(st.no_new_privs, 0);
    assert_int_equal(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), nnp); /* nothing applied */
}

/* kr_pool_sandbox_json agrees with the probes the workers use, and gives a
 * reason exactly where something is missing. */
static void sandbox_json_says_what_is_missing(void **state)
{
    (void)state;
    char *text = NULL;
    assert_int_equal(kr_pool_sandbox_json(&text), KR_OK);
    json_t *o = json_loads(text, 0, NULL);
    assert_non_null(o);
    kr__sandbox_status st;
    kr__sandbox_probe(&st);
    assert_int_equal(json_integer_value(json_object_get(o, "landlock_abi")), st.landlock_abi);
    assert_int_equal(json_is_true(json_object_get(o, "landlock")), st.landlock_abi > 0);
    int seccomp = json_is_true(json_object_get(o, "seccomp"));
    assert_int_equal(strlen(json_string_value(json_object_get(o, "landlock_why"))) > 0,
                     st.landlock_abi == 0);
    assert_int_equal(strlen(json_string_value(json_object_get(o, "seccomp_why"))) > 0, !seccomp);
    json_decref(o);
    kr_free(text);
    assert_int_equal(kr_pool_sandbox_json(NULL), KR_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(probe),
        cmocka_unit_test(missing_spec),
        cmocka_unit_test(compile_worker),
        cmocka_unit_test(gpu_worker),
        cmocka_unit_test(gpu_worker_narrowed),
        cmocka_unit_test(threads_started_before),
        cmocka_unit_test(cpu_limit),
        cmocka_unit_test(address_space_limit),
        cmocka_unit_test(open_files_limit),
        cmocka_unit_test(file_size_limit),
        cmocka_unit_test(no_core_dump),
        cmocka_unit_test(x32_killed),
        cmocka_unit_test(ia32_killed),
        cmocka_unit_test(nvrtc_compile),
        cmocka_unit_test(sandbox_json_says_what_is_missing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
