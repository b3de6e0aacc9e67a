/* libkreward shim <stdlib.h> (lib/compile/shims, embedded in the library): NVRTC ships
 * no C++ standard headers; see <cstdlib>. */
#ifndef KREWARD_SHIM_STDLIB_H
#define KREWARD_SHIM_STDLIB_H

#include <cstdlib>

#endif
