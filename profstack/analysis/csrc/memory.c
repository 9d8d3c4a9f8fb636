#include "common.h"
#include "memory.h"
#include "reader.h"

/* ---- attribute_ops: memory.attribute's pass over one batch (the allocating CPU op of each [memory] event) ----
 *
 * Contract: for a batch that msgspec decodes as list[memory._Op], the same changes as memory._apply(events, ...)
 * in the same order; NotImplemented, before anything is changed, where the reader declines (as decode_consume's:
 * escapes in keys or in ph, cat, name or a string tid; numbers it cannot convert exactly; a float tid, which
 * msgspec rejects; any type msgspec would reject): the caller then decodes the batch with msgspec. */
typedef struct {
    double ts, dur;
    Py_ssize_t t;          /* the thread's index in mem.tids */
    const unsigned char *name;
    Py_ssize_t name_n;
    int name_high;         /* a byte >= 0x80 in the name (decoded as UTF-8, checked when the batch is read) */
} OpRec;
#define KEPT_OPS 65536
static OpRec *kept_ops = NULL;
static Py_ssize_t kept_ops_cap = 0;
static int ops_busy = 0;
/* a kept string's bytes (no escapes; UTF-8 checked if it has a high byte, as msgspec checks it): 0 ok, 1 decline */
static int rd_plain_str(Rd *rd, const unsigned char **s, Py_ssize_t *n, int *high) {
    int f;
    if (rd->p >= rd->end || *rd->p != '"' || rd_str(rd, s, n, &f) || (f & 2)) return 1;
    *high = f & 1;
    if (*high) {
        PyObject *u = PyUnicode_DecodeUTF8((const char *)*s, *n, NULL);
        if (u == NULL) {
            PyErr_Clear();
            return 1;
        }
        Py_DECREF(u);
    }
    return 0;
}
static int starts_with(const unsigned char *s, Py_ssize_t n, const char *lit) {
    size_t k = strlen(lit);
    return (size_t)n >= k && memcmp(s, lit, k) == 0;
}
/* one memory._Op at rd->p ('{'); *keep: a timed CPU op (allocation primitives aside) on a thread in tids, its
   record in *r. 0 ok, 1 decline, -1 error */
static int rd_op(Rd *rd, PyObject *tids, OpRec *r, int *keep) {
    const unsigned char *ph = NULL, *cat = NULL, *name = NULL;
    Py_ssize_t ph_n = 0, cat_n = 0, name_n = 0;
    signed char has_ts = 0;
    int name_high = 0, high;
    double ts = 0.0, dur = 0.0;
    /* the tid: absent or null (0), an int (1, tid_i) or a string (2, tid_s) */
    int tid_kind = 0;
    long long tid_i = 0;
    const unsigned char *tid_s = NULL;
    Py_ssize_t tid_n = 0;
    int tid_high = 0;
    *keep = 0;
    if (rd_enter(rd, '}')) return 0;
    for (;;) {
        const unsigned char *k;
        Py_ssize_t kn;
        if (rd_key(rd, &k, &kn)) return 1;
        if (rd_colon(rd)) return 1;
        NumTok t;
        if (key_is(k, kn, "ph")) {
            if (rd_plain_str(rd, &ph, &ph_n, &high)) return 1;
        } else if (key_is(k, kn, "cat")) {
            if (rd_plain_str(rd, &cat, &cat_n, &high)) return 1;
        } else if (key_is(k, kn, "name")) {
            if (rd_plain_str(rd, &name, &name_n, &name_high)) return 1;
        } else if (key_is(k, kn, "ts")) { /* float | None */
            if (rd_double_or_null(rd, &has_ts, &ts)) return 1;
        } else if (key_is(k, kn, "dur")) { /* float */
            if (rd_double(rd, &dur)) return 1;
        } else if (key_is(k, kn, "tid")) { /* int | str | None */
            unsigned char c = *rd->p;
            if (c == '"') {
                if (rd_plain_str(rd, &tid_s, &tid_n, &tid_high)) return 1;
                tid_kind = 2;
            } else if (c == 'n') {
                if (rd_lit(rd, "null", 4)) return 1;
                tid_kind = 0;
            } else {
                if (!(c == '-' || (c >= '0' && c <= '9')) || rd_num(rd, &t) ||
                    num_int(&t, LLONG_MIN, LLONG_MAX, &tid_i))
                    return 1;
                tid_kind = 1;
            }
        } else if (rd_skip(rd, 1)) {
            return 1;
        }
        int nx = rd_next(rd, '}');
        if (nx == 1) return 1;
        if (nx == 2) break;
    }
    if (!(ph_n == 1 && ph[0] == 'X') || !has_ts) return 0;
    if (!((cat_n == 6 && memcmp(cat, "cpu_op", 6) == 0) || (cat_n == 8 && memcmp(cat, "Operator", 8) == 0))) return 0;
    if (name == NULL) { /* name defaults to "" */
        name = (const unsigned char *)"";
        name_n = 0;
    }
    if (starts_with(name, name_n, "aten::empty") || starts_with(name, name_n, "aten::new_empty") ||
        starts_with(name, name_n, "aten::resize_"))
        return 0;
    PyObject *key;
    if (tid_kind == 1) key = PyLong_FromLongLong(tid_i);
    else if (tid_kind == 2) key = tid_high ? PyUnicode_DecodeUTF8((const char *)tid_s, tid_n, NULL)
                                           : PyUnicode_FromStringAndSize((const char *)tid_s, tid_n);
    else key = Py_NewRef(Py_None);
    if (key == NULL) return -1;
    PyObject *tv = PyDict_GetItemWithError(tids, key); /* borrowed */
    Py_DECREF(key);
    if (tv == NULL) return PyErr_Occurred() ? -1 : 0;
    Py_ssize_t ti = PyLong_AsSsize_t(tv);
    if (ti == -1 && PyErr_Occurred()) return -1;
    r->ts = ts;
    r->dur = dur;
    r->t = ti;
    r->name = name;
    r->name_n = name_n;
    r->name_high = name_high;
    *keep = 1;
    return 0;
}
typedef struct {
    Py_buffer times, idx;
    int held;
} Span;
/* memory._apply's step for one op on thread span s: each event of the thread within [ts, ts + dur] that no
   shorter op holds gets this op (its name interned once, when first needed: make_name(ctx), a new reference).
   0, or -1 with an exception (the changes made so far kept, as Python's loop keeps them). */
static int apply_one(const Span *s, double ts, double dur, double *best, int *opid, PyObject *intern,
                     PyObject *(*make_name)(const void *), const void *ctx) {
    const double *times = (const double *)s->times.buf;
    const int *ix = (const int *)s->idx.buf;
    Py_ssize_t len = s->times.len / 8, lo = 0, hi = len;
    while (lo < hi) { /* bisect_left(times, ts) */
        Py_ssize_t mid = (lo + hi) / 2;
        if (times[mid] < ts) lo = mid + 1;
        else hi = mid;
    }
    /* bisect_right(times, ts + dur), searched from bisect_left's answer a: where ts + dur < ts (dur < 0) it ends
       at a, and range(a, b) is empty either way */
    double end = ts + dur;
    Py_ssize_t a = lo;
    hi = len;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (end < times[mid]) hi = mid;
        else lo = mid + 1;
    }
    long nid = -1;
    for (Py_ssize_t k = a; k < lo; k++) {
        int j = ix[k];
        if (!(dur < best[j])) continue;
        if (nid < 0) {
            PyObject *name = make_name(ctx);
            if (name == NULL) return -1;
            PyObject *v = PyObject_CallOneArg(intern, name);
            Py_DECREF(name);
            if (v == NULL) return -1;
            nid = PyLong_AsLong(v);
            Py_DECREF(v);
            if (nid == -1 && PyErr_Occurred()) return -1;
            if (nid < INT32_MIN || nid > INT32_MAX) {
                PyErr_SetString(PyExc_OverflowError, "signed integer is greater than maximum");
                return -1;
            }
        }
        best[j] = dur;
        opid[j] = (int)nid;
    }
    return 0;
}
static PyObject *oprec_name(const void *ctx) {
    const OpRec *r = ctx;
    return r->name_high ? PyUnicode_DecodeUTF8((const char *)r->name, r->name_n, NULL)
                        : PyUnicode_FromStringAndSize((const char *)r->name, r->name_n);
}
static PyObject *same_name(const void *ctx) { return Py_NewRef((PyObject *)ctx); }
/* the spans (memory.Spans) as buffers: 0, 1 not as expected (decline), -1 error; sp[t].held: released by
   spans_release */
static int spans_get(PyObject *spans, Span *sp, Py_ssize_t n_sp, Py_ssize_t n_ev) {
    for (Py_ssize_t t = 0; t < n_sp; t++) {
        PyObject *s = PyList_GET_ITEM(spans, t);
        if (s == Py_None) continue;
        if (!PyTuple_CheckExact(s) || PyTuple_GET_SIZE(s) != 2) return 1;
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(s, 0), &sp[t].times, PyBUF_FORMAT) < 0) return -1;
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(s, 1), &sp[t].idx, PyBUF_FORMAT) < 0) {
            PyBuffer_Release(&sp[t].times);
            return -1;
        }
        sp[t].held = 1;
        if (strcmp(sp[t].times.format, "d") != 0 || strcmp(sp[t].idx.format, "i") != 0 ||
            sp[t].times.len / 8 != sp[t].idx.len / 4)
            return 1;
        const int *ix = (const int *)sp[t].idx.buf;
        for (Py_ssize_t k = 0; k < sp[t].idx.len / 4; k++)
            if (ix[k] < 0 || ix[k] >= n_ev) return 1;
    }
    return 0;
}
static void spans_release(Span *sp, Py_ssize_t n_sp) {
    if (sp == NULL) return;
    for (Py_ssize_t t = 0; t < n_sp; t++)
        if (sp[t].held) {
            PyBuffer_Release(&sp[t].times);
            PyBuffer_Release(&sp[t].idx);
        }
    PyMem_Free(sp);
}
/* rd_batch's reader for attribute_ops: an op is kept where it is on a thread with events (spans held) */
typedef struct {
    PyObject *tids;
    const Span *sp;
    Py_ssize_t n_sp;
} OpCtx;
static int rd_op_one(Rd *rd, void *rec, void *ctx, int *keep) {
    const OpCtx *c = ctx;
    int rc = rd_op(rd, c->tids, rec, keep);
    if (rc || !*keep) return rc;
    Py_ssize_t t = ((const OpRec *)rec)->t;
    if (t < 0 || t >= c->n_sp) return 1; /* not a thread of spans: Python's lookup would fail too */
    *keep = c->sp[t].held;
    return 0;
}
/* attribute_ops(batch, tids, spans, best, op, intern): memory._apply over the batch's ops, read from its JSON;
   None, or NotImplemented with nothing changed. spans[t]: None or (array('d') times, array('i') event indices) of
   thread t's [memory] events by time; best: array('d'), op: array('i'), one per event; intern(name) -> name id. */
PyObject *attribute_ops(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "attribute_ops(batch, tids, spans, best, op, intern)");
        return NULL;
    }
    PyObject *tids = args[1], *spans = args[2], *intern = args[5];
    if (!PyDict_CheckExact(tids) || !PyList_CheckExact(spans)) Py_RETURN_NOTIMPLEMENTED;
    Py_buffer view, bestv, opv;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    if (PyObject_GetBuffer(args[3], &bestv, PyBUF_WRITABLE | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (PyObject_GetBuffer(args[4], &opv, PyBUF_WRITABLE | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&bestv);
        PyBuffer_Release(&view);
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t n_sp = PyList_GET_SIZE(spans), n = 0, cap = 0;
    Span *sp = PyMem_Calloc((size_t)(n_sp > 0 ? n_sp : 1), sizeof(Span));
    int outer = !ops_busy;
    OpRec *recs = NULL;
    if (outer) {
        ops_busy = 1;
        recs = kept_ops;
        cap = kept_ops_cap;
    }
    if (sp == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t n_ev = bestv.len / (Py_ssize_t)sizeof(double);
    if (strcmp(bestv.format, "d") != 0 || bestv.itemsize != 8 || strcmp(opv.format, "i") != 0 || opv.itemsize != 4 ||
        opv.len / 4 != n_ev)
        goto decline;
    {
        int rc = spans_get(spans, sp, n_sp, n_ev);
        if (rc < 0) goto done;
        if (rc > 0) goto decline;
    }
    Rd rd;
    memset(&rd, 0, sizeof(rd));
    rd.p = (const unsigned char *)view.buf;
    rd.end = rd.p + view.len;
    {
        OpCtx ctx = {tids, sp, n_sp};
        void *buf = recs;
        int rc = rd_batch(&rd, &buf, &n, &cap, sizeof(OpRec), rd_op_one, &ctx);
        recs = buf;
        if (rc < 0) goto done;
        if (rc > 0) goto decline;
    }
    /* the batch is read: apply it, op by op in file order */
    double *best = (double *)bestv.buf;
    int *opid = (int *)opv.buf;
    for (Py_ssize_t q = 0; q < n; q++)
        if (apply_one(&sp[recs[q].t], recs[q].ts, recs[q].dur, best, opid, intern, oprec_name, &recs[q]) < 0) goto done;
    result = Py_NewRef(Py_None);
    goto done;
decline:
    result = Py_NewRef(Py_NotImplemented);
done:
    spans_release(sp, n_sp);
    recs_keep((void **)&kept_ops, &kept_ops_cap, recs, cap, KEPT_OPS, outer);
    if (outer) ops_busy = 0;
    PyBuffer_Release(&opv);
    PyBuffer_Release(&bestv);
    PyBuffer_Release(&view);
    return result;
}
/* attribute_log(ts, dur, name, tid, threads, spans, best, op, names, intern): memory.attribute_log's loop over the
   op log (memory.OpLog's columns; threads[log tid] -> index in mem.tids or -1); None, or NotImplemented with
   nothing changed (buffers or indices not as expected) */
PyObject *attribute_log(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "attribute_log(ts, dur, name, tid, threads, spans, best, op, names, intern)");
        return NULL;
    }
    PyObject *spans = args[5], *names = args[8], *intern = args[9];
    if (!PyList_CheckExact(spans) || !PyList_CheckExact(names)) Py_RETURN_NOTIMPLEMENTED;
    const char *fmt[8] = {"d", "d", "i", "i", "i", NULL, "d", "i"};
    Py_buffer v[8];
    int got = 0;
    PyObject *result = NULL;
    Py_ssize_t n_sp = PyList_GET_SIZE(spans), n_names = PyList_GET_SIZE(names);
    Span *sp = PyMem_Calloc((size_t)(n_sp > 0 ? n_sp : 1), sizeof(Span));
    if (sp == NULL) return PyErr_NoMemory();
    for (int k = 0; k < 8; k++) {
        if (fmt[k] == NULL) continue;
        int flags = PyBUF_FORMAT | (k >= 6 ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(args[k], &v[k], flags) < 0) goto done;
        got |= 1 << k;
        Py_ssize_t size = fmt[k][0] == 'd' ? 8 : 4;
        if (strcmp(v[k].format, fmt[k]) != 0 || v[k].itemsize != size) goto decline;
    }
    Py_ssize_t n = v[0].len / 8, n_thr = v[4].len / 4, n_ev = v[6].len / 8;
    if (v[1].len / 8 != n || v[2].len / 4 != n || v[3].len / 4 != n || v[7].len / 4 != n_ev) goto decline;
    const double *ts = v[0].buf, *dur = v[1].buf;
    const int *name = v[2].buf, *tid = v[3].buf, *threads = v[4].buf;
    for (Py_ssize_t q = 0; q < n; q++)
        if (name[q] < 0 || name[q] >= n_names || tid[q] < 0 || tid[q] >= n_thr) goto decline;
    for (Py_ssize_t k = 0; k < n_thr; k++)
        if (threads[k] < -1 || threads[k] >= n_sp) goto decline;
    {
        int rc = spans_get(spans, sp, n_sp, n_ev);
        if (rc < 0) goto done;
        if (rc > 0) goto decline;
    }
    double *best = v[6].buf;
    int *opid = v[7].buf;
    for (Py_ssize_t q = 0; q < n; q++) {
        int t = threads[tid[q]];
        if (t < 0 || !sp[t].held) continue;
        if (apply_one(&sp[t], ts[q], dur[q], best, opid, intern, same_name, PyList_GET_ITEM(names, name[q])) < 0)
            goto done;
    }
    result = Py_NewRef(Py_None);
    goto done;
decline:
    result = Py_NewRef(Py_NotImplemented);
done:
    spans_release(sp, n_sp);
    for (int k = 0; k < 8; k++)
        if (got & (1 << k)) PyBuffer_Release(&v[k]);
    return result;
}
