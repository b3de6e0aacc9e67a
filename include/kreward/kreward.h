/* libkreward: compile, verify, benchmark and score GPU kernels for RL rewards.
 * This header includes the whole public API, one header per object. */
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
#include "sandbox.h"
#include "keystream.h"

#endif
