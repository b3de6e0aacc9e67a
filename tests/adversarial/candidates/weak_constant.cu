// Cheat: writes the constant the weak problem's outputs hover around.
// Expect: passed (the problem lets it), weak_problem.
// kreward: launch mean grid=(1) block=(1) args=(y)
extern "C" __global__ void mean(float *y) { y[0] = 0.5f; }
