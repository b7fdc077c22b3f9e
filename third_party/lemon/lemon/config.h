/* LEMON 1.3.1 configuration for the header-only subset vendored by multidraft.
 *
 * Upstream generates this file with CMake; this hand-written copy replaces it so that no
 * configure step is needed. Only the headers listed in third_party/lemon/README.md are
 * vendored: none of them uses an LP/MIP solver, so the LEMON_HAVE_LP family stays undefined.
 */
#define LEMON_VERSION "1.3.1"
#define LEMON_HAVE_LONG_LONG 1

/* bits/lock.h guards the observer lists of a graph's maps. With pthreads it is a real mutex, as
 * in Debian's build; on Windows LEMON's lock needs its compiled library (bits/windows.cc), so the
 * lock is a no-op there: multidraft builds every graph inside one call and never shares it. */
#if !defined(_WIN32)
#define LEMON_USE_PTHREAD 1
#endif
