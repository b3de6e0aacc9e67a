/* A program described as JSON (for the command line and the bindings). */
#include "driver/context_impl.h"
#include "compile/program_impl.h"

#include <jansson.h>
#include <stdlib.h>

static json_t *attr_or_null(const kr__kernel *k, int attr)
{
    return k->attrs[attr] >= 0 ? json_integer(k->attrs[attr]) : json_null();
}

static json_t *kernel_json(const kr__kernel *k)
{
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(k->name));
    json_object_set_new(o, "registers", attr_or_null(k, KR_KERNEL_REGISTERS));
    json_object_set_new(o, "shared_static_bytes", attr_or_null(k, KR_KERNEL_SHARED_STATIC));
    json_object_set_new(o, "local_bytes", attr_or_null(k, KR_KERNEL_LOCAL_BYTES));
    json_object_set_new(o, "max_threads_per_block", attr_or_null(k, KR_KERNEL_MAX_THREADS));
    json_object_set_new(o, "const_bytes", attr_or_null(k, KR_KERNEL_CONST_BYTES));
    if (k->params_known) {
        json_t *params = json_array();
        for (uint32_t i = 0; i < k->num_params; i++) {
            json_t *p = json_object();
            json_object_set_new(p, "offset", json_integer(k->param_offset[i]));
            json_object_set_new(p, "size", json_integer(k->param_size[i]));
            json_array_append_new(params, p);
        }
        json_object_set_new(o, "params", params);
    } else {
        json_object_set_new(o, "params", json_null());
    }
    return o;
}

static const char *cache_text(int result)
{
    switch (result) {
    case KR_CACHE_MEMORY:
        return "memory";
    case KR_CACHE_DISK:
        return "disk";
    case KR_CACHE_SKIPPED:
        return "skipped";
    default:
        return "miss";
    }
}

int kr_program_json(char **json_out, const kr_program *prog)
{
    if (!prog || !json_out)
        return KR_EINVAL;
    json_t *o = json_object();
    json_object_set_new(o, "hash", json_string(prog->hash));
    json_object_set_new(o, "arch", json_string(prog->arch));
    json_object_set_new(o, "binary", json_string(prog->kind == KR_BINARY_CUBIN ? "cubin" : "ptx"));
    json_object_set_new(o, "binary_bytes", json_integer((json_int_t)prog->image_len));
    json_object_set_new(o, "compile_seconds", json_real(prog->compile_seconds));
    json_object_set_new(o, "cache", json_string(cache_text(prog->cache_result)));
    json_object_set_new(o, "loaded", json_boolean(prog->module != NULL));
    if (prog->load_why[0])
        json_object_set_new(o, "load_error", json_string(prog->load_why));
    json_t *kernels = json_array();
    for (size_t i = 0; i < prog->num_kernels; i++)
        json_array_append_new(kernels, kernel_json(&prog->kernels[i]));
    json_object_set_new(o, "kernels", kernels);
    json_t *lowered = json_object();
    for (size_t i = 0; i < prog->num_lowered; i++)
        json_object_set_new(lowered, prog->lowered_expr[i], json_string(prog->lowered_name[i]));
    json_object_set_new(o, "name_expressions", lowered);
    json_object_set_new(o, "log", json_string(prog->log ? prog->log : ""));
    *json_out = json_dumps(o, JSON_INDENT(2));
    json_decref(o);
    return *json_out ? KR_OK : KR_ENOMEM;
}
