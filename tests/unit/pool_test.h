/* What the pool's tests (unit/test_pool.c, gpu/test_gpu_pool.c) share. */
#ifndef KR_POOL_TEST_H
#define KR_POOL_TEST_H

#include "helpers.h"

#include <jansson.h>

/* One number of kr_pool_status_json (0 when absent). */
static inline double pool_status_number(kr_pool *pool, const char *key)
{
    char *text = NULL;
    assert_int_equal(kr_pool_status_json(&text, pool), KR_OK);
    json_t *o = json_loads(text, 0, NULL);
    double v = json_number_value(json_object_get(o, key));
    json_decref(o);
    kr_free(text);
    return v;
}

#endif
