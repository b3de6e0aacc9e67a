/* Where the GPU idles while the engine's host works, in profile mode: each
 * wait's call site (its `what` text), how often it waited, how long, and
 * the host's own time before it (since the wait before ended). With ~70
 * waits a candidate and the GPU's work serialised behind the host's, the
 * host time between waits is GPU idle time (issue 34): this names the code
 * path it belongs to. Sites are kept in first-seen order, so an index
 * stays the same site for the engine's life (an evaluation's share is a
 * difference of two copies). */
#ifndef KR_WAIT_SITES_H
#define KR_WAIT_SITES_H

#include <stddef.h>

#define KR__WAIT_SITES 24

typedef struct {
    const char *what;      /* the wait's text: one string literal per call site */
    double n, wait_s, host_s;
} kr__wait_site;

typedef struct kr__wait_sites {
    int on;                /* profile mode */
    double last_end;       /* when the last wait ended (or the evaluation began) */
    size_t num;
    kr__wait_site site[KR__WAIT_SITES];
} kr__wait_sites;

/* A wait at `what` from t0 to t1 (kr__now seconds); sites past the table's
 * room share its last slot. */
void kr__wait_sites_note(kr__wait_sites *w, const char *what, double t0, double t1);

/* `what` as a report key's part: lower case, [a-z0-9_], at most size-1. */
void kr__wait_site_slug(const char *what, char *out, size_t size);

#endif
