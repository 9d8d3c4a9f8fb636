#ifndef PROFSTACK_CONSUMER_H
#define PROFSTACK_CONSUMER_H

/* The event consumer: _Parser._consume_events (profstack/analysis/parse.py) over records (Rec), filled from
   parse.Event objects (consume_events) or by the reader (decode_consume). */

#include "common.h"

/* One decoded event as the per-event loop reads it: from a parse.Event (consume_events) or straight from the
   batch's JSON (decode_consume). Strings are borrowed (from the Event, or from the reader's string cache). */
typedef struct {
    PyObject *ph, *cat, *name;
    PyObject *ev;       /* the parse.Event (borrowed), or NULL: decoded from src/len when a Python helper needs it */
    PyObject *stream_o; /* args.stream as the Event holds it (NULL from the reader, which holds ints only) */
    PyObject *dev_o;    /* args.device likewise */
    const char *src;
    Py_ssize_t len;
    double ts, dur, bytes_f, occ;
    long long corr, stream, bytes_i, dev;
    signed char has_args, has_corr, has_occ, has_dev, dev_ovf;
    signed char stream_t; /* 0 None, 1 an int (in stream), 2 another object (stream_o) */
    signed char bytes_t;  /* 0 None, 1 int (bytes_i), 2 float (bytes_f) */
    signed char loose;    /* from the reader: an int arg was written as a string of digits (parse.loose_int) */
    /* from the reader only (mem_read): args' [memory] fields (mem_set: a bit per field present and not null,
       in the order of mem) and the tid, for a [memory] event added without a parse.Event */
    signed char mem_read, mem_set;
    signed char tid_t; /* 0 None (absent, null), 1 int (tid_i), 2 float (tid_f), 3 an ASCII str (tid_s, tid_n) */
    long long mem[5];  /* Bytes, Total Allocated, Total Reserved, Device Type, Device Id */
    long long tid_i;
    double tid_f;
    const char *tid_s;
    Py_ssize_t tid_n;
    /* what op_types.Collector reads (with has_args): args' External id and 2021's external id (0 absent or null, 1
       an integer by loose_int's rule in ext / ext2, 2 anything else) and "Input type"'s JSON text (NULL: absent) */
    signed char ext_t, ext2_t;
    long long ext, ext2;
    const char *types_p;
    Py_ssize_t types_n;
} Rec;
PyObject *consume_core(PyObject *parser, const Rec *recs, Py_ssize_t n, PyObject *const *arrays,
                              int count_events);
PyObject *consume_events(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
/* empty the cache of "Input type" texts (reader_reset, at the end of each file) */
void types_cache_reset(void);

#endif /* PROFSTACK_CONSUMER_H */
