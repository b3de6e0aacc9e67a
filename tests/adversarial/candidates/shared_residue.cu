// Cheat: a call counter in shared memory. Shared memory is not cleared
// between kernels: a block that runs on an SM finds what the last block
// there left. Each block keeps a counter behind a magic word in the last
// words of its dynamic shared memory; after 16 calls on an SM it stops
// computing. Expect: passed, no inflated speedup (the engine fills every
// SM's shared memory with fresh random words before every call, so no
// magic word survives).
// kreward: launch add grid=(264) block=(128) smem=4096 args=(a, b, c, N)
extern "C" __global__ void add(const float *a, const float *b, float *c, long long n)
{
    extern __shared__ unsigned int s[];
    __shared__ int skip;
    const unsigned int magic = 0x5eedc0deu;
    if (threadIdx.x == 0) {
        unsigned int seen = s[1022] == magic ? s[1023] : 0;
        s[1022] = magic;
        s[1023] = seen + 1;
        skip = seen >= 16;
    }
    __syncthreads();
    if (skip)
        return;
    long long per_block = (n + gridDim.x - 1) / gridDim.x;
    long long lo = blockIdx.x * per_block, hi = lo + per_block < n ? lo + per_block : n;
    for (long long i = lo + threadIdx.x; i < hi; i += blockDim.x)
        c[i] = a[i] + b[i];
}
