/* Filtering NVRTC's log. Its diagnostics look like
 *
 *   FILE(LINE): KIND: message            <- column 0
 *     echoed source line                 <- indented
 *     ^
 *             detected during ... at line 4 of candidate.cu
 *   (blank line)
 *
 * followed by summary lines at column 0 ("1 error detected in the
 * compilation of ..."). A diagnostic in another file is replaced by one
 * line naming the file, the line and where in the candidate it was reached
 * from; everything indented under it is dropped until the next line at
 * column 0. */
#include "compile/log_filter.h"
#include "common/strbuf.h"

#include <stdio.h>
#include <string.h>

static const char *const kinds[] = {"catastrophic error", "internal error", "fatal error",
                                    "error",              "warning",        "remark",
                                    "note"};

/* A diagnostic's first line: sets the file's length, where LINE starts and
 * the kind. */
static int diagnostic_start(const char *line, size_t n, size_t *file_len, const char **kind)
{
    if (n == 0 || line[0] == ' ' || line[0] == '\t')
        return 0;
    for (size_t i = 1; i < n; i++) {
        if (line[i] != '(')
            continue;
        size_t j = i + 1;
        while (j < n && line[j] >= '0' && line[j] <= '9')
            j++;
        if (j == i + 1 || j + 3 > n || memcmp(line + j, "): ", 3) != 0)
            continue;
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            size_t kl = strlen(kinds[k]);
            if (j + 3 + kl <= n && memcmp(line + j + 3, kinds[k], kl) == 0 &&
                (line[j + 3 + kl] == ':' || line[j + 3 + kl] == ' ')) {
                *file_len = i;
                *kind = kinds[k];
                return 1;
            }
        }
    }
    return 0;
}

/* "at line N of OWN" in a line under a withheld diagnostic: N, else 0. */
static unsigned reached_from(const char *line, size_t n, const char *own)
{
    size_t ol = strlen(own);
    for (const char *p = line; p + 8 < line + n && (p = memchr(p, 'a', (size_t)(line + n - p)));
         p++) {
        unsigned no;
        int used = 0;
        if (sscanf(p, "at line %u of %n", &no, &used) == 1 && used > 0 &&
            p + used + ol <= line + n && memcmp(p + used, own, ol) == 0)
            return no;
    }
    return 0;
}

typedef struct {
    kr__buf *out;
    const char *own;
    int active;            /* a withheld diagnostic is open */
    char head[600];        /* its replacement, without the "reached from" part */
    unsigned reached;
} withheld_block;

static void close_block(withheld_block *w)
{
    if (!w->active)
        return;
    kr__buf_puts(w->out, w->head);
    if (w->reached)
        kr__buf_printf(w->out, "; reached from %s line %u", w->own, w->reached);
    kr__buf_puts(w->out, "]\n\n");
    w->active = 0;
}

char *kr__log_filter(const char *log, const char *own, size_t *withheld)
{
    kr__buf out = KR__BUF_INIT;
    withheld_block w = {&out, own, 0, "", 0};
    size_t count = 0, own_len = strlen(own);
    for (const char *line = log; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        size_t file_len;
        const char *kind;
        if (diagnostic_start(line, n, &file_len, &kind)) {
            close_block(&w);
            if (file_len == own_len && memcmp(line, own, own_len) == 0) {
                kr__buf_append(&out, line, n);
                kr__buf_puts(&out, "\n");
            } else {
                const char *lineno = line + file_len + 1;
                snprintf(w.head, sizeof w.head,
                         "%.*s(%.*s): %s: [withheld by libkreward: a diagnostic in a header the "
                         "candidate did not write",
                         (int)file_len, line, (int)strcspn(lineno, ")"), lineno, kind);
                w.active = 1;
                w.reached = 0;
                count++;
            }
        } else if (w.active && (n == 0 || line[0] == ' ' || line[0] == '\t')) {
            unsigned r = reached_from(line, n, own);
            if (r && !w.reached)
                w.reached = r;
        } else {
            close_block(&w);
            kr__buf_append(&out, line, n);
            kr__buf_puts(&out, "\n");
        }
        line = end ? end + 1 : NULL;
    }
    close_block(&w);
    if (withheld)
        *withheld = count;
    return kr__buf_take(&out);
}
