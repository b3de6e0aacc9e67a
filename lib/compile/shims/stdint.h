/* libkreward shim <stdint.h> (lib/compile/shims, embedded in the library): NVRTC ships
 * no C++ standard headers; the global names come from <cstdint>. */
#ifndef KREWARD_SHIM_STDINT_H
#define KREWARD_SHIM_STDINT_H

#include <cstdint>

#endif
