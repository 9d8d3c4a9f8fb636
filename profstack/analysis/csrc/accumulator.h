#ifndef PROFSTACK_ACCUMULATOR_H
#define PROFSTACK_ACCUMULATOR_H

/* The GPU accumulator: GpuAccumulator._add_ops (profstack/analysis/gpu.py) in C (add_ops), its per-call state
   (an int64 -> slot map, per-name stats, per-stream state), and LaunchJoin.add before its pruning (join_launches). */

#include "common.h"

/* ---- this call's state in C: an int64 -> slot map, per-name info and stats, per-stream state ---- */
typedef struct {
    long long *keys;
    int *vals;
    Py_ssize_t cap, n; /* cap: a power of two, or 0 */
} IMap;
int imap_get(const IMap *m, long long key);
int imap_put(IMap *m, long long key, int val);
void imap_free(IMap *m);
PyObject *add_ops(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *join_launches(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif /* PROFSTACK_ACCUMULATOR_H */
