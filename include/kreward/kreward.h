/* libkreward: compile, verify, benchmark and score GPU kernels for RL rewards.
 * This header includes the whole public API. */
#ifndef KREWARD_H
#define KREWARD_H

#include "common.h"
#include "context.h"
#include "program.h"
#include "problem.h"
#include "report.h"
#include "evaluate.h"
#include "score.h"

#endif
