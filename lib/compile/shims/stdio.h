/* libkreward shim <stdio.h> (lib/compile/shims, embedded in the library): NVRTC ships
 * no C++ standard headers; see <cstdio>. */
#ifndef KREWARD_SHIM_STDIO_H
#define KREWARD_SHIM_STDIO_H

#include <cstdio>

#endif
