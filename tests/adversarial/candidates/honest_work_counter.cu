// Honest look-alike: a persistent kernel that takes tiles from a __device__
// work counter. Only correct when the counter starts at 0 on every call:
// the globals reset is what makes it work. Expect: passed.
// kreward: launch add grid=(132) block=(256) args=(a, b, c, N)
__device__ unsigned long long next_tile;
extern "C" __global__ void add(const float *a, const float *b, float *c, long long n)
{
    __shared__ unsigned long long tile;
    const long long tile_size = 4096;
    for (;;) {
        if (threadIdx.x == 0)
            tile = atomicAdd(&next_tile, 1ull);
        __syncthreads();
        long long start = (long long)tile * tile_size;
        if (start >= n)
            return;
        for (long long i = start + threadIdx.x; i < start + tile_size && i < n; i += 256)
            c[i] = a[i] + b[i];
        __syncthreads();
    }
}
