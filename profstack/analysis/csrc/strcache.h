#ifndef PROFSTACK_STRCACHE_H
#define PROFSTACK_STRCACHE_H

/* The string cache: one str per distinct name of a file, kept across its batches, under a per-process keyed
   hash with a probe cap (hostile names cost a bounded number of comparisons each; docs/analysis.md). */

#include "common.h"

typedef struct {
    uint64_t h;
    const unsigned char *p;
    Py_ssize_t n;
    PyObject *s;
} SEnt;
typedef struct {
    SEnt *t;
    size_t mask, used, bytes;
} SCache;
/* The strings of one file, kept across its batches (a str made once per distinct name, not once per batch, and
   the symbol table's keys are then these same objects, so its lookups hit by identity). Emptied by
   reader_reset() at the end of each file, and before a batch once it holds more than these: */
#define FILE_CACHE_ENTRIES 65536
#define FILE_CACHE_BYTES (8u << 20)
extern SCache file_cache;
void sc_free(SCache *c);
int sc_get(SCache *c, const unsigned char *p, Py_ssize_t n, int high, PyObject **out);
PyObject *cache_stats(PyObject *self, PyObject *noargs);
PyObject *test_degenerate_hash(PyObject *self, PyObject *flag);
int seed_hash(void);

#endif /* PROFSTACK_STRCACHE_H */
