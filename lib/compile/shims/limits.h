/* libkreward shim <limits.h> (lib/compile/shims, embedded in the library): NVRTC ships
 * no C++ standard headers; see <climits>. */
#ifndef KREWARD_SHIM_LIMITS_H
#define KREWARD_SHIM_LIMITS_H

#include <climits>

#endif
