// kreward: scratch t bytes=N*4 zero
// kreward: launch rows grid=(cdiv(M, 4), 1) block=(128) smem=min(N, 1024)*4 args=(x, y, M, N, eps)
// kreward: launch narrow grid=1 block=(256) args=(t, M*N)
