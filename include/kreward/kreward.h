/* libkreward: compile, verify, benchmark and score GPU kernels for RL rewards.
 * This header includes the whole stable API, one header per object. The
 * extension headers (kreward/sys/: calls made for one consumer, in their own
 * version node) are not included: a caller includes the one it uses. */
#ifndef KREWARD_H
#define KREWARD_H

#include "common.h"
#include "context.h"
#include "program.h"
#include "problem.h"
#include "plan.h"
#include "report.h"
#include "verify.h"
#include "bench.h"
#include "reward.h"
#include "evaluate.h"
#include "pool.h"

#endif
