/* What a candidate's code says about it, decided at the compile stage
 * (no GPU; in a compile worker and in-process alike): its size, measured on
 * the compiled program, and whether it is the reference (reference_copy),
 * judged on its source and then on its compiled kernels. */
#ifndef KR_JUDGE_CODE_H
#define KR_JUDGE_CODE_H

#include "compile/ptx_code.h"
#include "kreward/plan.h"
#include "kreward/problem.h"
#include "kreward/program.h"
#include "kreward/report.h"

/* PTX instructions per line of code, for the report's code_lines: the
 * bundled candidates compile to 14.5 instructions per line of their source
 * (all 39 pooled; with the references 14.8; per file the median is 10 and
 * the range 3.8 to 36.9: math functions and unrolled loops are many
 * instructions a line), so a reward's allowance in lines (makora: 100) keeps
 * its meaning for code written the way they are (docs/rewards.md). */
#define KR__PTX_INSTRUCTIONS_PER_LINE 15

/* The source's own size, as feedback (source_lines, code_tokens: counted
 * on tokens, docs/report-format.md); code_lines comes from the compiled
 * program (kr__judge_size). */
void kr__judge_source_size(kr_report *r, const char *source, size_t len);

/* code_lines and ptx_instructions from prog's code (code, read from its
 * PTX: inline asm included, so layout cannot move them). PTX the reader
 * could not follow (code NULL) is measured by its statements, never fewer
 * than its instructions; without PTX (a CUBIN from elsewhere) a source's
 * own count (source_lines) stands in, and a binary gets no size. */
void kr__judge_size(kr_report *r, const kr_program *prog, const kr__ptx_code *code);

/* reference_copy when the source is the reference's, comments, layout,
 * names and #include lines aside (the cheap check: no compile). */
void kr__judge_source_copy(const kr_problem *p, const char *source, size_t len, kr_report *r);

/* reference_copy when every kernel the plan launches is a near-copy of one
 * of the reference's kernels, compiled with the candidate's options
 * (ptx_code.h: kr__ptx_near_copy). code is prog's (NULL: nothing to judge).
 * The reference's code is read once per problem and options, then kept in
 * the context's memory cache. Nothing is set when the reference is not CUDA
 * source, has no PTX, or does not compile under those options; the
 * context's error is left clear. */
void kr__judge_compiled_copy(kr_context *ctx, const kr_problem *p, const kr_program *prog,
                             const kr__ptx_code *code, const kr_plan *plan,
                             const kr_compile_options *options, kr_report *r);

#endif
