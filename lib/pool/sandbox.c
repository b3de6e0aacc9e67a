/* The sandbox a kreward-worker puts itself in (pool/sandbox.h): no new
 * privileges, no core dumps, resource limits, Landlock through its raw
 * system calls (no library), and a seccomp filter through libseccomp. Each
 * layer is applied where the kernel offers it, and what was not applied is
 * said in the status. docs/sandbox.md lists every grant and every refusal
 * and says why. */
#include "pool/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- Landlock: the kernel's interface, spelled out here (the installed
 * <linux/landlock.h> may be older than the kernel) ---- */

#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_add_rule 445
#define __NR_landlock_restrict_self 446
#endif

#define LL_KNOWN_ABI 7 /* the newest ABI whose rights this file knows */
#define LL_CREATE_VERSION (1u << 0)
#define LL_CREATE_ERRATA (1u << 1)
#define LL_RULE_PATH_BENEATH 1

typedef struct {
    uint64_t handled_access_fs;  /* ABI 1 */
    uint64_t handled_access_net; /* ABI 4 */
    uint64_t scoped;             /* ABI 6 */
} ll_ruleset_attr;

typedef struct __attribute__((packed)) {
    uint64_t allowed_access;
    int32_t parent_fd;
} ll_path_beneath_attr;

#define FS_EXECUTE (1ull << 0)
#define FS_WRITE_FILE (1ull << 1)
#define FS_READ_FILE (1ull << 2)
#define FS_READ_DIR (1ull << 3)
#define FS_REMOVE_DIR (1ull << 4)
#define FS_REMOVE_FILE (1ull << 5)
#define FS_MAKE_CHAR (1ull << 6)
#define FS_MAKE_DIR (1ull << 7)
#define FS_MAKE_REG (1ull << 8)
#define FS_MAKE_SOCK (1ull << 9)
#define FS_MAKE_FIFO (1ull << 10)
#define FS_MAKE_BLOCK (1ull << 11)
#define FS_MAKE_SYM (1ull << 12)
#define FS_REFER (1ull << 13)     /* ABI 2 */
#define FS_TRUNCATE (1ull << 14)  /* ABI 3 */
#define FS_IOCTL_DEV (1ull << 15) /* ABI 5 */
#define NET_BIND_TCP (1ull << 0)    /* ABI 4 */
#define NET_CONNECT_TCP (1ull << 1) /* ABI 4 */
#define SCOPE_ABSTRACT_UNIX (1ull << 0) /* ABI 6 */
#define SCOPE_SIGNAL (1ull << 1)        /* ABI 6 */
/* erratum 2 (ABI 6): signal scoping also stopped threads of one process in
 * different domains from signalling each other */
#define LL_ERRATUM_SIGNAL_THREADS (1u << 1)

/* the rights a rule on a file (not a directory) may carry */
#define FS_FILE_RIGHTS (FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV)
#define FS_READ (FS_EXECUTE | FS_READ_FILE | FS_READ_DIR)
#define FS_WRITE                                                                              \
    (FS_READ | FS_WRITE_FILE | FS_TRUNCATE | FS_MAKE_REG | FS_MAKE_DIR | FS_REMOVE_FILE |    \
     FS_REMOVE_DIR | FS_REFER)
#define FS_DEVICE (FS_READ_FILE | FS_WRITE_FILE | FS_IOCTL_DEV)

static uint64_t ll_fs_handled(int abi)
{
    uint64_t fs = (FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0..12 */
    if (abi >= 2)
        fs |= FS_REFER;
    if (abi >= 3)
        fs |= FS_TRUNCATE;
    if (abi >= 5)
        fs |= FS_IOCTL_DEV;
    return fs;
}

/* The kernel's Landlock ABI, or 0 with why. */
static int ll_abi(char *why, size_t why_size)
{
    long abi = syscall(__NR_landlock_create_ruleset, NULL, 0, LL_CREATE_VERSION);
    if (abi > 0)
        return (int)abi;
    if (errno == ENOSYS)
        snprintf(why, why_size, "this kernel has no Landlock (landlock_create_ruleset: ENOSYS)");
    else if (errno == EOPNOTSUPP)
        snprintf(why, why_size, "Landlock is built into this kernel but not enabled (add "
                                "landlock to the lsm= boot parameter)");
    else
        snprintf(why, why_size, "landlock_create_ruleset: %s", strerror(errno));
    return 0;
}

static unsigned ll_errata(void)
{
    long e = syscall(__NR_landlock_create_ruleset, NULL, 0, LL_CREATE_ERRATA);
    return e > 0 ? (unsigned)e : 0u;
}

#define LL_MAX_PINS 16 /* more than gpu_grants pins (11) */

typedef struct {
    int ruleset;
    uint64_t handled;
    int pins[LL_MAX_PINS]; /* O_PATH descriptors kept open (see ll_allow) */
    size_t num_pins;
    char *why;
    size_t why_size;
} ll_build;

/* Grants rights beneath path (a directory) or on it (a file). A path that
 * does not exist, or that this process may not even look up, is skipped.
 * With pin, the O_PATH descriptor stays open for the life of the process:
 * procfs makes a new inode for /proc/<pid>/... on every fresh lookup, and a
 * Landlock rule belongs to an inode, so the rule would be lost once the
 * kernel dropped the cached entry; an open descriptor keeps it cached. */
static int ll_allow(ll_build *b, const char *path, uint64_t rights, int pin)
{
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR || errno == EACCES || errno == ENXIO)
            return 0;
        snprintf(b->why, b->why_size, "Landlock: cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(b->why, b->why_size, "Landlock: cannot stat %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISDIR(st.st_mode))
        rights &= FS_FILE_RIGHTS;
    rights &= b->handled;
    if (rights == 0) {
        close(fd);
        return 0;
    }
    ll_path_beneath_attr rule = {rights, fd};
    if (syscall(__NR_landlock_add_rule, b->ruleset, LL_RULE_PATH_BENEATH, &rule, 0) != 0) {
        snprintf(b->why, b->why_size, "landlock_add_rule(%s): %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (pin && b->num_pins < LL_MAX_PINS)
        b->pins[b->num_pins++] = fd;
    else
        close(fd);
    return 0;
}

/* What a GPU worker needs beyond its read and write trees: docs/sandbox.md
 * says why each is here. */
typedef struct {
    const char *path;
    uint64_t rights;
    int pin;
} grant;

static const grant always_grants[] = {
    {"/dev/null", FS_READ_FILE | FS_WRITE_FILE, 0},
    {"/dev/zero", FS_READ_FILE, 0},
    {"/dev/random", FS_READ_FILE, 0},
    {"/dev/urandom", FS_READ_FILE, 0},
};

static const grant gpu_grants[] = {
    /* the driver's device files (the per-GPU /dev/nvidiaN are added by
     * gpu_device_grants) */
    {"/dev/nvidiactl", FS_DEVICE, 0},
    {"/dev/nvidia-uvm", FS_DEVICE, 0},
    {"/dev/nvidia-uvm-tools", FS_DEVICE, 0},
    {"/dev/nvidia-caps", FS_DEVICE | FS_READ_DIR, 0},
    {"/dev/nvidia-caps-imex-channels", FS_DEVICE | FS_READ_DIR, 0},
    {"/dev/shm", FS_READ_FILE | FS_READ_DIR | FS_WRITE_FILE | FS_TRUNCATE | FS_MAKE_REG |
                     FS_REMOVE_FILE, 0},
    /* the machine's shape: PCI devices, NUMA nodes, CPUs */
    {"/sys/devices", FS_READ_FILE | FS_READ_DIR, 0},
    {"/sys/bus/pci", FS_READ_FILE | FS_READ_DIR, 0},
    {"/sys/module/nvidia", FS_READ_FILE | FS_READ_DIR, 0},
    {"/sys/module/nvidia_uvm", FS_READ_FILE | FS_READ_DIR, 0},
    /* the driver's own procfs files */
    {"/proc/driver/nvidia", FS_READ_FILE | FS_READ_DIR, 0},
    {"/proc/driver/nvidia-uvm", FS_READ_FILE | FS_READ_DIR, 0},
    {"/proc/driver/nvidia-caps", FS_READ_FILE | FS_READ_DIR, 0},
    {"/proc/devices", FS_READ_FILE, 0},
    {"/proc/cpuinfo", FS_READ_FILE, 0},
    {"/proc/meminfo", FS_READ_FILE, 0},
    {"/proc/stat", FS_READ_FILE, 0},
    /* this process's own procfs files, one by one: never its environ or
     * memory, never another process's */
    {"/proc/self/maps", FS_READ_FILE, 1},
    {"/proc/self/status", FS_READ_FILE, 1},
    {"/proc/self/stat", FS_READ_FILE, 1},
    {"/proc/self/statm", FS_READ_FILE, 1},
    {"/proc/self/limits", FS_READ_FILE, 1},
    {"/proc/self/cmdline", FS_READ_FILE, 1},
    {"/proc/self/auxv", FS_READ_FILE, 1},
    {"/proc/self/mountinfo", FS_READ_FILE, 1},
    {"/proc/self/cgroup", FS_READ_FILE, 1},
    {"/proc/self/fd", FS_READ_DIR, 1},
    /* thread names (the driver names its threads through
     * task/<tid>/comm): write, not read, as task/<tid>/environ is there too */
    {"/proc/self/task", FS_READ_DIR | FS_WRITE_FILE, 1},
    /* the loader */
    {"/etc/ld.so.cache", FS_READ_FILE, 0},
    {"/lib", FS_READ, 0},
    {"/lib64", FS_READ, 0},
    {"/usr/lib", FS_READ, 0},
    {"/usr/lib64", FS_READ, 0},
};

/* /dev/nvidia0, /dev/nvidia1, ...: the GPUs (not nvidia-modeset, display
 * control, nor the NVSwitch and NVLink management nodes). */
static int gpu_device_grants(ll_build *b)
{
    for (int i = 0; i < 64; i++) {
        char path[32];
        snprintf(path, sizeof path, "/dev/nvidia%d", i);
        if (ll_allow(b, path, FS_DEVICE, 0) != 0)
            return -1;
    }
    return 0;
}

/* The folders the NVIDIA and CUDA libraries were loaded from (libcuda
 * loads its JIT compiler from its own folder, NVRTC its builtins), wherever
 * they are (a container's /usr/local/nvidia/lib64, a Python wheel). */
#define LIB_DIRS 16
typedef struct {
    char dirs[LIB_DIRS][512];
    size_t n;
} lib_dirs;

static int lib_dir_of(struct dl_phdr_info *info, size_t size, void *user)
{
    (void)size;
    static const char *const prefixes[] = {"libcuda", "libnvidia", "libcupti", "libnvrtc",
                                           "libnvJitLink", "libcudart"};
    lib_dirs *d = user;
    const char *name = info->dlpi_name;
    const char *slash = name ? strrchr(name, '/') : NULL;
    if (!slash || slash == name || d->n == LIB_DIRS)
        return 0;
    int match = 0;
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        match |= strncmp(slash + 1, prefixes[i], strlen(prefixes[i])) == 0;
    size_t len = (size_t)(slash - name);
    if (!match || len >= sizeof d->dirs[0])
        return 0;
    memcpy(d->dirs[d->n], name, len);
    d->dirs[d->n][len] = '\0';
    for (size_t i = 0; i < d->n; i++)
        if (strcmp(d->dirs[i], d->dirs[d->n]) == 0)
            return 0;
    d->n++;
    return 0;
}

static int threads_running(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    int n = -1;
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    if (f)
        fclose(f);
    return n;
}

static int ll_rules(ll_build *b, const kr__sandbox_spec *spec)
{
    for (size_t i = 0; spec->read_paths && i < spec->num_read; i++)
        if (spec->read_paths[i] && ll_allow(b, spec->read_paths[i], FS_READ, 0) != 0)
            return -1;
    for (size_t i = 0; spec->write_paths && i < spec->num_write; i++)
        if (spec->write_paths[i] && ll_allow(b, spec->write_paths[i], FS_WRITE, 0) != 0)
            return -1;
    for (size_t i = 0; i < sizeof always_grants / sizeof always_grants[0]; i++)
        if (ll_allow(b, always_grants[i].path, always_grants[i].rights, 0) != 0)
            return -1;
    if (!spec->allow_gpu)
        return 0;
    for (size_t i = 0; i < sizeof gpu_grants / sizeof gpu_grants[0]; i++)
        if (ll_allow(b, gpu_grants[i].path, gpu_grants[i].rights, gpu_grants[i].pin) != 0)
            return -1;
    if (gpu_device_grants(b) != 0)
        return -1;
    lib_dirs d;
    d.n = 0;
    dl_iterate_phdr(lib_dir_of, &d);
    for (size_t i = 0; i < d.n; i++)
        if (ll_allow(b, d.dirs[i], FS_READ, 0) != 0)
            return -1;
    return 0;
}

/* Landlock: returns 0 when applied or when the kernel has none (status
 * says which), -1 with why when the kernel has it and applying failed. */
static int apply_landlock(const kr__sandbox_spec *spec, kr__sandbox_status *st, char *why,
                          size_t why_size)
{
    st->landlock_abi = ll_abi(st->landlock_why, sizeof st->landlock_why);
    if (st->landlock_abi == 0)
        return 0;
    int abi = st->landlock_abi < LL_KNOWN_ABI ? st->landlock_abi : LL_KNOWN_ABI;
    int threads = threads_running();
    ll_ruleset_attr attr = {ll_fs_handled(abi), 0, 0};
    size_t attr_size = sizeof attr.handled_access_fs;
    if (abi >= 4) {
        attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP; /* no rule: none allowed */
        attr_size = 2 * sizeof(uint64_t);
    }
    int signals_scoped = 0;
    if (abi >= 6) {
        attr.scoped = SCOPE_ABSTRACT_UNIX;
        /* without erratum 2 the worker's thread could not signal its own
         * threads started before the sandbox (CUDA's) */
        if (ll_errata() & LL_ERRATUM_SIGNAL_THREADS) {
            attr.scoped |= SCOPE_SIGNAL;
            signals_scoped = 1;
        }
        attr_size = sizeof attr;
    }
    ll_build b;
    memset(&b, 0, sizeof b);
    b.handled = attr.handled_access_fs;
    b.why = why;
    b.why_size = why_size;
    b.ruleset = (int)syscall(__NR_landlock_create_ruleset, &attr, attr_size, 0);
    if (b.ruleset < 0) {
        snprintf(why, why_size, "landlock_create_ruleset: %s", strerror(errno));
        return -1;
    }
    int rc = ll_rules(&b, spec);
    if (rc == 0 && syscall(__NR_landlock_restrict_self, b.ruleset, 0) != 0) {
        snprintf(why, why_size, "landlock_restrict_self: %s", strerror(errno));
        rc = -1;
    }
    close(b.ruleset);
    if (rc != 0) {
        for (size_t i = 0; i < b.num_pins; i++)
            close(b.pins[i]);
        return -1;
    }
    /* b.pins stay open on purpose (ll_allow) */
    st->landlock = 1;
    int used = 0;
    st->landlock_why[0] = '\0';
    if (threads > 1)
        used = snprintf(st->landlock_why, sizeof st->landlock_why,
                        "applied to this thread and those it starts, not to the %d started "
                        "before (they keep their file access)",
                        threads - 1);
    if (abi >= 6 && !signals_scoped && used >= 0 && (size_t)used < sizeof st->landlock_why)
        snprintf(st->landlock_why + used, sizeof st->landlock_why - (size_t)used,
                 "%ssignals not scoped (kernel lacks Landlock erratum 2)", used ? "; " : "");
    return 0;
}

/* ---- seccomp ---- */

typedef struct {
    const char *name;
    int err;
} denied_call;

/* One argument comparison, every field named: libseccomp's SCMP_An macros
 * leave datum_b to a partial initializer, which older headers turn into a
 * -Wmissing-field-initializers error. */
static struct scmp_arg_cmp arg_cmp(unsigned arg, enum scmp_compare op, scmp_datum_t a,
                                   scmp_datum_t b)
{
    struct scmp_arg_cmp c = {.arg = arg, .op = op, .datum_a = a, .datum_b = b};
    return c;
}

/* Refused outright, whatever the arguments (docs/sandbox.md groups them). */
static const denied_call denied_calls[] = {
    /* running another program */
    {"execve", EPERM}, {"execveat", EPERM},
    /* other processes' memory */
    {"ptrace", EPERM}, {"process_vm_readv", EPERM}, {"process_vm_writev", EPERM},
    {"pidfd_getfd", EPERM},
    /* the shape of the file system, namespaces */
    {"mount", EPERM}, {"umount2", EPERM}, {"pivot_root", EPERM}, {"chroot", EPERM},
    {"mount_setattr", EPERM}, {"move_mount", EPERM}, {"open_tree", EPERM}, {"fsopen", EPERM},
    {"fsconfig", EPERM}, {"fsmount", EPERM}, {"fspick", EPERM}, {"unshare", EPERM},
    {"setns", EPERM},
    /* the kernel's attack surface */
    {"kexec_load", EPERM}, {"kexec_file_load", EPERM}, {"init_module", EPERM},
    {"finit_module", EPERM}, {"delete_module", EPERM}, {"bpf", EPERM}, {"userfaultfd", EPERM},
    {"keyctl", EPERM}, {"add_key", EPERM}, {"request_key", EPERM}, {"io_uring_setup", EPERM},
    {"io_uring_enter", EPERM}, {"io_uring_register", EPERM}, {"modify_ldt", EPERM},
    /* EACCES, as perf_event_paranoid answers unprivileged callers */
    {"perf_event_open", EACCES},
    /* administration: matters where the worker runs with capabilities (root) */
    {"reboot", EPERM}, {"swapon", EPERM}, {"swapoff", EPERM}, {"syslog", EPERM},
    {"acct", EPERM}, {"settimeofday", EPERM}, {"clock_settime", EPERM}, {"adjtimex", EPERM},
    {"clock_adjtime", EPERM}, {"sethostname", EPERM}, {"setdomainname", EPERM},
    {"iopl", EPERM}, {"ioperm", EPERM}, {"quotactl", EPERM}, {"quotactl_fd", EPERM},
    {"lookup_dcookie", EPERM}, {"open_by_handle_at", EPERM}, {"name_to_handle_at", EPERM},
    {"fanotify_init", EPERM}, {"vhangup", EPERM}, {"mknod", EPERM}, {"mknodat", EPERM},
    /* identity: a worker stays who it is (a change of credentials sets
     * dumpable to fs.suid_dumpable, which may be 2) */
    {"setuid", EPERM}, {"setgid", EPERM}, {"setreuid", EPERM}, {"setregid", EPERM},
    {"setresuid", EPERM}, {"setresgid", EPERM}, {"setfsuid", EPERM}, {"setfsgid", EPERM},
    {"setgroups", EPERM},
    /* the limits stay as set (root could raise them) */
    {"setrlimit", EPERM},
    /* no connection to a named socket of the host (no network sockets at all) */
    {"connect", EPERM},
};

typedef struct {
    char *why;
    size_t why_size;
    char unknown[128]; /* names this libseccomp does not know */
} sc_build;

static int sc_rule(scmp_filter_ctx ctx, sc_build *b, const char *name, int err,
                   unsigned n, const struct scmp_arg_cmp *cmp)
{
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) {
        size_t used = strlen(b->unknown);
        snprintf(b->unknown + used, sizeof b->unknown - used, "%s%s", used ? ", " : "", name);
        return 0;
    }
    if (nr < 0)
        return 0; /* not a system call of this architecture: nothing to refuse */
    int rc = seccomp_rule_add_array(ctx, (uint32_t)SCMP_ACT_ERRNO((unsigned)err), nr, n, cmp);
    if (rc != 0) {
        snprintf(b->why, b->why_size, "seccomp rule for %s: %s", name, strerror(-rc));
        return -1;
    }
    return 0;
}

#define LOW32 0xffffffffull

static int sc_rules(scmp_filter_ctx ctx, sc_build *b)
{
    for (size_t i = 0; i < sizeof denied_calls / sizeof denied_calls[0]; i++)
        if (sc_rule(ctx, b, denied_calls[i].name, denied_calls[i].err, 0, NULL) != 0)
            return -1;
    /* sockets: AF_UNIX only (the worker's own socket pair is inherited).
     * The family is compared on all 64 bits: any high bit refuses. */
    struct scmp_arg_cmp not_unix = arg_cmp(0, SCMP_CMP_NE, AF_UNIX, 0);
    if (sc_rule(ctx, b, "socket", EPERM, 1, &not_unix) != 0 ||
        sc_rule(ctx, b, "socketpair", EPERM, 1, &not_unix) != 0)
        return -1;
    /* clone with a namespace flag (clone3 hides its flags in memory:
     * ENOSYS makes the C library fall back to clone) */
    static const uint64_t ns_flags[] = {CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
                                        CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET};
    for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags[0]; i++) {
        struct scmp_arg_cmp ns = arg_cmp(0, SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]);
        if (sc_rule(ctx, b, "clone", EPERM, 1, &ns) != 0)
            return -1;
    }
    if (sc_rule(ctx, b, "clone3", ENOSYS, 0, NULL) != 0)
        return -1;
    /* the kernel reads these int arguments from the low 32 bits */
    struct scmp_arg_cmp sti = arg_cmp(1, SCMP_CMP_MASKED_EQ, LOW32, TIOCSTI);
    struct scmp_arg_cmp linux_tty = arg_cmp(1, SCMP_CMP_MASKED_EQ, LOW32, TIOCLINUX);
    struct scmp_arg_cmp dumpable = arg_cmp(0, SCMP_CMP_MASKED_EQ, LOW32, PR_SET_DUMPABLE);
    struct scmp_arg_cmp new_limit = arg_cmp(2, SCMP_CMP_NE, 0, 0);
    if (sc_rule(ctx, b, "ioctl", EPERM, 1, &sti) != 0 ||
        sc_rule(ctx, b, "ioctl", EPERM, 1, &linux_tty) != 0 ||
        sc_rule(ctx, b, "prctl", EPERM, 1, &dumpable) != 0 ||
        sc_rule(ctx, b, "prlimit64", EPERM, 1, &new_limit) != 0)
        return -1;
    return 0;
}

/* Whether this kernel and libseccomp can load the filter (thread sync,
 * kill-process); why not otherwise. */
static int sc_available(char *why, size_t why_size)
{
    if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0 && errno == EINVAL) {
        snprintf(why, why_size, "this kernel has no seccomp (CONFIG_SECCOMP)");
        return 0;
    }
    unsigned api = seccomp_api_get();
    if (api < 3) {
        snprintf(why, why_size, "seccomp filters with thread sync and kill-process need Linux "
                                ">= 4.14 (libseccomp API level %u)", api);
        return 0;
    }
    return 1;
}

static int apply_seccomp(kr__sandbox_status *st, char *why, size_t why_size)
{
    if (!sc_available(st->seccomp_why, sizeof st->seccomp_why))
        return 0;
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) {
        snprintf(why, why_size, "seccomp_init failed");
        return -1;
    }
    sc_build b;
    memset(&b, 0, sizeof b);
    b.why = why;
    b.why_size = why_size;
    int rc = -1;
    /* only the native system call table: a 32-bit (ia32) call, or an x32
     * one, would pass a filter written for the 64-bit numbers */
    if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) != 0 ||
        seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1) != 0 ||
        seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1) != 0) {
        snprintf(why, why_size, "seccomp: cannot set the filter's attributes");
        goto out;
    }
    if (sc_rules(ctx, &b) != 0)
        goto out;
    int err = seccomp_load(ctx);
    if (err != 0) {
        snprintf(why, why_size, "seccomp_load: %s", strerror(-err));
        goto out;
    }
    st->seccomp = 1;
    st->seccomp_why[0] = '\0';
    if (b.unknown[0])
        snprintf(st->seccomp_why, sizeof st->seccomp_why,
                 "applied; this libseccomp does not know %s (not refused)", b.unknown);
    rc = 0;
out:
    seccomp_release(ctx);
    return rc;
}

/* ---- resource limits ---- */

static int set_limit(int resource, const char *name, rlim_t soft, rlim_t hard, char *why,
                     size_t why_size)
{
    struct rlimit cur;
    if (getrlimit(resource, &cur) != 0) {
        snprintf(why, why_size, "getrlimit(%s): %s", name, strerror(errno));
        return -1;
    }
    /* lowering only: raising a limit is not the sandbox's business */
    struct rlimit lim = {soft, hard};
    if (lim.rlim_max > cur.rlim_max)
        lim.rlim_max = cur.rlim_max;
    if (lim.rlim_cur > lim.rlim_max)
        lim.rlim_cur = lim.rlim_max;
    if (setrlimit(resource, &lim) != 0) {
        snprintf(why, why_size, "setrlimit(%s): %s", name, strerror(errno));
        return -1;
    }
    return 0;
}

static int apply_limits(const kr__sandbox_spec *spec, char *why, size_t why_size)
{
    if (set_limit(RLIMIT_CORE, "RLIMIT_CORE", 0, 0, why, why_size) != 0)
        return -1;
    if (spec->address_space_bytes &&
        set_limit(RLIMIT_AS, "RLIMIT_AS", (rlim_t)spec->address_space_bytes,
                  (rlim_t)spec->address_space_bytes, why, why_size) != 0)
        return -1;
    if (spec->cpu_seconds) {
        /* counted from now (RLIMIT_CPU counts the CPU time already used):
         * SIGXCPU at the limit, which a worker may catch to report, and
         * SIGKILL a second later */
        struct rusage ru;
        rlim_t used = 0;
        if (getrusage(RUSAGE_SELF, &ru) == 0)
            used = (rlim_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1);
        rlim_t soft = used + (rlim_t)spec->cpu_seconds;
        if (set_limit(RLIMIT_CPU, "RLIMIT_CPU", soft, soft + 1, why, why_size) != 0)
            return -1;
    }
    if (spec->open_files &&
        set_limit(RLIMIT_NOFILE, "RLIMIT_NOFILE", (rlim_t)spec->open_files,
                  (rlim_t)spec->open_files, why, why_size) != 0)
        return -1;
    return 0;
}

/* ---- the whole ---- */

int kr__sandbox_apply(const kr__sandbox_spec *spec, kr__sandbox_status *status, char *why,
                      size_t why_size)
{
    kr__sandbox_status local;
    kr__sandbox_status *st = status ? status : &local;
    memset(st, 0, sizeof *st);
    if (why_size)
        why[0] = '\0';
    if (!spec) {
        snprintf(why, why_size, "no sandbox spec");
        return -1;
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        snprintf(why, why_size, "PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
        return -1;
    }
    st->no_new_privs = 1;
    /* no core file, no ptrace by same-user processes, /proc/<pid> owned by
     * root: the candidate's memory stays in this process */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
        snprintf(why, why_size, "PR_SET_DUMPABLE: %s", strerror(errno));
        return -1;
    }
    if (apply_limits(spec, why, why_size) != 0)
        return -1;
    st->rlimits = 1;
    /* the filter last: it refuses setrlimit and PR_SET_DUMPABLE, used above */
    if (apply_landlock(spec, st, why, why_size) != 0)
        return -1;
    if (apply_seccomp(st, why, why_size) != 0)
        return -1;
    return 0;
}

void kr__sandbox_probe(kr__sandbox_status *status)
{
    if (!status)
        return;
    memset(status, 0, sizeof *status);
    status->no_new_privs = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1;
    status->landlock_abi = ll_abi(status->landlock_why, sizeof status->landlock_why);
    sc_available(status->seccomp_why, sizeof status->seccomp_why);
}
