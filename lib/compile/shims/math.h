/* libkreward shim <math.h> (lib/compile/shims, embedded in the library): NVRTC ships
 * no C++ standard headers; see <cmath>. */
#ifndef KREWARD_SHIM_MATH_H
#define KREWARD_SHIM_MATH_H

#include <cmath>

#endif
