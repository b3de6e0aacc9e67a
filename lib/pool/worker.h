/* The worker process's main (worker.c), called by tools/kreward-worker.c. */
#ifndef KR_WORKER_H
#define KR_WORKER_H

int kr__worker_main(int argc, char **argv);

#endif
