/* kr_sandbox_enter: the workers' sandbox (sandbox/sandbox.h) for a caller's
 * own process, from a JSON spec: what a ModelNew worker (Python host code
 * of a candidate) applies to itself. The spec is checked whole before
 * anything is applied, so a typo never leaves a half-sandboxed process. */
#include "kreward/sys/sandbox.h"
#include "sandbox/sandbox.h"
#include "common/symver.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char **read;
    size_t num_read;
    const char **write;
    size_t num_write;
    int exec, gpu;
    unsigned gpu_without; /* KR__GPU_WITHOUT_*: "gpu_shm": false, "gpu_task_read": false */
    uint64_t limits[4]; /* address_space_bytes, cpu_seconds, open_files, file_bytes */
} enter_spec;

static const char *const limit_keys[4] = {"address_space_bytes", "cpu_seconds", "open_files",
                                          "file_bytes"};

static int fail(char **why, int rc, const char *fmt, ...)
{
    if (why) {
        char buf[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        *why = strdup(buf);
    }
    return rc;
}

/* The array of absolute paths under key into *out (pointers into the JSON,
 * which outlives the call's use of them). */
static int paths_of(json_t *root, const char *key, const char ***out, size_t *n, char **why)
{
    json_t *a = json_object_get(root, key);
    *out = NULL;
    *n = 0;
    if (!a)
        return KR_OK;
    if (!json_is_array(a))
        return fail(why, KR_EINVAL, "sandbox spec: \"%s\" must be an array of paths", key);
    size_t count = json_array_size(a);
    if (count == 0)
        return KR_OK;
    const char **paths = calloc(count, sizeof *paths);
    if (!paths)
        return fail(why, KR_ENOMEM, "out of memory");
    for (size_t i = 0; i < count; i++) {
        const char *p = json_string_value(json_array_get(a, i));
        /* relative paths would depend on the working directory at the time */
        if (!p || p[0] != '/') {
            free(paths);
            return fail(why, KR_EINVAL, "sandbox spec: \"%s\"[%zu] is not an absolute path", key,
                        i);
        }
        paths[i] = p;
    }
    *out = paths;
    *n = count;
    return KR_OK;
}

static int flag_of(json_t *root, const char *key, int *out, char **why)
{
    json_t *v = json_object_get(root, key);
    *out = 0;
    if (!v)
        return KR_OK;
    if (!json_is_boolean(v))
        return fail(why, KR_EINVAL, "sandbox spec: \"%s\" must be true or false", key);
    *out = json_is_true(v);
    return KR_OK;
}

static int parse_spec(json_t *root, enter_spec *s, char **why)
{
    if (!json_is_object(root))
        return fail(why, KR_EINVAL, "sandbox spec: not a JSON object");
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        static const char *const known[] = {"read", "write", "exec", "gpu", "gpu_shm",
                                            "gpu_task_read", "address_space_bytes",
                                            "cpu_seconds", "open_files", "file_bytes"};
        int ok = 0;
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            ok |= strcmp(key, known[i]) == 0;
        /* a misspelt grant or limit must not pass for a sandbox without it */
        if (!ok)
            return fail(why, KR_EINVAL, "sandbox spec: unknown key \"%s\"", key);
    }
    int rc;
    if ((rc = flag_of(root, "exec", &s->exec, why)) != KR_OK ||
        (rc = flag_of(root, "gpu", &s->gpu, why)) != KR_OK)
        return rc;
    /* true unless said: each false leaves a grant of "gpu" out */
    static const struct {
        const char *key;
        unsigned bit;
    } narrowing[] = {{"gpu_shm", KR__GPU_WITHOUT_SHM}, {"gpu_task_read", KR__GPU_WITHOUT_TASK_READ}};
    for (size_t i = 0; i < sizeof narrowing / sizeof narrowing[0]; i++) {
        json_t *flag = json_object_get(root, narrowing[i].key);
        if (flag && !json_is_boolean(flag))
            return fail(why, KR_EINVAL, "sandbox spec: \"%s\" must be true or false",
                        narrowing[i].key);
        if (flag && json_is_false(flag))
            s->gpu_without |= narrowing[i].bit;
    }
    for (size_t i = 0; i < sizeof limit_keys / sizeof limit_keys[0]; i++) {
        json_t *l = json_object_get(root, limit_keys[i]);
        if (l && (!json_is_integer(l) || json_integer_value(l) < 0))
            return fail(why, KR_EINVAL, "sandbox spec: \"%s\" must be an integer >= 0",
                        limit_keys[i]);
        s->limits[i] = l ? (uint64_t)json_integer_value(l) : 0;
    }
    if ((rc = paths_of(root, "read", &s->read, &s->num_read, why)) != KR_OK)
        return rc;
    return paths_of(root, "write", &s->write, &s->num_write, why);
}

static char *status_text(const kr__sandbox_status *st, int exec)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "no_new_privs", json_boolean(st->no_new_privs));
    json_object_set_new(o, "landlock", json_boolean(st->landlock));
    json_object_set_new(o, "landlock_abi", json_integer(st->landlock_abi));
    json_object_set_new(o, "landlock_why", json_string(st->landlock_why));
    json_object_set_new(o, "seccomp", json_boolean(st->seccomp));
    json_object_set_new(o, "seccomp_why", json_string(st->seccomp_why));
    json_object_set_new(o, "rlimits", json_boolean(st->rlimits));
    json_object_set_new(o, "exec", json_boolean(exec));
    json_object_set_new(o, "network", json_false());
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return text;
}

int kr_sandbox_enter(const char *spec_json, char **status_json, char **why)
{
    if (status_json)
        *status_json = NULL;
    if (why)
        *why = NULL;
    if (!spec_json)
        return fail(why, KR_EINVAL, "no sandbox spec");
    json_error_t err;
    json_t *root = json_loads(spec_json, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return fail(why, KR_EPARSE, "sandbox spec, line %d column %d: %s", err.line,
                    err.column, err.text);
    enter_spec s;
    memset(&s, 0, sizeof s);
    int rc = parse_spec(root, &s, why);
    if (rc == KR_OK) {
        kr__sandbox_spec spec = {s.read,       s.num_read,   s.write,      s.num_write, s.limits[0],
                                 s.limits[1], s.limits[2], s.gpu,        s.limits[3],
                                 s.gpu_without};
        kr__sandbox_status st;
        char reason[256];
        int applied = kr__sandbox_apply_flags(&spec, s.exec ? KR__SANDBOX_ALLOW_EXEC : 0u, &st,
                                              reason, sizeof reason);
        if (applied != 0)
            rc = fail(why, KR_EUNSUPPORTED, "%s", reason);
        if (status_json && !(*status_json = status_text(&st, s.exec)) && rc == KR_OK)
            rc = fail(why, KR_ENOMEM, "out of memory");
    }
    free(s.read);
    free(s.write);
    json_decref(root);
    return rc;
}

/* Released in node KREWARD_1.0 (libkreward 0.3.0), now KREWARD_SYS_1. */
KR__SYMVER_COMPAT(kr_sandbox_enter, kr__sandbox_enter_v1_0, "KREWARD_1.0", "KREWARD_SYS_1");
