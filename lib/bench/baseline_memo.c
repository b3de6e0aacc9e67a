/* The baseline memo's bookkeeping (baseline_memo.h says why it exists). */
#include "bench/baseline_memo.h"
#include "common/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the fresh median's allowed distance from the memo's: 3 x the memo's
 * spread, but never under 3 % (noise) nor over 5 % (a different GPU state:
 * what one candidate's run left, a warm GPU, would otherwise shift the next
 * candidates' speedups by up to the ceiling) */
#define AGREE_FLOOR 0.03
#define AGREE_CEILING 0.05

static kr__memo_entry *find(kr__memo_table *t, uint64_t key)
{
    for (size_t i = 0; i < KR__MEMO_KEYS; i++)
        if (t->e[i].key == key)
            return &t->e[i];
    return NULL;
}

int kr__memo_get(const kr__memo_table *t, uint64_t key, double now, kr__memo_view *out)
{
    memset(out, 0, sizeof *out);
    const kr__memo_entry *e = find((kr__memo_table *)t, key);
    if (!key || !e || now - e->at > KR__MEMO_MAX_AGE_S || !e->n_event || !e->n_time)
        return 0;
    out->n_event = e->n_event;
    out->n_time = e->n_time;
    out->cupti = e->cupti;
    out->age_s = now - e->at;
    out->quick = e->quick;
    memcpy(out->event_us, e->event_us, e->n_event * sizeof(double));
    memcpy(out->time_us, e->time_us, e->n_time * sizeof(double));
    return 1;
}

static void ring_push(double *ring, size_t *n, size_t *head, double v)
{
    ring[*head] = v;
    *head = (*head + 1) % KR__MEMO_SAMPLES;
    if (*n < KR__MEMO_SAMPLES)
        (*n)++;
}

void kr__memo_add(kr__memo_table *t, uint64_t key, double now, const double *event_us,
                  size_t n_event, const double *time_us, size_t n_time, int cupti)
{
    if (!key || (!n_event && !n_time))
        return;
    kr__memo_entry *e = find(t, key);
    if (!e || now - e->at > KR__MEMO_MAX_AGE_S) {
        if (!e) { /* an unused slot, else the least recently added to */
            e = &t->e[0];
            for (size_t i = 1; i < KR__MEMO_KEYS && e->key; i++)
                if (!t->e[i].key || t->e[i].at < e->at)
                    e = &t->e[i];
        }
        memset(e, 0, sizeof *e);
        e->key = key;
        e->cupti = cupti;
    }
    if (e->cupti != cupti) { /* one source of times per memo */
        e->n_time = e->head_time = 0;
        e->cupti = cupti;
    }
    for (size_t i = 0; i < n_event; i++)
        ring_push(e->event_us, &e->n_event, &e->head_event, event_us[i]);
    for (size_t i = 0; i < n_time; i++)
        ring_push(e->time_us, &e->n_time, &e->head_time, time_us[i]);
    e->at = now;
    e->quick = n_event < KR__MEMO_FRESH ? e->quick + 1 : 0;
}

size_t kr__memo_fresh_needed(const kr__memo_view *m)
{
    return m->age_s < KR__MEMO_YOUNG_S && m->quick < KR__MEMO_QUICK_MAX ? KR__MEMO_FRESH_YOUNG
                                                                       : KR__MEMO_FRESH;
}

void kr__memo_forget(kr__memo_table *t, uint64_t key)
{
    kr__memo_entry *e = find(t, key);
    if (e)
        memset(e, 0, sizeof *e);
}

int kr__memo_agrees(const kr__memo_view *m, const double *fresh_us, size_t n)
{
    if (!n || !m->n_event)
        return 0;
    double a[KR__MEMO_SAMPLES], *f = malloc(n * sizeof *f);
    if (!f)
        return 0;
    memcpy(a, m->event_us, m->n_event * sizeof(double));
    memcpy(f, fresh_us, n * sizeof *f);
    kr__summary sm, sf;
    kr__summarize(a, m->n_event, &sm);
    kr__summarize(f, n, &sf);
    free(f);
    double tol = fmin(fmax(3 * sm.noise, AGREE_FLOOR), AGREE_CEILING);
    return sm.median > 0 && fabs(sf.median / sm.median - 1) <= tol;
}
