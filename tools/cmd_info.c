/* `kreward info`: what this machine offers (driver, GPUs, NVRTC, CUPTI). */
#include "cli.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

int cmd_info(int argc, char **argv)
{
    cli_parser p;
    cli_parser_init(&p, "kreward info", "", NULL, NULL);
    const char *v;
    for (int c; (c = cli_next(&p, argc, argv, &v)) != CLI_END;) {
        if (c == CLI_HELP) {
            printf("usage: kreward info\n\n"
                   "Prints, as JSON, what libkreward found on this machine: the NVIDIA driver\n"
                   "and its CUDA version, each GPU (name, compute capability, memory, SMs, L2),\n"
                   "NVRTC (version, target architectures), CUPTI, the CUDA headers, the\n"
                   "compile cache, and what the workers' sandbox can use (Landlock,\n"
                   "seccomp); for anything missing, why.\n");
            return EXIT_OK;
        }
        if (c == CLI_ARG)
            cli_bad(&p, "takes no arguments ('%s')", v);
        return EXIT_USAGE;
    }
    kr_context *ctx = cli_context(NULL, 0);
    char *json = NULL;
    int rc = kr_context_info_json(&json, ctx);
    if (rc != KR_OK) {
        cli_report_error(ctx, "info", rc);
        kr_context_free(ctx);
        return cli_exit_for(rc);
    }
    /* the workers' sandbox beside the context's view: a machine without
     * Landlock says so here, before any pool runs */
    char *sandbox = NULL;
    json_t *all = json_loads(json, 0, NULL);
    json_t *sb = kr_pool_sandbox_json(&sandbox) == KR_OK ? json_loads(sandbox, 0, NULL) : NULL;
    char *merged = NULL;
    if (all && sb) {
        json_object_set(all, "sandbox", sb);
        merged = json_dumps(all, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    }
    printf("%s\n", merged ? merged : json);
    free(merged);
    json_decref(sb);
    json_decref(all);
    kr_free(sandbox);
    kr_free(json);
    kr_context_free(ctx);
    return EXIT_OK;
}
