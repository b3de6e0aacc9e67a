/* libkreward shim <stddef.h> (lib/compile/shims, embedded in the library): NVRTC ships
 * no C++ standard headers; see <cstddef>. */
#ifndef KREWARD_SHIM_STDDEF_H
#define KREWARD_SHIM_STDDEF_H

#include <cstddef>

#endif
