/* An exported function that moved to another version node of libkreward.sym
 * (kr_sandbox_enter and kr_keystream_xor went from the stable nodes to
 * KREWARD_SYS_1) keeps its older version: programs linked before the move
 * ask for name@OLD and must still resolve. KR__SYMVER_COMPAT(name, compat,
 * "OLD", "CURRENT") binds the definition as name@@CURRENT (the default, what
 * new programs link) and an alias of it, compat, as name@OLD (GNU symbol
 * versioning, as libfuse's FUSE_SYMVER). libkreward.sym lists name in both
 * nodes, so that "local: *" does not hide the alias. Only the shared library
 * binds versions (meson defines KR__SHARED for it); in the static archive
 * the unit tests link there are no versions and the macro declares nothing
 * new. Put it after the function's definition, in the same file. */
#ifndef KR_SYMVER_H
#define KR_SYMVER_H

#if defined(KR__SHARED) && defined(__ELF__)
#define KR__SYMVER_COMPAT(name, compat, old, current)                              \
    extern __typeof__(name) compat                                                 \
        __attribute__((__alias__(#name), __visibility__("default")));              \
    __asm__(".symver " #name ", " #name "@@" current);                            \
    __asm__(".symver " #compat ", " #name "@" old)
#else
#define KR__SYMVER_COMPAT(name, compat, old, current) extern __typeof__(name) name
#endif

#endif
