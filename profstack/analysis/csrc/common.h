#ifndef PROFSTACK_COMMON_H
#define PROFSTACK_COMMON_H

/* Shared by every unit: the Python headers, numbers as Python holds them (Num: an int64 or a double, compared
   and subtracted with Python's semantics), updates of Python objects held in lists, typed views of array columns
   (Col), growing buffers (grow, DBuf) and gather. */

#define PY_SSIZE_T_CLEAN

#include <Python.h>
#include <structmember.h>
#include <limits.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#define LIM53 9007199254740992.0 /* 2**53 */
#define LIM52 4503599627370496.0 /* 2**52 */
#define NS_LIM 4611686018427387904LL /* 2**62: ns times within +-2**62 subtract without overflow */
#define TWO63 9223372036854775808.0

/* Room for one more item in a PyMem array of *cap items of ``item`` bytes, ``n`` in use: the array doubles (or
   starts at ``first`` items) when full. 0 ok, -1 with MemoryError (the array is left as it was). */
static inline int grow(void **v, Py_ssize_t *cap, Py_ssize_t n, size_t item, Py_ssize_t first) {
    if (n < *cap) return 0;
    Py_ssize_t c = *cap ? *cap * 2 : first;
    void *p = PyMem_Realloc(*v, (size_t)c * item);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *v = p;
    *cap = c;
    return 0;
}
/* a value that Python holds as an int (fitting int64) or a float */
typedef struct {
    int is_int;
    long long i;
    double f;
} Num;
static inline int num_from(PyObject *o, Num *n) { /* 0 ok, -1 unsupported (no exception set) */
    if (PyFloat_CheckExact(o)) {
        n->is_int = 0;
        n->f = PyFloat_AS_DOUBLE(o);
        return 0;
    }
    if (PyLong_CheckExact(o)) {
        int ovf = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &ovf);
        if (ovf || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return -1;
        }
        n->is_int = 1;
        n->i = v;
        return 0;
    }
    return -1;
}
static inline PyObject *num_obj(const Num *n) { return n->is_int ? PyLong_FromLongLong(n->i) : PyFloat_FromDouble(n->f); }
/* exact comparison of an int64 with a double, as Python compares int and float: -1, 0, 1; 2 if f is NaN */
static inline int cmp_if(long long i, double f) {
    if (f != f) return 2;
    if (f >= TWO63) return -1;
    if (f < -TWO63) return 1;
    double fl = floor(f);
    long long fi = (long long)fl;
    if (i < fi) return -1;
    if (i > fi) return 1;
    return f > fl ? -1 : 0;
}
/* compare a (Num) with b (Num): -1, 0, 1, or 2 when unordered (NaN) */
static inline int cmp_nn(const Num *a, const Num *b) {
    if (a->is_int && b->is_int) return a->i < b->i ? -1 : (a->i > b->i ? 1 : 0);
    if (a->is_int) return cmp_if(a->i, b->f);
    if (b->is_int) {
        int c = cmp_if(b->i, a->f);
        return c == 2 ? 2 : -c;
    }
    if (a->f != a->f || b->f != b->f) return 2;
    return a->f < b->f ? -1 : (a->f > b->f ? 1 : 0);
}
static inline Num NI(long long v) {
    Num n = {1, v, 0.0};
    return n;
}
#define LT(a, b) (cmp_nn(&(a), &(b)) == -1)
#define GT(a, b) (cmp_nn(&(a), &(b)) == 1)
#define LE(a, b) (cmp_nn(&(a), &(b)) == -1 || cmp_nn(&(a), &(b)) == 0)
/* Python's a - b for two Nums, as a double to add to a float total (int - int exact, then rounded once) */
static inline double num_sub_as_double(const Num *a, const Num *b) {
    if (a->is_int && b->is_int) return (double)(a->i - b->i);
    double x = a->is_int ? (double)a->i : a->f;
    double y = b->is_int ? (double)b->i : b->f;
    return x - y;
}
static inline double num_as_double(const Num *a) { return a->is_int ? (double)a->i : a->f; }
/* Python's a - base (an int within +-2**62) as a double: int - int exact, then rounded once; float - int */
static inline double num_minus_as_double(const Num *a, long long base) {
    return a->is_int ? (double)(a->i - base) : a->f - (double)base;
}
/* ---- the integer-ns clock (gpu.py: ns_of, start_ns, end_ns) ---- */
/* round(x) of a double in [0, 1024] as Python rounds it (half to even), whatever the FPU's rounding mode */
static inline long long round_half_even(double x) {
    double r = floor(x), d = x - r; /* exact */
    if (d > 0.5 || (d == 0.5 && fmod(r, 2.0) != 0.0)) r += 1.0;
    return (long long)r;
}
/* gpu.ns_of(x) for a finite |x| < 2**53 (the caller checks): floor(x) * 1000 + round((x - floor(x)) * 1000.0) */
static inline long long ns_of_small(double x) {
    double fl = floor(x);
    return (long long)fl * 1000 + round_half_even((x - fl) * 1000.0);
}
/* gpu.start_ns(ts, whole_us) for |ts| < 2**53 */
static inline long long start_ns_small(double ts, int whole_us) {
    return whole_us ? (long long)ceil(ts) * 1000 : ns_of_small(ts);
}
int set_item(PyObject *list, Py_ssize_t k, PyObject *v);
int add_long(PyObject *list, Py_ssize_t k, long long v);
int add_obj(PyObject *list, Py_ssize_t k, PyObject *o);
int add_double(PyObject *list, Py_ssize_t k, double v);
int cmp_item_long(PyObject *list, Py_ssize_t k, long long v, int op);
int round_to_int(double x, int up, Num *out, PyObject **big);
/* ---- typed views of the op columns ---- */
typedef struct {
    Py_buffer b;
    int ok;
} Col;
int col_get(PyObject *ops, const char *attr, const char *fmt, Py_ssize_t itemsize, Col *c, Py_ssize_t *n);
int col_get_obj(PyObject *a, const char *fmt, Py_ssize_t itemsize, Col *c, Py_ssize_t *n);
void col_release(Col *c);
/* a growing buffer of doubles */
typedef struct {
    double *v;
    Py_ssize_t n, cap;
} DBuf;
int dbuf_push(DBuf *d, double x);
extern PyObject *array_type;
PyObject *dbuf_array(const DBuf *d);
PyObject *attr(PyObject *o, const char *name);
int merged_extend(PyObject *m, DBuf *s, DBuf *e);
int attr_num(PyObject *o, const char *name, Num *n, int *unsupported);
int exact_double(const Num *n, double *out);
PyObject *gather(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif /* PROFSTACK_COMMON_H */
