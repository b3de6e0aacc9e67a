/* `kreward serve`: the reward service over HTTP (docs/serve.md). The server
 * is Python (kreward.serve: Starlette + uvicorn, and Ray for the cluster
 * pool): cli_python.c hands the arguments to `python3 -m kreward.serve`. */
#include "cli.h"

int cmd_serve(int argc, char **argv)
{
    return cli_exec_python("serve", "kreward.serve", NULL, argc, argv, "starlette and uvicorn");
}
