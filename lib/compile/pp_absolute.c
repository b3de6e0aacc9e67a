/* A second look at a candidate (kr__pp_absolute_anywhere, pp_scan.h) that
 * does not depend on the lexer's view of comments, strings and modes. */
#include "compile/pp_impl.h"

#include <string.h>

static void skip_blank_raw(rd *r)
{
    for (;;) {
        int c = cur(r);
        if (is_hspace(c)) {
            adv(r);
        } else if (c == '/' && ahead(r) == '*') {
            adv(r);
            adv(r);
            while (cur(r) != -1 && !(cur(r) == '*' && ahead(r) == '/'))
                adv(r);
            adv(r);
            adv(r);
        } else {
            return;
        }
    }
}

/* At '<' or '"': whether the name starts with '/'. */
static int absolute_operand(rd *r)
{
    if (cur(r) != '<' && cur(r) != '"')
        return 0;
    adv(r);
    while (is_hspace(cur(r)))
        adv(r);
    return cur(r) == '/';
}

unsigned kr__pp_absolute_anywhere(const char *text, size_t len)
{
    rd r = {text, len, 0, 1};
    splices(&r);
    int bol = 1;
    while (cur(&r) != -1) {
        int c = cur(&r);
        unsigned line = r.line;
        if (c == '\n') {
            bol = 1;
            adv(&r);
            continue;
        }
        if (is_hspace(c)) {
            adv(&r);
            continue;
        }
        int hash = c == '#' || (c == '%' && ahead(&r) == ':') ||
                   (c == '?' && ahead(&r) == '?');
        if (bol && hash) {
            adv(&r);
            while (cur(&r) == ':' || cur(&r) == '?' || cur(&r) == '=')
                adv(&r);
            skip_blank_raw(&r);
            char id[32];
            size_t k = 0;
            while (is_ident(cur(&r))) {
                if (k + 1 < sizeof id)
                    id[k++] = (char)cur(&r);
                adv(&r);
            }
            id[k] = '\0';
            skip_blank_raw(&r);
            if ((strstr(id, "include") || strstr(id, "import") || strstr(id, "embed")) &&
                absolute_operand(&r))
                return line;
            bol = 0;
            continue;
        }
        bol = 0;
        if (is_ident_start(c)) {
            char id[64];
            size_t k = 0;
            while (is_ident(cur(&r))) {
                if (k + 1 < sizeof id)
                    id[k++] = (char)cur(&r);
                adv(&r);
            }
            id[k] = '\0';
            if (strstr(id, "has_include") || strstr(id, "HAS_INCLUDE") || strstr(id, "has_embed")) {
                skip_blank_raw(&r);
                if (cur(&r) == '(') {
                    adv(&r);
                    skip_blank_raw(&r);
                    if (absolute_operand(&r))
                        return line;
                }
            }
            continue;
        }
        adv(&r);
    }
    return 0;
}
