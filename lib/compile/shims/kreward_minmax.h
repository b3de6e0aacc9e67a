/* libkreward shim <kreward/minmax.h> (lib/compile/shims, embedded in the library): NVRTC ships
 * no C++ standard headers; std::min, std::max and std::clamp
 * written out (libcu++'s pull in half a second of headers). */
#ifndef KREWARD_SHIM_MINMAX
#define KREWARD_SHIM_MINMAX

#if __cplusplus >= 201402L
#define KREWARD_CONSTEXPR14 constexpr
#else
#define KREWARD_CONSTEXPR14
#endif

namespace std {
template <class T>
__host__ __device__ constexpr const T &min(const T &a, const T &b) { return b < a ? b : a; }
template <class T, class C>
__host__ __device__ constexpr const T &min(const T &a, const T &b, C less) { return less(b, a) ? b : a; }
template <class T>
__host__ __device__ constexpr const T &max(const T &a, const T &b) { return a < b ? b : a; }
template <class T, class C>
__host__ __device__ constexpr const T &max(const T &a, const T &b, C less) { return less(a, b) ? b : a; }
template <class T>
__host__ __device__ KREWARD_CONSTEXPR14 T min(initializer_list<T> l)
{
    const T *m = l.begin();
    for (const T *p = l.begin(); p != l.end(); ++p)
        if (*p < *m)
            m = p;
    return *m;
}
template <class T>
__host__ __device__ KREWARD_CONSTEXPR14 T max(initializer_list<T> l)
{
    const T *m = l.begin();
    for (const T *p = l.begin(); p != l.end(); ++p)
        if (*m < *p)
            m = p;
    return *m;
}
template <class T>
__host__ __device__ constexpr const T &clamp(const T &v, const T &lo, const T &hi)
{
    return v < lo ? lo : hi < v ? hi : v;
}
} // namespace std

#endif
