/* `kreward-worker`: a worker process of a libkreward pool (lib/pool/worker.c
 * has it all). Started by the pool, never by hand. */
#include "pool/worker.h"

int main(int argc, char **argv)
{
    return kr__worker_main(argc, argv);
}
