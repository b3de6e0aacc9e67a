/* Versioned public structs (options, baselines): every entry point reads
 * them through these helpers, so a caller built against an older header,
 * whose struct is shorter, is read only as far as its version reaches; the
 * fields it does not know take their defaults.
 *
 * Each struct keeps a table of its size per version, built with KR__UPTO
 * (the end of the last field a version had), e.g.
 *   static const size_t sizes[] = {0, KR__UPTO(kr_x_options, flags),
 *                                  KR__UPTO(kr_x_options, new_field)};
 * so that index v is the prefix a version-v caller passes. */
#ifndef KR_OPTIONS_H
#define KR_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#define KR__UPTO(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

typedef struct kr__versioned {
    const char *name;      /* "kr_verify_options", for messages */
    const size_t *sizes;   /* sizes[v]: bytes a version-v caller passes; sizes[0] unused */
    uint32_t current;      /* this library's version of the struct */
    size_t size;           /* sizeof the struct in this library */
} kr__versioned;

/* Copies *src (may be NULL: defaults only) into dst, which starts as a copy
 * of defaults: only the prefix that src's version had. dst->version ends as
 * the current version. KR_EVERSION (with why filled) for a version of 0 or
 * one newer than the library. */
int kr__options_read(const kr__versioned *v, void *dst, const void *defaults, const void *src,
                     char *why, size_t why_size);

/* The _init() of a versioned struct: writes the defaults of the fields that
 * existed in `version` (never more bytes than such a caller's struct has)
 * and sets its version field. KR_EINVAL for NULL, KR_EVERSION when newer. */
int kr__options_init(const kr__versioned *v, void *dst, const void *defaults, uint32_t version);

/* Whether the environment turns a mechanism off for a measurement: the
 * variable `name` is "0" (KR_POOL_AHEAD=0, KR_BENCH_PAIR=0, ...). */
int kr__knob_off(const char *name);

#endif
