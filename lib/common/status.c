/* Status codes: their names and texts (kr_strerror, kr_status_name). */
#include "kreward/common.h"

static const struct {
    int code;
    const char *name;
    const char *text;
} status_table[] = {
    {KR_OK, "KR_OK", "success"},
    {KR_EINVAL, "KR_EINVAL", "invalid argument"},
    {KR_ENOMEM, "KR_ENOMEM", "out of memory"},
    {KR_EUNAVAILABLE, "KR_EUNAVAILABLE", "a required run-time library is not available"},
    {KR_ENODEVICE, "KR_ENODEVICE", "no usable GPU"},
    {KR_ECOMPILE, "KR_ECOMPILE", "compilation failed"},
    {KR_ETIMEOUT, "KR_ETIMEOUT", "time limit reached"},
    {KR_EPARSE, "KR_EPARSE", "malformed input"},
    {KR_ECUDA, "KR_ECUDA", "CUDA driver error"},
    {KR_EIO, "KR_EIO", "input/output error"},
    {KR_EVERSION, "KR_EVERSION", "version mismatch"},
    {KR_ETOOBIG, "KR_ETOOBIG", "input too large"},
    {KR_EPLAN, "KR_EPLAN", "invalid launch plan"},
    {KR_EPLUGIN, "KR_EPLUGIN", "reward term or plugin error"},
    {KR_EPOISONED, "KR_EPOISONED", "context unusable after an earlier kernel fault"},
    {KR_ENOTFOUND, "KR_ENOTFOUND", "not found"},
    {KR_ERANGE, "KR_ERANGE", "value out of range"},
    {KR_EUNSUPPORTED, "KR_EUNSUPPORTED", "not supported"},
    {KR_ESTATE, "KR_ESTATE", "invalid state for this call"},
    {KR_EFAULT, "KR_EFAULT", "kernel fault"},
    {KR_ECANCELED, "KR_ECANCELED", "cancelled"},
    {KR_EUNSOUND, "KR_EUNSOUND", "the problem can be passed without computing it"},
};

const char *kr_strerror(int code)
{
    for (size_t i = 0; i < sizeof status_table / sizeof status_table[0]; i++)
        if (status_table[i].code == code)
            return status_table[i].text;
    return "unknown status code";
}

const char *kr_status_name(int code)
{
    for (size_t i = 0; i < sizeof status_table / sizeof status_table[0]; i++)
        if (status_table[i].code == code)
            return status_table[i].name;
    return "KR_UNKNOWN";
}
