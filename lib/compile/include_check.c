/* The include policy on the candidate's own text (docs/compile-safety.md):
 * checked before the compile cache is consulted, so that no cached program
 * bypasses it. */
#include "compile/include_impl.h"
#include "driver/context_impl.h"

#include <stdio.h>
#include <string.h>

const char *kr__include_violation(long r)
{
    switch (r) {
    case R_ABSOLUTE: return "absolute paths are refused";
    case R_DOTDOT: return "'..' in an include name is refused";
    case R_CHARS: return "the name has characters outside [A-Za-z0-9_.+-/]";
    case R_ESCAPE: return "the name leads out of the header's directory";
    case R_OUTSIDE: return "it resolves outside the allowed directories (through a symbolic link)";
    case R_NOTREG: return "it is not a regular file";
    case R_TOOBIG: return "the header is larger than 8 MiB";
    case R_NUL: return "the header contains a NUL byte";
    case R_LIMIT: return "the includes reach more than 4096 headers or 96 MiB";
    case R_UNREADABLE: return "it cannot be read";
    default: return "refused";
    }
}

static int is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.' || c == '+' || c == '-' || c == '/';
}

/* Policy on the name itself. */
long kr__include_name_check(const char *name, int from)
{
    if (name[0] == '/')
        return R_ABSOLUTE;
    size_t n = strlen(name);
    if (n == 0 || n > KR__MAX_INCLUDE_NAME)
        return R_CHARS;
    for (size_t i = 0; i < n; i++)
        if (!is_name_char(name[i]))
            return R_CHARS;
    if (from == FROM_CANDIDATE) {
        for (const char *p = name; (p = strstr(p, "..")) != NULL; p += 2)
            if ((p == name || p[-1] == '/') && (p[2] == '/' || p[2] == '\0'))
                return R_DOTDOT;
    }
    return 0;
}

int kr__include_probe_allowed(const char *w)
{
    return !strcmp(w, "__has_include") || !strcmp(w, "_CCCL_HAS_INCLUDE");
}

static int pragma_names_files(const char *w)
{
    static const char *const words[] = {"include", "pch", "hdrstop", "dependency", "file",
                                        "import", "embed", "directory"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strstr(w, words[i]))
            return 1;
    return 0;
}

static void cut_log(kr__buf *log, uint64_t max)
{
    if (log->len > max && max > 0) {
        size_t was = log->len;
        log->len = (size_t)max;
        log->data[log->len] = '\0';
        kr__buf_printf(log, "\n[log cut: %llu of %zu bytes shown]\n", (unsigned long long)max, was);
    }
}

int kr__include_refuse(kr_context *ctx, const char *name, kr__buf *log, int errors, uint64_t max)
{
    if (log->oom)
        return kr__fail(ctx, KR_ENOMEM, "out of memory");
    char first[600];
    const char *nl = strchr(log->data, '\n');
    snprintf(first, sizeof first, "%.*s", nl ? (int)(nl - log->data) : (int)log->len, log->data);
    kr__buf_printf(log, "%d include policy error%s: the source was not compiled "
                   "(docs/compile-safety.md)\n", errors, errors == 1 ? "" : "s");
    cut_log(log, max);
    return kr__fail_detail(ctx, KR_ECOMPILE, log->data,
                           "%s: compilation refused by the include policy (%d error%s); %s", name,
                           errors, errors == 1 ? "" : "s", first);
}

int kr__include_check(kr_context *ctx, const char *name, const char *src, size_t len,
                      const kr__pp_scan *scan, uint64_t max_log)
{
    kr__buf log = KR__BUF_INIT;
    int errors = 0;
#define REFUSE(line, ...)                                                        \
    do {                                                                         \
        kr__buf_printf(&log, "%s(%u): error: include policy: ", name, (line));   \
        kr__buf_printf(&log, __VA_ARGS__);                                       \
        kr__buf_puts(&log, "\n");                                                \
        errors++;                                                                \
    } while (0)
    for (size_t i = 0; i < scan->count; i++) {
        const kr__pp_item *it = &scan->items[i];
        switch (it->kind) {
        case KR__PP_INCLUDE:
            if (strcmp(it->word, "include") != 0)
                REFUSE(it->line, "#%s is refused: only #include is accepted", it->word);
            else if (!it->name)
                REFUSE(it->line, "#include of a macro or other computed name is refused: write "
                       "the header name itself, <name> or \"name\"");
            else if (it->in_parens)
                REFUSE(it->line, "#include %c%s%c inside parentheses (a macro's arguments) is "
                       "refused", it->delim, it->name, it->delim == '<' ? '>' : '"');
            else if (kr__include_name_check(it->name, FROM_CANDIDATE))
                REFUSE(it->line, "#include %c%s%c: %s", it->delim, it->name,
                       it->delim == '<' ? '>' : '"',
                       kr__include_violation(kr__include_name_check(it->name, FROM_CANDIDATE)));
            break;
        case KR__PP_HAS_INCLUDE:
            if (!kr__include_probe_allowed(it->word) &&
                strcmp(it->word, "__has_include_next") != 0 && strcmp(it->word, "__has_embed") != 0)
                break; /* another identifier that merely looks like one */
            if (!kr__include_probe_allowed(it->word))
                REFUSE(it->line, "%s is refused", it->word);
            else if (!it->name)
                REFUSE(it->line, "%s without a plain <name> or \"name\" operand (a macro, an "
                       "alias or a computed name) is refused", it->word);
            else if (kr__include_name_check(it->name, FROM_CANDIDATE))
                REFUSE(it->line, "%s(%c%s%c): %s", it->word, it->delim, it->name,
                       it->delim == '<' ? '>' : '"',
                       kr__include_violation(kr__include_name_check(it->name, FROM_CANDIDATE)));
            break;
        case KR__PP_PRAGMA:
            if (it->word && pragma_names_files(it->word))
                REFUSE(it->line, "#pragma %s is refused: pragmas that name files or steer "
                       "precompiled headers are not accepted", it->word);
            break;
        case KR__PP_LINE:
            if (it->word && strcmp(it->word, name) != 0)
                REFUSE(it->line, "#line naming another file (\"%s\") is refused: it would hide "
                       "this file's diagnostics", it->word);
            break;
        default:
            break;
        }
    }
    if (scan->refused)
        REFUSE(scan->refused_line, "%s is refused", scan->refused_why);
    unsigned abs_line = kr__pp_absolute_anywhere(src, len);
    if (abs_line && !errors)
        REFUSE(abs_line, "an include-like line or probe naming an absolute path is refused, even "
               "where it looks commented out or quoted");
#undef REFUSE
    int rc = errors ? kr__include_refuse(ctx, name, &log, errors, max_log) : KR_OK;
    kr__buf_free(&log);
    return rc;
}
