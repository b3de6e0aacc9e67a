/* libkreward shim <stdbool.h> (lib/compile/shims, embedded in the library): NVRTC ships
 * no C++ standard headers; bool is a keyword in C++. */
#ifndef KREWARD_SHIM_STDBOOL_H
#define KREWARD_SHIM_STDBOOL_H

#ifndef __bool_true_false_are_defined
#define __bool_true_false_are_defined 1
#endif

#endif
