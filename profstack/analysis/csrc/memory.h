#ifndef PROFSTACK_MEMORY_H
#define PROFSTACK_MEMORY_H

/* Memory attribution: memory.attribute's pass over one batch read from its JSON (attribute_ops) and
   memory.attribute_log's loop over the op log (attribute_log) (profstack/analysis/memory.py). */

#include "common.h"

PyObject *attribute_ops(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *attribute_log(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif /* PROFSTACK_MEMORY_H */
