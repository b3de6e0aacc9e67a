/* Wait sites in profile mode (wait_sites.h). */
#include "run/wait_sites.h"

#include <string.h>

void kr__wait_sites_note(kr__wait_sites *w, const char *what, double t0, double t1)
{
    if (!w->on)
        return;
    size_t i = 0;
    /* the same literal is the same site; a pointer compare first, then the
     * text (a literal may be merged or not across translation units) */
    while (i < w->num && w->site[i].what != what && strcmp(w->site[i].what, what) != 0)
        i++;
    if (i == w->num) {
        if (w->num == KR__WAIT_SITES)
            i = KR__WAIT_SITES - 1;
        else
            w->site[w->num++].what = what;
    }
    kr__wait_site *s = &w->site[i];
    s->n += 1;
    s->wait_s += t1 - t0;
    if (w->last_end > 0 && t0 > w->last_end)
        s->host_s += t0 - w->last_end;
    w->last_end = t1;
}

void kr__wait_site_slug(const char *what, char *out, size_t size)
{
    size_t n = 0;
    int gap = 0;
    for (const char *p = what; *p && n + 1 < size; p++) {
        char c = *p;
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
            if (gap && n)
                out[n++] = '_';
            if (n + 1 < size)
                out[n++] = c;
            gap = 0;
        } else {
            gap = 1;
        }
    }
    if (size)
        out[n < size ? n : size - 1] = '\0';
}
