/* kr_pool_sandbox_json: what the workers' sandbox can use on this machine,
 * for `kreward info` and callers that must say so before starting a pool
 * (a kernel without Landlock or seccomp runs workers with the rest). */
#include "kreward/pool.h"
#include "sandbox/sandbox.h"
#include "sandbox/sandbox_impl.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

int kr_pool_sandbox_json(char **json_out)
{
    if (!json_out)
        return KR_EINVAL;
    *json_out = NULL;
    kr__sandbox_status st;
    kr__sandbox_probe(&st);
    int seccomp = kr__sandbox_seccomp_available(st.seccomp_why, sizeof st.seccomp_why);
    json_t *o = json_object();
    if (!o)
        return KR_ENOMEM;
    json_object_set_new(o, "landlock", json_boolean(st.landlock_abi > 0));
    json_object_set_new(o, "landlock_abi", json_integer(st.landlock_abi));
    json_object_set_new(o, "landlock_why", json_string(st.landlock_abi > 0 ? "" : st.landlock_why));
    json_object_set_new(o, "seccomp", json_boolean(seccomp));
    json_object_set_new(o, "seccomp_why", json_string(seccomp ? "" : st.seccomp_why));
    char *text = json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    if (!text)
        return KR_ENOMEM;
    *json_out = text;
    return KR_OK;
}
