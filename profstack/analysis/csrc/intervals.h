#ifndef PROFSTACK_INTERVALS_H
#define PROFSTACK_INTERVALS_H

/* Time bins and interval sets: TimeBins._add (profstack/analysis/timebins.py, bins_add), intervals.union
   (union_spans) and intervals.partition_by_set (partition) (profstack/analysis/intervals.py). */

#include "common.h"

PyObject *bins_add(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *union_spans(PyObject *module, PyObject *sets);
PyObject *partition(PyObject *module, PyObject *sets);
PyObject *us_column(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif /* PROFSTACK_INTERVALS_H */
