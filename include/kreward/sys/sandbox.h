/* libkreward: the workers' sandbox for the calling process. A process that
 * runs untrusted host code itself (a ModelNew candidate's Python, a plugin
 * host) puts itself in the same sandbox a kreward-worker uses
 * (docs/sandbox.md): no new privileges, not dumpable, no core file,
 * Landlock (only the paths given, plus what the loader and, with "gpu",
 * CUDA need) and a seccomp filter (no network socket, no ptrace, mount,
 * namespaces, bpf, io_uring; no exec unless allowed). It cannot be undone.
 *
 * An extension call: made for one consumer, not part of the stable API that
 * kreward/kreward.h includes; include <kreward/sys/sandbox.h> yourself. Its
 * symbol has the version node KREWARD_SYS_1 of libkreward.sym (a change to
 * it comes with a new node, never under the old one). */
#ifndef KREWARD_SYS_SANDBOX_H
#define KREWARD_SYS_SANDBOX_H

#include "../common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sandboxes the calling process. spec_json, every key optional:
 *   {"read": ["/abs/path", ...],   readable trees (files or folders)
 *    "write": ["/abs/path", ...],  readable and writable trees
 *    "exec": false,                true: programs under the read trees may
 *                                  be started (they inherit the sandbox);
 *                                  never those under the write trees
 *    "gpu": false,                 the NVIDIA device files, /proc/self's
 *                                  files CUDA reads, /sys topology
 *    "gpu_shm": true,              with "gpu": /dev/shm (POSIX shared
 *                                  memory, the same user's included);
 *                                  false leaves it out
 *    "gpu_task_read": true,        with "gpu": /proc/self/task's files
 *                                  readable as well as writable (the
 *                                  driver names its threads there); false:
 *                                  written only, so task/<tid>/net/ (the
 *                                  namespace's sockets) stays closed
 *    "address_space_bytes": 0, "cpu_seconds": 0, "open_files": 0,
 *    "file_bytes": 0}              limits, 0: none (cpu counted from now;
 *                                  a write past file_bytes ends the
 *                                  process with SIGXFSZ)
 * The network is always refused. An unknown key or a relative path is
 * KR_EINVAL, malformed JSON KR_EPARSE (nothing applied then).
 * Calling again stacks another layer: it can only narrow (enter with
 * "exec": true to compile, then again without to run).
 * Landlock covers the calling thread and the threads it starts later, not
 * threads that already run (the status says how many); enter before
 * starting threads where possible. seccomp covers every thread.
 * status_json (may be NULL; caller frees): what was applied,
 * {"no_new_privs", "landlock", "landlock_abi", "landlock_why", "seccomp",
 * "seccomp_why", "rlimits", "exec", "network": false}; a layer the kernel
 * lacks is false with its why, not an error. KR_EUNSUPPORTED with why
 * (may be NULL; caller frees) when a layer the kernel offers failed to
 * apply: the process may be partly sandboxed and should not go on to run
 * untrusted code. */
KR_API int kr_sandbox_enter(const char *spec_json, char **status_json, char **why);

/* The isolation filter for a process that runs untrusted host code (a
 * ModelNew worker), entered with or without the sandbox above: a seccomp
 * filter over every thread, inherited by everything started later, under
 * which the process may signal, re-prioritise (setpriority, ioprio_set),
 * re-pin (sched_setaffinity and the scheduler calls), move the pages of,
 * or set a limit of itself only (pid 0 or its own), and never another
 * process: no pidfd_send_signal, process_madvise, process_mrelease, ptrace,
 * process_vm_readv/writev, pidfd_getfd. It cannot be undone.
 * status_json (may be NULL; caller frees): {"applied": true} (with
 * "unknown": names this libseccomp does not know, not refused), or
 * {"applied": false, "why": ...} where the kernel has no seccomp (not an
 * error). KR_EUNSUPPORTED with why (may be NULL; caller frees) when the
 * kernel has it and the filter failed to load. */
KR_API int kr_sandbox_isolate(char **status_json, char **why);

#ifdef __cplusplus
}
#endif
#endif
