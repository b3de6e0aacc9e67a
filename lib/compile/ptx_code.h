/* The code of a PTX program, read from its text without a device: how many
 * instructions it has (its size, which layout cannot change: inline asm is
 * in the PTX as compiled), and each kernel's instructions as shapes, for
 * telling a near-copy of another program's kernel from a kernel of its own.
 *
 * A shape is an instruction with its register numbers and every name left
 * out: the opcode with its types, the predicate guard, and the operands as
 * register classes (%r, %rd, %f, ...), special registers (%tid.x),
 * directive words (.b8), constants, memory offsets and the kernel's
 * parameters by position; the first two sources of a commutative operation
 * in one order. Shapes are
 * kept as a multiset (sorted 64-bit hashes), so instruction order, register
 * allocation, names, comments, debug lines and layout do not move it. */
#ifndef KR_PTX_CODE_H
#define KR_PTX_CODE_H

#include <stddef.h>
#include <stdint.h>

typedef struct kr__ptx_kernel {
    char *name;              /* the .entry name */
    size_t instructions;     /* its own and those of the functions it calls */
    size_t num_shapes;       /* instructions and local declarations */
    uint64_t *shapes;        /* sorted */
    size_t num_fixed;        /* the shapes that fix what it computes: memory,
                              * floating-point, synchronisation and control
                              * transfer out of the kernel, and any with a
                              * constant or a special register (%tid.x) */
    uint64_t *fixed;         /* sorted */
} kr__ptx_kernel;

typedef struct kr__ptx_code {
    size_t instructions;     /* in every function body of the module, inline asm included */
    size_t num_kernels;
    kr__ptx_kernel *kernels;
} kr__ptx_code;

/* Reads the PTX text (len bytes). 0, or -1 with a reason (out of memory, or
 * text that is not PTX the reader understands); *out is then empty. */
int kr__ptx_code_read(const char *ptx, size_t len, kr__ptx_code *out, char *why, size_t why_size);
void kr__ptx_code_free(kr__ptx_code *c);
/* Statements of the PTX text (its `;` outside comments): at least its
 * instructions, whatever the reader makes of it; the size of PTX the
 * reader cannot follow, so that such PTX never measures smaller. */
size_t kr__ptx_statement_count(const char *ptx, size_t len);

/* The kernel named name (a .entry), or NULL. */
const kr__ptx_kernel *kr__ptx_code_kernel(const kr__ptx_code *c, const char *name);

/* The share of a's and b's instructions they have in common: the size of
 * the intersection of their shape multisets over the larger; 1 for two
 * empty kernels. */
double kr__ptx_similarity(const kr__ptx_kernel *a, const kr__ptx_kernel *b);

/* A near-copy: 1 when k holds every fixed shape of ref (it reads, writes and
 * computes at least what ref does, with ref's constants) and the two have
 * at least KR__PTX_NEAR_COPY of their instructions in common; else 0. */
#define KR__PTX_NEAR_COPY 0.9
int kr__ptx_near_copy(const kr__ptx_kernel *k, const kr__ptx_kernel *ref);

/* A copy of PTX text with comments blanked (strings kept: a `//` inside a
 * .file path is not a comment) and NUL bytes made spaces; NULL when out of
 * memory. Both PTX readers (ptx.c, ptx_code.c) scan this. */
char *kr__ptx_blank_comments(const char *text, size_t len);

#endif
