/* The sandbox a kreward-worker process puts itself in before it touches a
 * candidate: no new privileges, a minimal environment (set by the pool at
 * spawn), core dumps off, resource limits, Landlock (the file system
 * reachable: read the toolkit, driver and library files, read and write
 * the compile cache; nothing else, /etc/passwd and /proc/self/environ
 * included), and a seccomp filter (no exec, no new network sockets, no
 * ptrace, no mount and the like). Each layer is applied where the kernel
 * offers it; what could not be applied is said, never silently skipped. */
#ifndef KR_SANDBOX_H
#define KR_SANDBOX_H

#include <stddef.h>
#include <stdint.h>

typedef struct kr__sandbox_spec {
    const char *const *read_paths;   /* readable trees (files or directories) */
    size_t num_read;
    const char *const *write_paths;  /* readable and writable trees */
    size_t num_write;
    uint64_t address_space_bytes;    /* RLIMIT_AS; 0: unlimited (GPU workers: CUDA maps a lot) */
    uint64_t cpu_seconds;            /* RLIMIT_CPU; 0: unlimited */
    uint64_t open_files;             /* RLIMIT_NOFILE; 0: leave as is */
    int allow_gpu;                   /* the NVIDIA device files and what CUDA needs to use them */
    uint64_t file_bytes;             /* RLIMIT_FSIZE: no file written past it; 0: unlimited */
    unsigned gpu_without;            /* KR__GPU_WITHOUT_*: grants of allow_gpu left out */
} kr__sandbox_spec;

/* Grants a GPU worker may do without, each only narrowing allow_gpu: what
 * CUDA needs of them is measured on a GPU (scripts/sandbox_cuda_probe.py)
 * before a worker's default leaves them out (docs/sandbox.md). */
#define KR__GPU_WITHOUT_SHM 1u        /* no /dev/shm (the same user's shared memory) */
#define KR__GPU_WITHOUT_TASK_READ 2u  /* /proc/self/task written, not read (task/<tid>/net) */

/* What was applied, for `kreward info` and reports. */
typedef struct kr__sandbox_status {
    int no_new_privs;
    int landlock_abi;        /* 0: not available (why in landlock_why) */
    int landlock;            /* applied */
    int seccomp;             /* applied */
    int rlimits;             /* applied */
    char landlock_why[160];
    char seccomp_why[160];
} kr__sandbox_status;

/* Applies the sandbox to the calling process (after which it cannot be
 * undone). Returns 0 when every layer the kernel offers was applied, -1 with
 * why when one it offers failed (the worker then refuses to run candidates).
 * A layer the kernel lacks is recorded in status, not an error. */
int kr__sandbox_apply(const kr__sandbox_spec *spec, kr__sandbox_status *status, char *why,
                      size_t why_size);
/* The same with flags (KR__SANDBOX_*): kr__sandbox_apply is flags 0.
 * Applying again stacks: another Landlock layer and another seccomp
 * filter, each narrowing what the previous allowed; what is already in
 * place (no_new_privs, not dumpable, limits at or below the spec's) is
 * kept, not set again (the first filter refuses setting it). */
#define KR__SANDBOX_ALLOW_EXEC 1u /* programs may be started: no exec refusal in the
                                     filter, Landlock execute on the read trees (never the
                                     write trees); a started program inherits every layer */
int kr__sandbox_apply_flags(const kr__sandbox_spec *spec, unsigned flags,
                            kr__sandbox_status *status, char *why, size_t why_size);
/* What this kernel offers, without applying anything. */
void kr__sandbox_probe(kr__sandbox_status *status);

#endif
