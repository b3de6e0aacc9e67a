/* libkreward shim <float.h> (lib/compile/shims, embedded in the library): NVRTC ships
 * no C++ standard headers; see <cfloat>. */
#ifndef KREWARD_SHIM_FLOAT_H
#define KREWARD_SHIM_FLOAT_H

#include <cfloat>

#endif
