/* Shared by sandbox.c (the order of the layers, the limits, applying and
 * probing) and the layers it applies: sandbox_landlock.c and
 * sandbox_seccomp.c. */
#ifndef KR_SANDBOX_IMPL_H
#define KR_SANDBOX_IMPL_H

#include "sandbox/sandbox.h"

/* sandbox_landlock.c */
/* The kernel's Landlock ABI, or 0 with why. */
int kr__sandbox_landlock_abi(char *why, size_t why_size);
/* Landlock: 0 when applied or when the kernel has none (status says which),
 * -1 with why when the kernel has it and applying failed. */
int kr__sandbox_apply_landlock(const kr__sandbox_spec *spec, unsigned flags,
                               kr__sandbox_status *st, char *why, size_t why_size);

/* sandbox_seccomp.c */
/* Whether this kernel and libseccomp can load the filter; why not otherwise. */
int kr__sandbox_seccomp_available(char *why, size_t why_size);
/* The seccomp filter: 0 when applied or when the kernel cannot load it
 * (status says which), -1 with why when building or loading it failed. */
int kr__sandbox_apply_seccomp(unsigned flags, kr__sandbox_status *st, char *why,
                              size_t why_size);

#endif
