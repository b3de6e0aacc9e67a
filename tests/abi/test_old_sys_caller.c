/* A program linked against libkreward 0.3.0, when kr_sandbox_enter was
 * kr_sandbox_enter@KREWARD_1.0 and kr_keystream_xor kr_keystream_xor@KREWARD_1.1
 * (both have since moved to the extension node KREWARD_SYS_1,
 * include/kreward/sys/). Its references are bound to those old versions here
 * the way its linker bound them then (.symver on the undefined symbols), so
 * this binary needs exactly what such a program needs: if either version were
 * gone the loader would refuse to start it. Each call must still work, and
 * reach the same function the default version gives new programs. */
#include <kreward/kreward.h>
#include <kreward/sys/keystream.h>
#include <kreward/sys/sandbox.h>

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

__asm__(".symver kr_sandbox_enter, kr_sandbox_enter@KREWARD_1.0");
__asm__(".symver kr_keystream_xor, kr_keystream_xor@KREWARD_1.1");

static int failures;

#define CHECK(cond, ...)                  \
    do {                                  \
        if (!(cond)) {                    \
            printf("FAIL: " __VA_ARGS__); \
            printf("\n");                 \
            failures++;                   \
        }                                 \
    } while (0)

int main(void)
{
    /* ChaCha20, zero key, block 0: RFC 8439 A.1 test vector 1's first bytes */
    static const unsigned char want[8] = {0x76, 0xb8, 0xe0, 0xad, 0xa0, 0xf1, 0x3d, 0x90};
    unsigned char key[32] = {0}, buf[64] = {0};
    CHECK(kr_keystream_xor(buf, sizeof buf, key, 0, 20) == KR_OK, "kr_keystream_xor@KREWARD_1.1");
    CHECK(memcmp(buf, want, sizeof want) == 0, "kr_keystream_xor@KREWARD_1.1: wrong keystream");
    CHECK(kr_keystream_xor(buf, sizeof buf, NULL, 0, 20) == KR_EINVAL,
          "kr_keystream_xor@KREWARD_1.1 takes no NULL key");

    /* malformed or missing specs are refused before anything is applied */
    char *why = NULL;
    CHECK(kr_sandbox_enter("{", NULL, &why) == KR_EPARSE, "kr_sandbox_enter@KREWARD_1.0: '{'");
    kr_free(why);
    CHECK(kr_sandbox_enter(NULL, NULL, NULL) == KR_EINVAL, "kr_sandbox_enter@KREWARD_1.0: NULL");

    /* the old versions are aliases of the current functions */
    void *lib = dlopen("libkreward.so.1", RTLD_NOW | RTLD_NOLOAD);
    CHECK(lib != NULL, "libkreward.so.1 is not loaded: %s", dlerror());
    if (lib) {
        struct {
            const char *name, *old;
        } fns[] = {{"kr_sandbox_enter", "KREWARD_1.0"}, {"kr_keystream_xor", "KREWARD_1.1"}};
        for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
            void *old = dlvsym(lib, fns[i].name, fns[i].old);
            void *cur = dlvsym(lib, fns[i].name, "KREWARD_SYS_1");
            void *plain = dlsym(lib, fns[i].name);
            CHECK(old != NULL, "%s@%s: not found", fns[i].name, fns[i].old);
            CHECK(cur && cur == old, "%s@@KREWARD_SYS_1 is not the same function as @%s",
                  fns[i].name, fns[i].old);
            CHECK(plain == cur, "dlsym(%s) (ctypes' way) does not give the default version",
                  fns[i].name);
        }
        dlclose(lib);
    }
    if (failures)
        return 1;
    printf("old extension callers: kr_sandbox_enter@KREWARD_1.0 and kr_keystream_xor@KREWARD_1.1 "
           "resolve to the KREWARD_SYS_1 functions\n");
    return 0;
}
