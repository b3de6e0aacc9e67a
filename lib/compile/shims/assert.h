/* libkreward shim <assert.h> (lib/compile/shims, embedded in the library): NVRTC ships
 * no C++ standard headers; device assert. */
/* No include guard: like the standard header, each inclusion defines
 * assert again for the NDEBUG of that point. __assertfail is the device
 * runtime's assertion entry point (an NVRTC builtin). */
#undef assert
#ifdef NDEBUG
#define assert(e) ((void)0)
#else
#define assert(e) ((e) ? (void)0 : __assertfail(#e, __FILE__, __LINE__, __func__, sizeof(char)))
#endif
