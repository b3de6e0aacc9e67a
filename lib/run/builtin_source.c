/* The builtin kernels' source (run/kr_device.cuh with the generator of
 * common/kr_gen.h, embedded at build time), compiled once per context
 * through the compile cache. */
#include "run/engine.h"
#include "common/strbuf.h"

extern const char kr__src_gen[];
extern const size_t kr__src_gen_len;
extern const char kr__src_device[];
extern const size_t kr__src_device_len;

int kr__builtins_compile(kr_context *ctx, kr_program **out)
{
    kr__buf src = KR__BUF_INIT;
    kr__buf_append(&src, kr__src_gen, kr__src_gen_len);
    kr__buf_puts(&src, "\n");
    kr__buf_append(&src, kr__src_device, kr__src_device_len);
    if (src.oom) {
        kr__buf_free(&src);
        return kr__fail(ctx, KR_ENOMEM, "out of memory");
    }
    /* no fused multiply-add: the generator must round exactly as the host */
    const char *extra[] = {"--fmad=false"};
    kr_compile_options o = KR_COMPILE_OPTIONS_INIT;
    o.name = "kreward_builtins.cu";
    o.extra_options = extra;
    o.num_extra_options = 1;
    int rc = kr_compile(out, ctx, src.data, src.len, &o);
    kr__buf_free(&src);
    return rc;
}
