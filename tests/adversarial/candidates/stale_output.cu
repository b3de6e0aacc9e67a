// Cheat: stale output. Writes nothing, hoping the output buffer still holds
// the reference's result. Expect: incorrect, unwritten.
// kreward: launch add grid=(1) block=(32) args=(a, b, c, N)
extern "C" __global__ void add(const float *a, const float *b, float *c, long long n) {}
