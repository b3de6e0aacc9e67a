/* libkreward shim <string.h> (lib/compile/shims, embedded in the library): NVRTC ships
 * no C++ standard headers; see <cstring>. */
#ifndef KREWARD_SHIM_STRING_H
#define KREWARD_SHIM_STRING_H

#include <cstring>

#endif
