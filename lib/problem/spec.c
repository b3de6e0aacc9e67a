/* Helpers of the problem parser: errors with file:line:col, closed sets of
 * fields, integer expressions over the problem's dims. */
#include "problem/spec.h"
#include "common/json_locate.h"
#include "common/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int vfail(kr__spec *sp, int code, const char *path, const char *fmt, va_list ap)
{
    char msg[700];
    vsnprintf(msg, sizeof msg, fmt, ap);
    int line = 0, col = 0;
    kr__json_locate(sp->text, sp->len, path ? path : "", &line, &col);
    if (path && *path)
        return kr__fail(sp->ctx, code, "%s:%d:%d: %s: %s", sp->file, line, col, path, msg);
    return kr__fail(sp->ctx, code, "%s:%d:%d: %s", sp->file, line, col, msg);
}

int kr__spec_fail(kr__spec *sp, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vfail(sp, KR_EPARSE, path, fmt, ap);
    va_end(ap);
    return rc;
}

int kr__spec_fail_code(kr__spec *sp, int code, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vfail(sp, code, path, fmt, ap);
    va_end(ap);
    return rc;
}

int kr__spec_only_keys(kr__spec *sp, json_t *obj, const char *path, const char *const *allowed)
{
    const char *key;
    json_t *value;
    json_object_foreach(obj, key, value) {
        int known = 0;
        for (size_t i = 0; allowed[i] && !known; i++)
            known = strcmp(key, allowed[i]) == 0;
        if (!known) {
            kr__buf list = KR__BUF_INIT;
            for (size_t i = 0; allowed[i]; i++)
                kr__buf_printf(&list, "%s%s", i ? ", " : "", allowed[i]);
            char sub[512];
            snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", key);
            int rc = kr__spec_fail(sp, sub, "unknown field '%s' (known: %s)", key,
                                   list.data ? list.data : "");
            kr__buf_free(&list);
            return rc;
        }
    }
    return KR_OK;
}

int kr__spec_expr(kr__spec *sp, json_t *v, const char *path, kr__expr **out)
{
    char text[64];
    const char *src;
    if (json_is_integer(v)) {
        snprintf(text, sizeof text, "%lld", (long long)json_integer_value(v));
        src = text;
    } else if (json_is_string(v)) {
        src = json_string_value(v);
    } else {
        return kr__spec_fail(sp, path, "expected an integer expression (a string such as "
                             "\"cdiv(N, 256)\" or an integer)");
    }
    char why[600];
    *out = kr__expr_parse(src, (const char *const *)sp->problem->dims, sp->problem->num_dims,
                          why, sizeof why);
    if (!*out)
        return kr__spec_fail(sp, path, "in \"%s\": %s", src, why);
    return KR_OK;
}
