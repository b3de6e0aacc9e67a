/* The sandbox's Landlock layer (sandbox.c applies it): the kernel's
 * interface through its raw system calls (no library), and every grant a
 * worker gets (docs/sandbox.md says why each is there). */
#include "sandbox/sandbox_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
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
int kr__sandbox_landlock_abi(char *why, size_t why_size)
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
    uint64_t exec; /* FS_EXECUTE where programs may be started, else 0 */
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
    if (!(rights & FS_WRITE_FILE))
        rights = (rights & ~FS_EXECUTE) | (rights & b->exec); /* read trees only */
    else
        rights &= ~FS_EXECUTE; /* never where files can be written: no dropped program runs */
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
    /* this process's own procfs files, one by one: not its environ or
     * memory (but see task below), never another process's */
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
    /* thread names: the driver names the threads it starts through
     * task/<tid>/comm. glibc's pthread_setname_np opens it read-write, and
     * fopen(.., "w") with O_TRUNC, a right of its own in Landlock: with
     * write alone (801a644) and with read and write (b8b392e) cuInit still
     * failed with 304 on the H200, where write=/proc/self/task (every write
     * right) let it start. Reading the task files opens each thread's
     * environ and mem, which are this process's own memory anyway, and
     * task/<tid>/net/, the network namespace's tables (every socket of
     * the namespace, unix socket paths, routes): a known exposure
     * (docs/sandbox.md). Never another process's task folder (/proc/self
     * is opened as /proc/<pid>) */
    {"/proc/self/task", FS_READ_DIR | FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE, 1},
    /* the loader */
    {"/etc/ld.so.cache", FS_READ_FILE, 0},
    {"/lib", FS_READ, 0},
    {"/lib64", FS_READ, 0},
    {"/usr/lib", FS_READ, 0},
    {"/usr/lib64", FS_READ, 0},
};

/* The GPU grants a spec may narrow (kr__sandbox_spec.gpu_without): a
 * path of gpu_grants, the bit, and its rights then (0: no rule at all). */
static const struct {
    const char *path;
    unsigned bit;
    uint64_t rights;
} gpu_narrowed[] = {
    {"/dev/shm", KR__GPU_WITHOUT_SHM, 0},
    /* names threads (write, truncate) and lists them, reads none of the
     * task files (their net/ folder is the namespace's socket tables) */
    {"/proc/self/task", KR__GPU_WITHOUT_TASK_READ, FS_READ_DIR | FS_WRITE_FILE | FS_TRUNCATE},
};

static uint64_t gpu_rights(const kr__sandbox_spec *spec, const grant *g)
{
    for (size_t i = 0; i < sizeof gpu_narrowed / sizeof gpu_narrowed[0]; i++)
        if ((spec->gpu_without & gpu_narrowed[i].bit) && strcmp(g->path, gpu_narrowed[i].path) == 0)
            return gpu_narrowed[i].rights;
    return g->rights;
}

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
    /* every worker: NVRTC loads its builtins from its own folder while it
     * compiles, and that folder may be a Python wheel's (docs/packaging.md) */
    lib_dirs d;
    d.n = 0;
    dl_iterate_phdr(lib_dir_of, &d);
    for (size_t i = 0; i < d.n; i++)
        if (ll_allow(b, d.dirs[i], FS_READ, 0) != 0)
            return -1;
    if (!spec->allow_gpu)
        return 0;
    for (size_t i = 0; i < sizeof gpu_grants / sizeof gpu_grants[0]; i++) {
        uint64_t rights = gpu_rights(spec, &gpu_grants[i]);
        if (rights && ll_allow(b, gpu_grants[i].path, rights, gpu_grants[i].pin) != 0)
            return -1;
    }
    return gpu_device_grants(b);
}

/* Landlock: returns 0 when applied or when the kernel has none (status
 * says which), -1 with why when the kernel has it and applying failed. */
int kr__sandbox_apply_landlock(const kr__sandbox_spec *spec, unsigned flags,
                               kr__sandbox_status *st, char *why, size_t why_size)
{
    st->landlock_abi = kr__sandbox_landlock_abi(st->landlock_why, sizeof st->landlock_why);
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
    b.exec = (flags & KR__SANDBOX_ALLOW_EXEC) ? FS_EXECUTE : 0;
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
