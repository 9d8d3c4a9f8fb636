/* _gpuaccel: the method table (csrc/README.md: one unit per concern). The engine's hot loops in C
 * (docs/analysis.md, "The C accelerator"): the per-op loop of GpuAccumulator.add
 * (profstack/analysis/gpu.py, _add_ops), the parser's per-event loop, the launch join, the time bins and the
 * interval unions, each transliterated from its Python twin; and decode_consume, a reader of a batch's JSON
 * straight into the per-event loop, in front of msgspec (its contract is above its code, further down).
 *
 * Contract: add_ops(acc, ops, order, join, stop_s, settle, by_op_start) returns exactly the tuple _add_ops
 * returns and leaves acc and join exactly as _add_ops leaves them: the same values with the same Python types
 * (ints stay ints, floats floats), dict and set entries added in the same order, the same methods called
 * (join.missing, acc._graph_op, classify.type_index, classify.memcpy_direction) with the same arguments in the
 * same order, and the same exception where Python raises one. Or, before it changes anything, it returns
 * NotImplemented when an input lies outside what it handles exactly (a column of another type, an op's start,
 * duration or end at or beyond 2**52 µs, an ns time at or beyond 2**62, a kind or name id out of range, a
 * threshold that is not a float or small int); add() then runs the Python loop.
 *
 * Python's arithmetic is kept: times are integer ns (gpu.ns_of, or HTA's ceil/floor x 1000) within +-2**62
 * (checked), so their differences are exact in int64; launch times are not bounded, so their ns go through Python
 * ints beyond 2**52 µs, and raise as math.ceil/math.floor do on infinity; int-float comparisons are exact, as in Python (not
 * a conversion of the int to double); sums stored in Python objects (per-name stats, per-stream waits, memcpy
 * and memset totals) are updated with Python's own number protocol when an int64 would overflow.
 */
#include "common.h"
#include "accumulator.h"
#include "consumer.h"
#include "intervals.h"
#include "memory.h"
#include "reader.h"
#include "strcache.h"

static PyMethodDef methods[] = {
    {"_cache_stats", (PyCFunction)cache_stats, METH_NOARGS,
     "_cache_stats(): the string cache's declined lookups and longest probe sequence (tests, bench)"},
    {"_test_degenerate_hash", (PyCFunction)test_degenerate_hash, METH_O,
     "_test_degenerate_hash(flag): tests only: make every name hash alike, as crafted names would (and reset)"},
    {"add_ops", (PyCFunction)(void (*)(void))add_ops, METH_FASTCALL,
     "add_ops(acc, ops, order, join, stop_s, settle, by_op_start): GpuAccumulator._add_ops in C, or NotImplemented"},
    {"bins_add", (PyCFunction)(void (*)(void))bins_add, METH_FASTCALL,
     "bins_add(series, width, first, starts, ends): TimeBins._add's loop in C, or NotImplemented"},
    {"consume_events", (PyCFunction)(void (*)(void))consume_events, METH_FASTCALL,
     "consume_events(parser, events, l_corr, l_ts, l_dur, cpu_starts, l_maybe_empty): _Parser._consume_events in C, "
     "or NotImplemented"},
    {"decode_consume", (PyCFunction)(void (*)(void))decode_consume, METH_FASTCALL,
     "decode_consume(parser, batch, l_corr, l_ts, l_dur, cpu_starts, l_maybe_empty): the batch's JSON read into the "
     "same loop "
     "without an Event per event; consume_events' (launches, X events, runtime calls), or NotImplemented"},
    {"reader_reset", (PyCFunction)reader_reset, METH_NOARGS,
     "reader_reset(): drop the strings decode_consume keeps across one file's batches"},
    {"attribute_ops", (PyCFunction)(void (*)(void))attribute_ops, METH_FASTCALL,
     "attribute_ops(batch, tids, spans, best, op, intern): memory.attribute's pass over one batch read from its "
     "JSON; None, or NotImplemented with nothing changed"},
    {"attribute_log", (PyCFunction)(void (*)(void))attribute_log, METH_FASTCALL,
     "attribute_log(ts, dur, name, tid, threads, spans, best, op, names, intern): memory.attribute_log's loop over "
     "the op log; None, or NotImplemented with nothing changed"},
    {"gather", (PyCFunction)(void (*)(void))gather, METH_FASTCALL,
     "gather(column, idx): array(column.typecode, (column[i] for i in idx)) for 4- or 8-byte items and an "
     "array('i') of indices, or NotImplemented"},
    {"join_launches", (PyCFunction)(void (*)(void))join_launches, METH_FASTCALL,
     "join_launches(join, corrs, starts, durs): LaunchJoin.add before its pruning; None, a late correlation id, "
     "or NotImplemented"},
    {"union_spans", (PyCFunction)union_spans, METH_O,
     "union_spans(list of Merged): (starts, ends) arrays of intervals.union, or NotImplemented"},
    {"partition", (PyCFunction)partition, METH_O,
     "partition(list of Merged): intervals.partition_by_set's (mask, time) pairs in insertion order, or NotImplemented"},
    {"us_column", (PyCFunction)(void (*)(void))us_column, METH_FASTCALL,
     "us_column(col, base_us): gpu._us_column: array('d', (x / 1000.0 + base_us for x in col)), or NotImplemented"},
    {NULL, NULL, 0, NULL},
};
static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_gpuaccel", "C per-op loop of GpuAccumulator.add", -1,
                                       methods, NULL, NULL, NULL, NULL};
PyMODINIT_FUNC PyInit__gpuaccel(void) {
    if (seed_hash() < 0) return NULL;
    PyObject *arr = PyImport_ImportModule("array");
    if (arr == NULL) return NULL;
    array_type = PyObject_GetAttrString(arr, "array");
    Py_DECREF(arr);
    if (array_type == NULL) return NULL;
    return PyModule_Create(&moduledef);
}
