/* The engine's hot loops in C (docs/analysis.md, "The C accelerator"): the per-op loop of GpuAccumulator.add
 * (profstack/analysis/gpu.py, _add_ops), the parser's per-event loop, the launch join, the time bins and the
 * interval unions, each transliterated from its Python twin; and decode_consume, a reader of a batch's JSON
 * straight into the per-event loop, in front of msgspec (its contract is above its code, further down).
 *
 * Contract: add_ops(acc, ops, order, join, stop_s, settle, by_op_start) returns exactly the tuple _add_ops
 * returns and leaves acc and join exactly as _add_ops leaves them: the same values with the same Python types
 * (ints stay ints, floats floats), dict and set entries added in the same order, the same methods called
 * (join.missing, acc._graph_op, classify.type_index, classify.memcpy_direction) with the same arguments in the
 * same order, and the same exception where Python raises one. Or, before it changes anything, it returns
 * NotImplemented when an input lies outside what it handles exactly (a column of another type, a time at or
 * beyond 2**53, a kind or name id out of range, a threshold that is not a float or small int); add() then runs
 * the Python loop.
 *
 * Python's arithmetic is kept: the columns' times are within +-2**53 (checked), so ceil/floor of them and their
 * differences are exact in int64; launch times are not bounded, so their ceil/floor go through Python ints when
 * large, and raise as math.ceil/math.floor do on infinity; int-float comparisons are exact, as in Python (not
 * a conversion of the int to double); sums stored in Python objects (per-name stats, per-stream waits, memcpy
 * and memset totals) are updated with Python's own number protocol when an int64 would overflow.
 */
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
#define TWO63 9223372036854775808.0

/* a value that Python holds as an int (fitting int64) or a float */
typedef struct {
    int is_int;
    long long i;
    double f;
} Num;

static int num_from(PyObject *o, Num *n) { /* 0 ok, -1 unsupported (no exception set) */
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

static PyObject *num_obj(const Num *n) { return n->is_int ? PyLong_FromLongLong(n->i) : PyFloat_FromDouble(n->f); }

/* exact comparison of an int64 with a double, as Python compares int and float: -1, 0, 1; 2 if f is NaN */
static int cmp_if(long long i, double f) {
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
static int cmp_nn(const Num *a, const Num *b) {
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
static inline Num NF(double v) {
    Num n = {0, 0, v};
    return n;
}
#define LT(a, b) (cmp_nn(&(a), &(b)) == -1)
#define GT(a, b) (cmp_nn(&(a), &(b)) == 1)
#define LE(a, b) (cmp_nn(&(a), &(b)) == -1 || cmp_nn(&(a), &(b)) == 0)

/* Python's a - b for two Nums, as a double to add to a float total (int - int exact, then rounded once) */
static double num_sub_as_double(const Num *a, const Num *b) {
    if (a->is_int && b->is_int) return (double)(a->i - b->i);
    double x = a->is_int ? (double)a->i : a->f;
    double y = b->is_int ? (double)b->i : b->f;
    return x - y;
}

static double num_as_double(const Num *a) { return a->is_int ? (double)a->i : a->f; }

/* ---- updates of Python objects held in lists, with Python's semantics ---- */

static int set_item(PyObject *list, Py_ssize_t k, PyObject *v) { /* steals v */
    if (v == NULL) return -1;
    if (PyList_CheckExact(list)) {
        if (k < 0 || k >= PyList_GET_SIZE(list)) {
            Py_DECREF(v);
            PyErr_SetString(PyExc_IndexError, "list assignment index out of range");
            return -1;
        }
        PyList_SetItem(list, k, v);
        return 0;
    }
    int r = PySequence_SetItem(list, k, v);
    Py_DECREF(v);
    return r;
}

static PyObject *get_item(PyObject *list, Py_ssize_t k) { /* new reference */
    if (PyList_CheckExact(list) && k >= 0 && k < PyList_GET_SIZE(list)) {
        PyObject *v = PyList_GET_ITEM(list, k);
        Py_INCREF(v);
        return v;
    }
    return PySequence_GetItem(list, k);
}

/* list[k] += v (v an int) */
static int add_long(PyObject *list, Py_ssize_t k, long long v) {
    PyObject *item = get_item(list, k);
    if (item == NULL) return -1;
    PyObject *res = NULL;
    if (PyLong_CheckExact(item)) {
        int ovf = 0;
        long long x = PyLong_AsLongLongAndOverflow(item, &ovf);
        long long r;
        if (!ovf && !(x == -1 && PyErr_Occurred()) && !__builtin_add_overflow(x, v, &r)) res = PyLong_FromLongLong(r);
        PyErr_Clear();
    } else if (PyFloat_CheckExact(item)) {
        res = PyFloat_FromDouble(PyFloat_AS_DOUBLE(item) + (double)v);
    }
    if (res == NULL) {
        PyObject *vo = PyLong_FromLongLong(v);
        if (vo == NULL) {
            Py_DECREF(item);
            return -1;
        }
        res = PyNumber_InPlaceAdd(item, vo);
        Py_DECREF(vo);
    }
    Py_DECREF(item);
    return set_item(list, k, res);
}

/* list[k] += o (o a Python int object, e.g. a square beyond int64) */
static int add_obj(PyObject *list, Py_ssize_t k, PyObject *o) {
    PyObject *item = get_item(list, k);
    if (item == NULL) return -1;
    PyObject *res = PyNumber_InPlaceAdd(item, o);
    Py_DECREF(item);
    return set_item(list, k, res);
}

/* list[k] += v (v a float) */
static int add_double(PyObject *list, Py_ssize_t k, double v) {
    PyObject *item = get_item(list, k);
    if (item == NULL) return -1;
    PyObject *res;
    if (PyFloat_CheckExact(item)) {
        res = PyFloat_FromDouble(PyFloat_AS_DOUBLE(item) + v);
    } else {
        PyObject *vo = PyFloat_FromDouble(v);
        if (vo == NULL) {
            Py_DECREF(item);
            return -1;
        }
        res = PyNumber_InPlaceAdd(item, vo);
        Py_DECREF(vo);
    }
    Py_DECREF(item);
    return set_item(list, k, res);
}

/* rich comparison of list[k] with an int v: 1 true, 0 false, -1 error */
static int cmp_item_long(PyObject *list, Py_ssize_t k, long long v, int op) {
    PyObject *item = get_item(list, k);
    if (item == NULL) return -1;
    Num a, b = NI(v);
    int r;
    if (num_from(item, &a) == 0) {
        int c = cmp_nn(&a, &b);
        switch (op) {
        case Py_LT: r = c == -1; break;
        case Py_GT: r = c == 1; break;
        case Py_EQ: r = c == 0; break;
        default: r = 0;
        }
    } else {
        PyObject *vo = PyLong_FromLongLong(v);
        r = vo == NULL ? -1 : PyObject_RichCompareBool(item, vo, op);
        Py_XDECREF(vo);
    }
    Py_DECREF(item);
    return r;
}

/* math.ceil / math.floor of a double into a Num when it fits int64, else a Python int in *big (new ref) */
static int round_to_int(double x, int up, Num *out, PyObject **big) {
    *big = NULL;
    if (x != x) {
        PyErr_SetString(PyExc_ValueError, "cannot convert float NaN to integer");
        return -1;
    }
    if (isinf(x)) {
        PyErr_SetString(PyExc_OverflowError, "cannot convert float infinity to integer");
        return -1;
    }
    double r = up ? ceil(x) : floor(x);
    if (r > -TWO63 && r < TWO63) {
        *out = NI((long long)r);
        return 0;
    }
    *big = PyLong_FromDouble(r);
    return *big == NULL ? -1 : 1;
}

/* ---- typed views of the op columns ---- */

typedef struct {
    Py_buffer b;
    int ok;
} Col;

static int col_get(PyObject *ops, const char *attr, const char *fmt, Py_ssize_t itemsize, Col *c, Py_ssize_t *n) {
    /* 0 ok, 1 unsupported, -1 error */
    c->ok = 0;
    PyObject *a = PyObject_GetAttrString(ops, attr);
    if (a == NULL) return -1;
    if (PyObject_GetBuffer(a, &c->b, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        Py_DECREF(a);
        PyErr_Clear();
        return 1;
    }
    Py_DECREF(a); /* the buffer keeps the array alive and its size fixed */
    c->ok = 1;
    if (c->b.itemsize != itemsize || c->b.format == NULL || strcmp(c->b.format, fmt) != 0) return 1;
    Py_ssize_t len = c->b.len / itemsize;
    if (*n < 0) *n = len;
    return len == *n ? 0 : 1;
}

static int col_get_obj(PyObject *a, const char *fmt, Py_ssize_t itemsize, Col *c, Py_ssize_t *n) {
    c->ok = 0;
    if (PyObject_GetBuffer(a, &c->b, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        return 1;
    }
    c->ok = 1;
    if (c->b.itemsize != itemsize || c->b.format == NULL || strcmp(c->b.format, fmt) != 0) return 1;
    Py_ssize_t len = c->b.len / itemsize;
    if (*n < 0) *n = len;
    return len == *n ? 0 : 1;
}

static void col_release(Col *c) {
    if (c->ok) PyBuffer_Release(&c->b);
    c->ok = 0;
}

/* a growing buffer of doubles */
typedef struct {
    double *v;
    Py_ssize_t n, cap;
} DBuf;

static int dbuf_push(DBuf *d, double x) {
    if (d->n == d->cap) {
        Py_ssize_t cap = d->cap ? d->cap * 2 : 256;
        double *v = PyMem_Realloc(d->v, (size_t)cap * sizeof(double));
        if (v == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        d->v = v;
        d->cap = cap;
    }
    d->v[d->n++] = x;
    return 0;
}

static PyObject *array_type = NULL;

static PyObject *dbuf_array(const DBuf *d) { /* array('d', ...) */
    PyObject *bytes = PyBytes_FromStringAndSize((const char *)d->v, d->n * (Py_ssize_t)sizeof(double));
    if (bytes == NULL) return NULL;
    PyObject *a = PyObject_CallFunction(array_type, "sO", "d", bytes);
    Py_DECREF(bytes);
    return a;
}

static int dbuf_extend(PyObject *arr, const DBuf *d) { /* arr.frombytes(...) */
    if (d->n == 0) return 0;
    PyObject *bytes = PyBytes_FromStringAndSize((const char *)d->v, d->n * (Py_ssize_t)sizeof(double));
    if (bytes == NULL) return -1;
    PyObject *r = PyObject_CallMethod(arr, "frombytes", "O", bytes);
    Py_DECREF(bytes);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* attribute helpers */
static PyObject *attr(PyObject *o, const char *name) { return PyObject_GetAttrString(o, name); }

/* m.starts.frombytes(s), m.ends.frombytes(e) for an intervals.Merged m, then empty both buffers */
static int merged_extend(PyObject *m, DBuf *s, DBuf *e) {
    if (s->n == 0) return 0;
    PyObject *st = attr(m, "starts"), *en = attr(m, "ends");
    int bad = st == NULL || en == NULL || dbuf_extend(st, s) < 0 || dbuf_extend(en, e) < 0;
    Py_XDECREF(st);
    Py_XDECREF(en);
    s->n = e->n = 0;
    return bad ? -1 : 0;
}

static int attr_num(PyObject *o, const char *name, Num *n, int *unsupported) {
    PyObject *v = attr(o, name);
    if (v == NULL) return -1;
    if (num_from(v, n) < 0) *unsupported = 1;
    Py_DECREF(v);
    return 0;
}

/* a float or an int within +-2**53, as a double that compares with doubles as the original does */
static int exact_double(const Num *n, double *out) {
    if (!n->is_int) {
        *out = n->f;
        return 0;
    }
    if (n->i > (long long)LIM53 || n->i < -(long long)LIM53) return -1;
    *out = (double)n->i;
    return 0;
}

/* ---- this call's state in C: an int64 -> slot map, per-name info and stats, per-stream state ---- */

typedef struct {
    long long *keys;
    int *vals;
    Py_ssize_t cap, n; /* cap: a power of two, or 0 */
} IMap;

static inline size_t imap_hash(long long k) {
    unsigned long long x = (unsigned long long)k * 0x9E3779B97F4A7C15ULL;
    return (size_t)(x ^ (x >> 29));
}

static int imap_get(const IMap *m, long long key) {
    if (m->cap == 0) return -1;
    size_t mask = (size_t)m->cap - 1;
    for (size_t j = imap_hash(key) & mask;; j = (j + 1) & mask) {
        if (m->vals[j] < 0) return -1;
        if (m->keys[j] == key) return m->vals[j];
    }
}

static int imap_put(IMap *m, long long key, int val) { /* key not present */
    if ((m->n + 1) * 2 > m->cap) {
        Py_ssize_t cap = m->cap ? m->cap * 2 : 64;
        long long *keys = PyMem_Malloc((size_t)cap * sizeof(long long));
        int *vals = PyMem_Malloc((size_t)cap * sizeof(int));
        if (keys == NULL || vals == NULL) {
            PyMem_Free(keys);
            PyMem_Free(vals);
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t j = 0; j < cap; j++) vals[j] = -1;
        size_t mask = (size_t)cap - 1;
        for (Py_ssize_t j = 0; j < m->cap; j++) {
            if (m->vals[j] < 0) continue;
            size_t h = imap_hash(m->keys[j]) & mask;
            while (vals[h] >= 0) h = (h + 1) & mask;
            keys[h] = m->keys[j];
            vals[h] = m->vals[j];
        }
        PyMem_Free(m->keys);
        PyMem_Free(m->vals);
        m->keys = keys;
        m->vals = vals;
        m->cap = cap;
    }
    size_t mask = (size_t)m->cap - 1;
    size_t h = imap_hash(key) & mask;
    while (m->vals[h] >= 0) h = (h + 1) & mask;
    m->keys[h] = key;
    m->vals[h] = val;
    m->n += 1;
    return 0;
}

static void imap_free(IMap *m) {
    PyMem_Free(m->keys);
    PyMem_Free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->cap = m->n = 0;
}

typedef struct {
    long long nid;
    int kt;           /* index into classify.KERNEL_TYPES, as type_cache holds it */
    int kernel_added; /* kernel_ids.add(nid) done in this call */
    int ks;           /* index into this call's KStat vector, or -1 */
    PyObject *md;     /* dir_cache[nid] (borrowed), or NULL */
} NidInfo;

typedef struct {
    long long nid;
    int is_new; /* not in kstats before this call */
    long long cnt;
    __int128 sum, sumsq;
    long long mn, mx;
} KStat;

static PyObject *i128_obj(__int128 v) {
    if (v >= (__int128)INT64_MIN && v <= (__int128)INT64_MAX) return PyLong_FromLongLong((long long)v);
    PyObject *hi = PyLong_FromLongLong((long long)(v >> 64));
    PyObject *lo = PyLong_FromUnsignedLongLong((unsigned long long)v);
    PyObject *sh = PyLong_FromLong(64);
    PyObject *t = (hi && sh) ? PyNumber_Lshift(hi, sh) : NULL;
    PyObject *r = (t && lo) ? PyNumber_Add(t, lo) : NULL;
    Py_XDECREF(hi);
    Py_XDECREF(lo);
    Py_XDECREF(sh);
    Py_XDECREF(t);
    return r;
}

/* fold this call's per-name stats into kstats, in first-touch order, then zero them (all now "existing") */
static int ks_merge(PyObject *kstats, KStat *v, Py_ssize_t n) {
    for (Py_ssize_t j = 0; j < n; j++) {
        KStat *k = &v[j];
        if (k->cnt == 0) continue;
        PyObject *key = PyLong_FromLongLong(k->nid);
        if (key == NULL) return -1;
        int bad = 0;
        if (k->is_new) {
            PyObject *l = Py_BuildValue("[LNNLL]", k->cnt, i128_obj(k->sum), i128_obj(k->sumsq), k->mn, k->mx);
            bad = l == NULL || PyDict_SetItem(kstats, key, l) < 0;
            Py_XDECREF(l);
        } else {
            PyObject *st = PyDict_GetItemWithError(kstats, key);
            if (st == NULL) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_KeyError, "a kstats entry vanished during add()");
                bad = 1;
            } else {
                Py_INCREF(st);
                PyObject *a = i128_obj(k->sum), *b = i128_obj(k->sumsq);
                bad = a == NULL || b == NULL || add_long(st, 0, k->cnt) < 0 || add_obj(st, 1, a) < 0 || add_obj(st, 2, b) < 0;
                Py_XDECREF(a);
                Py_XDECREF(b);
                if (!bad) {
                    int c = cmp_item_long(st, 3, k->mn, Py_GT); /* mn < st[3] */
                    if (c > 0) bad = set_item(st, 3, PyLong_FromLongLong(k->mn)) < 0;
                    else if (c < 0) bad = 1;
                }
                if (!bad) {
                    int c = cmp_item_long(st, 4, k->mx, Py_LT); /* mx > st[4] */
                    if (c > 0) bad = set_item(st, 4, PyLong_FromLongLong(k->mx)) < 0;
                    else if (c < 0) bad = 1;
                }
                Py_DECREF(st);
            }
        }
        Py_DECREF(key);
        if (bad) return -1;
        k->is_new = 0;
        k->cnt = 0;
        k->sum = k->sumsq = 0;
        k->mn = INT64_MAX;
        k->mx = INT64_MIN;
    }
    return 0;
}

typedef struct {
    long long key;
    int present; /* in stream_state (before this call, or created in it) */
    int is_new;  /* created in this call: inserted into stream_state at the merge, in first-touch order */
    PyObject *list; /* stream_state[key] (borrowed) when it was there before this call */
    long long end;
    double w[3]; /* host wait, kernel wait, other */
    double ts, dur;
    long long corr, nid;
} StreamSt;

typedef struct {
    StreamSt *v;
    Py_ssize_t n, cap;
} StreamSet;

/* a slot for ``key``, loaded from stream_state when it is there (its types were checked at the start) */
static int ss_touch(PyObject *stream_state, StreamSet *set, IMap *map, long long key, int *slot) {
    if (set->n == set->cap) {
        Py_ssize_t cap = set->cap ? set->cap * 2 : 16;
        StreamSt *v = PyMem_Realloc(set->v, (size_t)cap * sizeof(StreamSt));
        if (v == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        set->v = v;
        set->cap = cap;
    }
    StreamSt *q = &set->v[set->n];
    memset(q, 0, sizeof(*q));
    q->key = key;
    PyObject *ko = PyLong_FromLongLong(key);
    if (ko == NULL) return -1;
    PyObject *l = PyDict_GetItemWithError(stream_state, ko);
    Py_DECREF(ko);
    if (l == NULL && PyErr_Occurred()) return -1;
    if (l != NULL) {
        q->present = 1;
        q->list = l;
        q->end = PyLong_AsLongLong(PyList_GET_ITEM(l, 0));
        for (int j = 0; j < 3; j++) q->w[j] = PyFloat_AS_DOUBLE(PyList_GET_ITEM(l, 1 + j));
        q->ts = PyFloat_AS_DOUBLE(PyList_GET_ITEM(l, 4));
        q->dur = PyFloat_AS_DOUBLE(PyList_GET_ITEM(l, 5));
        q->corr = PyLong_AsLongLong(PyList_GET_ITEM(l, 6));
        q->nid = PyLong_AsLongLong(PyList_GET_ITEM(l, 7));
    }
    if (imap_put(map, key, (int)set->n) < 0) return -1;
    *slot = (int)set->n++;
    return 0;
}

/* is every stream_state entry [int, float, float, float, float, float, int, int] with values C holds exactly? */
static int ss_check(PyObject *stream_state) {
    Py_ssize_t pos = 0;
    PyObject *k, *l;
    while (PyDict_Next(stream_state, &pos, &k, &l)) {
        if (!PyLong_CheckExact(k) || !PyList_CheckExact(l) || PyList_GET_SIZE(l) != 8) return 0;
        const int ints[8] = {1, 0, 0, 0, 0, 0, 1, 1};
        for (int j = 0; j < 8; j++) {
            PyObject *o = PyList_GET_ITEM(l, j);
            Num nn;
            if (num_from(o, &nn) < 0 || nn.is_int != ints[j]) return 0;
        }
        Num e;
        num_from(PyList_GET_ITEM(l, 0), &e);
        if (e.i > 2 * (long long)LIM53 || e.i < -2 * (long long)LIM53) return 0;
        Num key;
        if (num_from(k, &key) < 0) return 0;
    }
    return 1;
}

/* write this call's stream state back: in place for the streams that were there, new ones in first-touch order */
static int ss_merge(PyObject *stream_state, StreamSet *set) {
    for (Py_ssize_t j = 0; j < set->n; j++) {
        StreamSt *q = &set->v[j];
        if (!q->present) continue;
        if (q->is_new) {
            PyObject *ko = PyLong_FromLongLong(q->key);
            PyObject *l = Py_BuildValue("[LdddddLL]", q->end, q->w[0], q->w[1], q->w[2], q->ts, q->dur, q->corr, q->nid);
            int bad = ko == NULL || l == NULL || PyDict_SetItem(stream_state, ko, l) < 0;
            Py_XDECREF(ko);
            if (!bad) q->list = l; /* borrowed from here on: the dict holds it */
            Py_XDECREF(l);
            if (bad) return -1;
            q->is_new = 0;
        } else {
            PyObject *l = q->list;
            if (set_item(l, 0, PyLong_FromLongLong(q->end)) < 0 || set_item(l, 1, PyFloat_FromDouble(q->w[0])) < 0 ||
                set_item(l, 2, PyFloat_FromDouble(q->w[1])) < 0 || set_item(l, 3, PyFloat_FromDouble(q->w[2])) < 0 ||
                set_item(l, 4, PyFloat_FromDouble(q->ts)) < 0 || set_item(l, 5, PyFloat_FromDouble(q->dur)) < 0 ||
                set_item(l, 6, PyLong_FromLongLong(q->corr)) < 0 || set_item(l, 7, PyLong_FromLongLong(q->nid)) < 0)
                return -1;
        }
    }
    return 0;
}

#define MAXT 64

static PyObject *add_ops(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "add_ops(acc, ops, order, join, stop_s, settle, by_op_start)");
        return NULL;
    }
    PyObject *acc = args[0], *ops = args[1], *order = args[2], *join = args[3];
    PyObject *result = NULL;
    int unsupported = 0;
    Col cs = {0}, cts = {0}, cdur = {0}, cname = {0}, ckind = {0}, cstream = {0}, ccorr = {0}, cbytes = {0}, cocc = {0};
    Py_ssize_t *idx = NULL, n_order = 0;
    DBuf delays = {0}, launch_s = {0}, launch_e = {0};
    DBuf closed_s[MAXT], closed_e[MAXT]; /* intervals closed in this call, per kernel type */
    memset(closed_s, 0, sizeof(closed_s));
    memset(closed_e, 0, sizeof(closed_e));
    PyObject *sel = NULL, *mode = NULL, *names = NULL, *type_cache = NULL, *kstats = NULL, *kernel_ids = NULL;
    PyObject *time_by_kind = NULL, *memset_l = NULL, *dir_cache = NULL, *mem_dir = NULL, *open_s_l = NULL;
    PyObject *open_e_l = NULL, *closed_l = NULL, *type_total_l = NULL, *stream_state = NULL, *launches = NULL;
    PyObject *used = NULL, *missing = NULL, *classify = NULL, *type_index = NULL, *memcpy_direction = NULL;
    PyObject *kernel_types = NULL, *gpu = NULL, *graph_op = NULL;
    Num open_s[MAXT + 2], open_e[MAXT + 2];
    double type_total[MAXT];
    double tbk[3];
    int inplace_loaded = 0; /* per-type state cached in C: written back on success and on error */
    IMap nid_map = {0}, stream_map = {0};
    NidInfo *nids = NULL;
    KStat *kss = NULL;
    Py_ssize_t nid_n = 0, nid_cap = 0, ks_n = 0, ks_cap = 0, n_new_streams = 0;
    StreamSet sset = {0};

    /* ---- module constants ---- */
    gpu = PyImport_ImportModule("profstack.analysis.gpu");
    if (gpu == NULL) goto error;
    classify = PyImport_ImportModule("profstack.analysis.classify");
    if (classify == NULL) goto error;
    long long MAX_STREAMS, OTHER_STREAM, OPK[4];
    {
        const char *cn[6] = {"MAX_STREAMS", "OTHER_STREAM", "OP_KERNEL", "OP_MEMCPY", "OP_MEMSET", "OP_SYNC"};
        long long cv[6];
        for (int k = 0; k < 6; k++) {
            PyObject *v = attr(gpu, cn[k]);
            if (v == NULL) goto error;
            cv[k] = PyLong_AsLongLong(v);
            Py_DECREF(v);
            if (cv[k] == -1 && PyErr_Occurred()) goto error;
        }
        MAX_STREAMS = cv[0];
        OTHER_STREAM = cv[1];
        for (int k = 0; k < 4; k++) OPK[k] = cv[2 + k];
        if (OPK[0] != 0 || OPK[1] != 1 || OPK[2] != 2 || OPK[3] != 3) unsupported = 1; /* kinds index time_by_kind */
    }
    if ((type_index = attr(classify, "type_index")) == NULL) goto error;
    if ((memcpy_direction = attr(classify, "memcpy_direction")) == NULL) goto error;
    if ((kernel_types = attr(classify, "KERNEL_TYPES")) == NULL) goto error;
    Py_ssize_t n_types = PyObject_Length(kernel_types);
    if (n_types < 0) goto error;
    if (n_types > MAXT) unsupported = 1;

    /* ---- selection and thresholds ---- */
    if ((sel = attr(acc, "selection")) == NULL) goto error;
    if ((mode = attr(sel, "mode")) == NULL) goto error;
    int in_window = PyUnicode_Check(mode) && PyUnicode_CompareWithASCIIString(mode, "window") == 0;
    int hta = PyUnicode_Check(mode) && PyUnicode_CompareWithASCIIString(mode, "hta") == 0;
    int select_none = PyUnicode_Check(mode) && PyUnicode_CompareWithASCIIString(mode, "none") == 0;
    Num win_lo_n, win_hi_n, last_start, last_end, stop_s, settle_n, tiny_n, thr_n, union_n, gpu_lo, gpu_hi;
    if (attr_num(sel, "win_lo", &win_lo_n, &unsupported) < 0) goto error;
    if (attr_num(sel, "win_hi", &win_hi_n, &unsupported) < 0) goto error;
    if (attr_num(sel, "last_start", &last_start, &unsupported) < 0) goto error;
    if (attr_num(sel, "last_end", &last_end, &unsupported) < 0) goto error;
    int incl, need_launch, by_op_start, all_calls, clip;
    {
        PyObject *v;
        if ((v = attr(sel, "include_last")) == NULL) goto error;
        incl = PyObject_IsTrue(v);
        Py_DECREF(v);
        if ((v = attr(sel, "need_launch")) == NULL) goto error;
        need_launch = PyObject_IsTrue(v);
        Py_DECREF(v);
        if ((v = attr(acc, "all_launch_calls")) == NULL) goto error;
        all_calls = PyObject_IsTrue(v);
        Py_DECREF(v);
        if ((v = attr(acc, "clip_delays")) == NULL) goto error;
        clip = PyObject_IsTrue(v);
        Py_DECREF(v);
        by_op_start = PyObject_IsTrue(args[6]);
        if (incl < 0 || need_launch < 0 || all_calls < 0 || clip < 0 || by_op_start < 0) goto error;
    }
    if (num_from(args[4], &stop_s) < 0) unsupported = 1;
    if (num_from(args[5], &settle_n) < 0) unsupported = 1;
    if (attr_num(acc, "tiny_us", &tiny_n, &unsupported) < 0) goto error;
    if (attr_num(acc, "delay_thr", &thr_n, &unsupported) < 0) goto error;
    if (attr_num(acc, "union_us", &union_n, &unsupported) < 0) goto error;
    if (attr_num(acc, "gpu_lo", &gpu_lo, &unsupported) < 0) goto error;
    if (attr_num(acc, "gpu_hi", &gpu_hi, &unsupported) < 0) goto error;
    double win_lo = 0, win_hi = 0, settle = 0, tiny_us = 0;
    if (!unsupported) {
        if (exact_double(&win_lo_n, &win_lo) || exact_double(&win_hi_n, &win_hi) || exact_double(&settle_n, &settle) ||
            exact_double(&tiny_n, &tiny_us) || union_n.is_int)
            unsupported = 1;
    }
    long long n_closed;
    {
        PyObject *v = attr(acc, "n_closed");
        if (v == NULL) goto error;
        Num nc;
        if (num_from(v, &nc) < 0 || !nc.is_int) unsupported = 1;
        n_closed = nc.i;
        Py_DECREF(v);
    }

    /* ---- containers ---- */
    if ((names = attr(acc, "names")) == NULL) goto error;
    if ((type_cache = attr(acc, "type_cache")) == NULL) goto error;
    if ((kstats = attr(acc, "kstats")) == NULL) goto error;
    if ((kernel_ids = attr(acc, "kernel_ids")) == NULL) goto error;
    if ((time_by_kind = attr(acc, "time_by_kind")) == NULL) goto error;
    if ((memset_l = attr(acc, "memset")) == NULL) goto error;
    if ((dir_cache = attr(acc, "dir_cache")) == NULL) goto error;
    if ((mem_dir = attr(acc, "mem_dir")) == NULL) goto error;
    if ((open_s_l = attr(acc, "open_s")) == NULL) goto error;
    if ((open_e_l = attr(acc, "open_e")) == NULL) goto error;
    if ((closed_l = attr(acc, "closed")) == NULL) goto error;
    if ((type_total_l = attr(acc, "type_total")) == NULL) goto error;
    if ((stream_state = attr(acc, "stream_state")) == NULL) goto error;
    if ((graph_op = attr(acc, "_graph_op")) == NULL) goto error;
    if ((launches = attr(join, "launches")) == NULL) goto error;
    if ((used = attr(join, "used")) == NULL) goto error;
    if ((missing = attr(join, "missing")) == NULL) goto error;
    if (!PyDict_CheckExact(type_cache) || !PyDict_CheckExact(kstats) || !PySet_CheckExact(kernel_ids) ||
        !PyList_CheckExact(time_by_kind) || !PyList_CheckExact(memset_l) || !PyDict_CheckExact(dir_cache) ||
        !PyDict_CheckExact(mem_dir) || !PyList_CheckExact(open_s_l) || !PyList_CheckExact(open_e_l) ||
        !PyList_CheckExact(closed_l) || !PyList_CheckExact(type_total_l) || !PyDict_CheckExact(stream_state) ||
        !PyDict_CheckExact(launches) || !PySet_CheckExact(used) || !PyList_CheckExact(names))
        unsupported = 1;
    if (!unsupported) {
        if (PyList_GET_SIZE(open_s_l) != n_types + 2 || PyList_GET_SIZE(open_e_l) != n_types + 2 ||
            PyList_GET_SIZE(type_total_l) != n_types || PyList_GET_SIZE(closed_l) != n_types ||
            PyList_GET_SIZE(time_by_kind) != 3)
            unsupported = 1;
    }
    if (!unsupported) {
        for (Py_ssize_t k = 0; k < n_types + 2 && !unsupported; k++) {
            if (num_from(PyList_GET_ITEM(open_s_l, k), &open_s[k]) < 0) unsupported = 1;
            else if (num_from(PyList_GET_ITEM(open_e_l, k), &open_e[k]) < 0) unsupported = 1;
            else if ((open_s[k].is_int && (open_s[k].i > 2 * (long long)LIM53 || open_s[k].i < -2 * (long long)LIM53)) ||
                     (open_e[k].is_int && (open_e[k].i > 2 * (long long)LIM53 || open_e[k].i < -2 * (long long)LIM53)))
                unsupported = 1; /* differences stay exact in int64 */
        }
        for (Py_ssize_t k = 0; k < n_types && !unsupported; k++) {
            PyObject *v = PyList_GET_ITEM(type_total_l, k);
            if (!PyFloat_CheckExact(v)) unsupported = 1;
            else type_total[k] = PyFloat_AS_DOUBLE(v);
        }
        for (Py_ssize_t k = 0; k < 3 && !unsupported; k++) {
            PyObject *v = PyList_GET_ITEM(time_by_kind, k);
            if (!PyFloat_CheckExact(v)) unsupported = 1;
            else tbk[k] = PyFloat_AS_DOUBLE(v);
        }
    }
    if (!unsupported && !ss_check(stream_state)) unsupported = 1;
    if (unsupported) goto decline;

    /* ---- columns, checked whole: every value within the range where C and Python agree ---- */
    Py_ssize_t n = -1;
    int rc;
#define COL(c, a, f, sz)                                                                                                  \
    rc = col_get(ops, a, f, sz, &c, &n);                                                                               \
    if (rc < 0) goto error;                                                                                            \
    if (rc > 0) goto decline;
    COL(cs, "s", "q", 8)
    COL(cts, "ts", "d", 8)
    COL(cdur, "dur", "d", 8)
    COL(cname, "name", "i", 4)
    COL(ckind, "kind", "b", 1)
    COL(cstream, "stream", "i", 4)
    COL(ccorr, "corr", "q", 8)
    COL(cbytes, "nbytes", "q", 8)
    COL(cocc, "occ", "f", 4)
#undef COL
    const long long *s_col = cs.b.buf, *corr_col = ccorr.b.buf, *bytes_col = cbytes.b.buf;
    const double *ts_col = cts.b.buf, *dur_col = cdur.b.buf;
    const int *name_col = cname.b.buf, *stream_col = cstream.b.buf;
    const signed char *kind_col = ckind.b.buf;
    const float *occ_col = cocc.b.buf;
    Py_ssize_t n_names = PyList_GET_SIZE(names);
    for (Py_ssize_t i = 0; i < n; i++) {
        double t = ts_col[i], d = dur_col[i];
        if (!(t > -LIM53 && t < LIM53 && d > -LIM53 && d < LIM53)) goto decline;
        if (s_col[i] > (long long)LIM53 || s_col[i] < -(long long)LIM53) goto decline;
        if (kind_col[i] < 0 || kind_col[i] > 3 || name_col[i] < 0 || name_col[i] >= n_names) goto decline;
    }

    /* ---- the order: a range or a sequence of valid indices ---- */
    if (PyRange_Check(order)) {
        Py_ssize_t r3[3];
        const char *rn[3] = {"start", "stop", "step"};
        for (int k = 0; k < 3; k++) {
            PyObject *v = attr(order, rn[k]);
            if (v == NULL) goto error;
            r3[k] = PyLong_AsSsize_t(v);
            Py_DECREF(v);
            if (r3[k] == -1 && PyErr_Occurred()) {
                PyErr_Clear();
                goto decline;
            }
        }
        if (r3[2] != 1 || r3[0] < 0 || r3[1] > n) goto decline;
        n_order = r3[1] > r3[0] ? r3[1] - r3[0] : 0;
        idx = PyMem_Malloc((size_t)(n_order ? n_order : 1) * sizeof(Py_ssize_t));
        if (idx == NULL) {
            PyErr_NoMemory();
            goto error;
        }
        for (Py_ssize_t k = 0; k < n_order; k++) idx[k] = r3[0] + k;
    } else if (PyList_CheckExact(order)) {
        n_order = PyList_GET_SIZE(order);
        idx = PyMem_Malloc((size_t)(n_order ? n_order : 1) * sizeof(Py_ssize_t));
        if (idx == NULL) {
            PyErr_NoMemory();
            goto error;
        }
        for (Py_ssize_t k = 0; k < n_order; k++) {
            PyObject *v = PyList_GET_ITEM(order, k);
            if (!PyLong_CheckExact(v)) goto decline;
            Py_ssize_t j = PyLong_AsSsize_t(v);
            if (j == -1 && PyErr_Occurred()) {
                PyErr_Clear();
                goto decline;
            }
            if (j < 0 || j >= n) goto decline;
            idx[k] = j;
        }
    } else {
        goto decline;
    }

    /* ---- the loop (gpu.py _add_ops, line by line) ---- */
    inplace_loaded = 1;
    long long n_neg = 0, n_sync = 0, n_dup = 0, n_fold = 0, cpu_n = 0, n_sel = 0, n_kern = 0, tiny = 0, n_occ = 0;
    long long taken = 0;
    double sync_us = 0.0, raw_us = 0.0, cpu_sum = 0.0, occ_w = 0.0, occ_t = 0.0;
    double union_us = union_n.f;
    Num all_s = open_s[n_types + 1], all_e = open_e[n_types + 1];
    long long ff_c = -1, ff_n = -1, ff_d = 0;
    for (Py_ssize_t k = 0; k < n_order; k++) {
        Py_ssize_t i = idx[k];
        Num s = NI(s_col[i]);
        if (GT(s, stop_s)) break;
        double ts = ts_col[i];
        long long corr = corr_col[i];
        double rts = NAN, rdur_l = NAN;
        PyObject *corr_o = NULL;
        if (corr >= 0) {
            corr_o = PyLong_FromLongLong(corr);
            if (corr_o == NULL) goto error;
            PyObject *launch = PyDict_GetItemWithError(launches, corr_o);
            if (launch == NULL && PyErr_Occurred()) goto error_corr;
            if (launch != NULL) {
                if (!PyComplex_CheckExact(launch)) {
                    PyErr_SetString(PyExc_TypeError, "a launch is not a complex (start + 1j * duration)");
                    goto error_corr;
                }
                rts = PyComplex_RealAsDouble(launch);
                rdur_l = PyComplex_ImagAsDouble(launch);
            }
        }
        int has_launch = rts == rts;
        if (has_launch) {
            if (rts > settle) {
                Py_XDECREF(corr_o);
                break;
            }
        } else if ((by_op_start ? ts : -INFINITY) > settle) {
            Py_XDECREF(corr_o);
            break;
        } else if (corr >= 0) {
            PyObject *r = PyObject_CallOneArg(missing, corr_o);
            if (r == NULL) goto error_corr;
            Py_DECREF(r);
        }
        taken += 1;
        int first = 0;
        if (has_launch) {
            int c = PySet_Contains(used, corr_o);
            if (c < 0) goto error_corr;
            first = !c;
            if (first && PySet_Add(used, corr_o) < 0) goto error_corr;
        }
        if (select_none) {
            Py_XDECREF(corr_o);
            continue;
        }
        if (in_window) {
            if (need_launch && !has_launch) {
                Py_XDECREF(corr_o);
                continue;
            }
            double ref = has_launch ? rts : ts;
            if (ref < win_lo || ref >= win_hi) {
                Py_XDECREF(corr_o);
                continue;
            }
        } else if (hta) {
            if (!has_launch) {
                Py_XDECREF(corr_o);
                continue;
            }
            Num rc_n;
            PyObject *big;
            int rr = round_to_int(rts, 1, &rc_n, &big);
            if (rr < 0) goto error_corr;
            int skip;
            if (rr == 1) {
                PyObject *lo = num_obj(incl ? &last_end : &last_start);
                skip = lo == NULL ? -1 : PyObject_RichCompareBool(big, lo, incl ? Py_GT : Py_GE);
                Py_XDECREF(lo);
                Py_DECREF(big);
                if (skip < 0) goto error_corr;
            } else if (incl) {
                skip = GT(rc_n, last_end);
            } else {
                skip = !LT(rc_n, last_start) && cmp_nn(&rc_n, &last_start) != 2;
            }
            if (skip) {
                Py_XDECREF(corr_o);
                continue;
            }
        }
        double dur = dur_col[i];
        long long e = (long long)floor(ts + dur); /* |ts + dur| < 2**54: exact */
        long long nid = name_col[i];
        PyObject *nid_o = NULL; /* created when a Python call needs it */
#define NID_O()                                                                                                         \
    do {                                                                                                               \
        if (nid_o == NULL && (nid_o = PyLong_FromLongLong(nid)) == NULL) goto error_nid;                               \
    } while (0)
        NidInfo *ni;
        {
            int slot = imap_get(&nid_map, nid);
            if (slot < 0) { /* first time in this call: the type (type_cache as Python fills it), kstats entry */
                NID_O();
                PyObject *kto = PyDict_GetItemWithError(type_cache, nid_o);
                long long kt0;
                if (kto == NULL) {
                    if (PyErr_Occurred()) goto error_nid;
                    PyObject *r = PyObject_CallOneArg(type_index, PyList_GET_ITEM(names, nid));
                    if (r == NULL) goto error_nid;
                    if (PyDict_SetItem(type_cache, nid_o, r) < 0) {
                        Py_DECREF(r);
                        goto error_nid;
                    }
                    kt0 = PyLong_AsLongLong(r);
                    Py_DECREF(r);
                } else {
                    kt0 = PyLong_AsLongLong(kto);
                }
                if (kt0 == -1 && PyErr_Occurred()) goto error_nid;
                if (kt0 < 0 || kt0 > n_types) {
                    PyErr_SetString(PyExc_IndexError, "kernel type index out of range");
                    goto error_nid;
                }
                if (nid_n == nid_cap) {
                    Py_ssize_t cap = nid_cap ? nid_cap * 2 : 64;
                    NidInfo *v = PyMem_Realloc(nids, (size_t)cap * sizeof(NidInfo));
                    if (v == NULL) {
                        PyErr_NoMemory();
                        goto error_nid;
                    }
                    nids = v;
                    nid_cap = cap;
                }
                slot = (int)nid_n++;
                NidInfo z = {nid, (int)kt0, 0, -1, NULL};
                nids[slot] = z;
                if (imap_put(&nid_map, nid, slot) < 0) goto error_nid;
            }
            ni = &nids[slot];
        }
        long long kt = ni->kt;
        int kind = kind_col[i];
        long long rd_us = e - s.i;
        if (rd_us < 0) rd_us = 0;
        if (kind == 3) {
            n_sync += 1;
            sync_us += (double)rd_us;
        } else {
            n_sel += 1;
            raw_us += dur;
            tbk[kind] += (double)rd_us;
            if (ni->ks < 0) { /* this call's per-name stats: merged into kstats in first-touch order */
                NID_O();
                PyObject *st = PyDict_GetItemWithError(kstats, nid_o);
                if (st == NULL && PyErr_Occurred()) goto error_nid;
                if (ks_n == ks_cap) {
                    Py_ssize_t cap = ks_cap ? ks_cap * 2 : 64;
                    KStat *v = PyMem_Realloc(kss, (size_t)cap * sizeof(KStat));
                    if (v == NULL) {
                        PyErr_NoMemory();
                        goto error_nid;
                    }
                    kss = v;
                    ks_cap = cap;
                }
                KStat z = {nid, st == NULL, 0, 0, 0, rd_us, rd_us};
                kss[ks_n] = z;
                ni->ks = (int)ks_n++;
            }
            {
                KStat *k = &kss[ni->ks];
                __int128 sq = (__int128)rd_us * rd_us, t1, t2;
                if (__builtin_add_overflow(k->sum, (__int128)rd_us, &t1) || __builtin_add_overflow(k->sumsq, sq, &t2)) {
                    if (ks_merge(kstats, kss, ks_n) < 0) goto error_nid; /* keep exact: fold what we have, go on */
                    t1 = rd_us;
                    t2 = sq;
                    k->cnt = 0;
                    k->mn = k->mx = rd_us;
                }
                k->cnt += 1;
                k->sum = t1;
                k->sumsq = t2;
                if (rd_us < k->mn) k->mn = rd_us;
                if (rd_us > k->mx) k->mx = rd_us;
            }
            if (kind == 0) {
                n_kern += 1;
                if (!ni->kernel_added) {
                    NID_O();
                    if (PySet_Add(kernel_ids, nid_o) < 0) goto error_nid;
                    ni->kernel_added = 1;
                }
                if (dur < tiny_us) tiny += 1;
                double occ = (double)occ_col[i];
                if (occ >= 0) {
                    n_occ += 1;
                    occ_w += occ * dur;
                    occ_t += dur;
                }
            } else if (kind == 1) {
                PyObject *md = ni->md;
                if (md == NULL) {
                    NID_O();
                    md = PyDict_GetItemWithError(dir_cache, nid_o);
                    if (md == NULL) {
                        if (PyErr_Occurred()) goto error_nid;
                        PyObject *dir = PyObject_CallOneArg(memcpy_direction, PyList_GET_ITEM(names, nid));
                        if (dir == NULL) goto error_nid;
                        PyObject *fresh = Py_BuildValue("[iid]", 0, 0, 0.0);
                        if (fresh == NULL) {
                            Py_DECREF(dir);
                            goto error_nid;
                        }
                        md = PyDict_SetDefault(mem_dir, dir, fresh); /* borrowed */
                        Py_DECREF(dir);
                        Py_DECREF(fresh);
                        if (md == NULL || PyDict_SetItem(dir_cache, nid_o, md) < 0) goto error_nid;
                    }
                    ni->md = md; /* borrowed: dir_cache keeps it for the whole call */
                }
                if (add_long(md, 0, 1) < 0 || add_long(md, 1, bytes_col[i]) < 0 || add_double(md, 2, dur) < 0)
                    goto error_nid;
            } else {
                if (add_long(memset_l, 0, 1) < 0 || add_long(memset_l, 1, bytes_col[i]) < 0 ||
                    add_double(memset_l, 2, dur) < 0)
                    goto error_nid;
            }
            if (first) {
                double rdur = rdur_l;
                /* Python: rdur >= 0 or (all_calls and rdur < 0). Spelt out for NaN (a sync call): GCC 12 -O1/-O2
                   folds that form to true for NaN (tests/unit/analysis/test_gpu_native.py caught it) */
                if (rdur == rdur && (rdur >= 0 || all_calls)) {
                    if (rdur < 0) rdur = -rdur - 1.0;
                    Num fl;
                    PyObject *big;
                    int rr = round_to_int(rts + rdur, 0, &fl, &big);
                    if (rr < 0) goto error_nid;
                    double delay;
                    if (rr == 0 && fl.i > -(1LL << 62) && fl.i < (1LL << 62)) {
                        delay = (double)(s.i - fl.i);
                    } else {
                        if (rr == 0) {
                            big = PyLong_FromLongLong(fl.i);
                            if (big == NULL) goto error_nid;
                        }
                        PyObject *so = PyLong_FromLongLong(s.i);
                        PyObject *diff = so ? PyNumber_Subtract(so, big) : NULL;
                        Py_XDECREF(so);
                        Py_DECREF(big);
                        if (diff == NULL) goto error_nid;
                        delay = PyLong_AsDouble(diff);
                        Py_DECREF(diff);
                        if (delay == -1.0 && PyErr_Occurred()) goto error_nid;
                    }
                    if (delay < 0) {
                        n_neg += 1;
                        if (clip) delay = 0.0;
                    }
                    if (dbuf_push(&delays, delay) < 0) goto error_nid;
                    cpu_sum += rdur;
                    cpu_n += 1;
                    if (dbuf_push(&launch_s, rts) < 0 || dbuf_push(&launch_e, rts + rdur) < 0) goto error_nid;
                }
                ff_c = corr;
                ff_n = nid;
                ff_d = rd_us;
            } else if (has_launch) {
                PyObject *firstarg;
                if (ff_c == corr) {
                    firstarg = Py_BuildValue("(LL)", ff_n, ff_d);
                    if (firstarg == NULL) goto error_nid;
                } else {
                    firstarg = Py_None;
                    Py_INCREF(firstarg);
                }
                NID_O();
                PyObject *r = PyObject_CallFunction(graph_op, "OOLO", corr_o, nid_o, rd_us, firstarg);
                Py_DECREF(firstarg);
                if (r == NULL) goto error_nid;
                Py_DECREF(r);
            }
        }
        /* ---- sweep: unions per kernel type and overall ---- */
        Num en = NI(e);
        if (e > s.i) {
            if (kt == n_types) {
                /* OTHER: busy, but in no kernel-type class */
            } else if (LE(s, open_e[kt])) {
                if (GT(en, open_e[kt])) open_e[kt] = en;
            } else {
                if (GT(open_e[kt], open_s[kt])) {
                    if (dbuf_push(&closed_s[kt], num_as_double(&open_s[kt])) < 0 ||
                        dbuf_push(&closed_e[kt], num_as_double(&open_e[kt])) < 0)
                        goto error_nid;
                    type_total[kt] += num_sub_as_double(&open_e[kt], &open_s[kt]);
                    n_closed += 1;
                }
                open_s[kt] = s;
                open_e[kt] = en;
            }
            if (LE(s, all_e)) {
                if (GT(en, all_e)) all_e = en;
            } else {
                if (GT(all_e, all_s)) {
                    union_us += num_sub_as_double(&all_e, &all_s);
                    if (!gpu_lo.is_int && gpu_lo.f != gpu_lo.f) gpu_lo = all_s;
                    gpu_hi = all_e;
                }
                all_s = s;
                all_e = en;
            }
        }
        if (kind == 3) {
            Py_XDECREF(nid_o);
            Py_XDECREF(corr_o);
            continue;
        }
        /* ---- HTA idle breakdown per stream (this call's streams in C, merged in first-touch order) ---- */
        {
            long long key = stream_col[i];
            int slot = imap_get(&stream_map, key);
            if (slot < 0 && ss_touch(stream_state, &sset, &stream_map, key, &slot) < 0) goto error_nid;
            if (!sset.v[slot].present) { /* as Python's state_get(stream) is None */
                if (PyDict_GET_SIZE(stream_state) + n_new_streams >= MAX_STREAMS) {
                    n_fold += 1;
                    key = OTHER_STREAM;
                    slot = imap_get(&stream_map, key);
                    if (slot < 0 && ss_touch(stream_state, &sset, &stream_map, key, &slot) < 0) goto error_nid;
                }
                if (!sset.v[slot].present) { /* a new stream: [e, 0.0, 0.0, 0.0, ts, dur, corr, nid] */
                    StreamSt *q = &sset.v[slot];
                    q->present = 1;
                    q->is_new = 1;
                    n_new_streams += 1;
                    q->end = e;
                    q->w[0] = q->w[1] = q->w[2] = 0.0;
                    q->ts = ts;
                    q->dur = dur;
                    q->corr = corr;
                    q->nid = nid;
                    Py_XDECREF(nid_o);
                    Py_XDECREF(corr_o);
                    continue;
                }
            }
            StreamSt *q = &sset.v[slot];
            long long gap = s.i - q->end;
            if (gap > 0) {
                int launched_after = 0;
                if (has_launch) {
                    Num rc_n;
                    PyObject *big;
                    int rr = round_to_int(rts, 1, &rc_n, &big);
                    if (rr < 0) goto error_nid;
                    if (rr == 1) {
                        PyObject *po = PyLong_FromLongLong(q->end);
                        launched_after = po == NULL ? -1 : PyObject_RichCompareBool(big, po, Py_GT);
                        Py_XDECREF(po);
                        Py_DECREF(big);
                        if (launched_after < 0) goto error_nid;
                    } else {
                        launched_after = rc_n.i > q->end;
                    }
                }
                Num g = NI(gap);
                if (launched_after) q->w[0] += (double)gap;
                else if (LT(g, thr_n)) q->w[1] += (double)gap;
                else q->w[2] += (double)gap;
                q->end = e;
            } else {
                if (e > q->end) q->end = e;
                if (ts == q->ts && dur == q->dur && corr == q->corr && nid == q->nid) n_dup += 1;
            }
            q->ts = ts;
            q->dur = dur;
            q->corr = corr;
            q->nid = nid;
        }
        Py_XDECREF(nid_o);
        Py_XDECREF(corr_o);
        continue;
    error_nid:
        Py_XDECREF(nid_o);
    error_corr:
        Py_XDECREF(corr_o);
        goto error;
    }

    /* ---- success: what _add_ops writes back, then its tuple ---- */
    {
        if (ks_merge(kstats, kss, ks_n) < 0 || ss_merge(stream_state, &sset) < 0) goto error;
        open_s[n_types + 1] = all_s;
        open_e[n_types + 1] = all_e;
        for (Py_ssize_t k = 0; k < n_types + 2; k++) {
            if (set_item(open_s_l, k, num_obj(&open_s[k])) < 0 || set_item(open_e_l, k, num_obj(&open_e[k])) < 0)
                goto error_written;
        }
        inplace_loaded = 0;
        for (Py_ssize_t k = 0; k < n_types; k++) {
            if (set_item(type_total_l, k, PyFloat_FromDouble(type_total[k])) < 0) goto error;
            if (merged_extend(PyList_GET_ITEM(closed_l, k), &closed_s[k], &closed_e[k]) < 0) goto error;
        }
        for (Py_ssize_t k = 0; k < 3; k++)
            if (set_item(time_by_kind, k, PyFloat_FromDouble(tbk[k])) < 0) goto error;
        PyObject *u = PyFloat_FromDouble(union_us);
        if (u == NULL || PyObject_SetAttrString(acc, "union_us", u) < 0) {
            Py_XDECREF(u);
            goto error;
        }
        Py_DECREF(u);
        PyObject *lo = num_obj(&gpu_lo), *hi = num_obj(&gpu_hi);
        int bad = lo == NULL || hi == NULL || PyObject_SetAttrString(acc, "gpu_lo", lo) < 0 ||
                  PyObject_SetAttrString(acc, "gpu_hi", hi) < 0;
        Py_XDECREF(lo);
        Py_XDECREF(hi);
        if (bad) goto error;
        PyObject *d = dbuf_array(&delays), *ls = dbuf_array(&launch_s), *le = dbuf_array(&launch_e);
        if (d == NULL || ls == NULL || le == NULL) {
            Py_XDECREF(d);
            Py_XDECREF(ls);
            Py_XDECREF(le);
            goto error;
        }
        result = Py_BuildValue("(LLLLLdddLLLddLLLNNN)", taken, n_sel, n_kern, tiny, n_occ, occ_w, occ_t, cpu_sum, cpu_n,
                               n_neg, n_sync, sync_us, raw_us, n_dup, n_fold, n_closed, d, ls, le);
        /* types as _add_ops: counters int; occ_w, occ_t, cpu_sum, sync_us, raw_us float */
    }
    goto done;

decline:
    Py_INCREF(Py_NotImplemented);
    result = Py_NotImplemented;
    goto done;

error:
    /* Python's loop had already changed these in place when it raised: keep them equal */
    if (inplace_loaded) {
        PyObject *exc_type, *exc_value, *exc_tb;
        PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
        ks_merge(kstats, kss, ks_n);
        PyErr_Clear();
        ss_merge(stream_state, &sset);
        PyErr_Clear();
        for (Py_ssize_t k = 0; k < n_types; k++) {
            set_item(open_s_l, k, num_obj(&open_s[k]));
            set_item(open_e_l, k, num_obj(&open_e[k]));
            set_item(type_total_l, k, PyFloat_FromDouble(type_total[k]));
            merged_extend(PyList_GET_ITEM(closed_l, k), &closed_s[k], &closed_e[k]);
        }
        for (Py_ssize_t k = 0; k < 3; k++) set_item(time_by_kind, k, PyFloat_FromDouble(tbk[k]));
        PyErr_Clear();
        PyErr_Restore(exc_type, exc_value, exc_tb);
    }
error_written:
    result = NULL;

done:
    col_release(&cs);
    col_release(&cts);
    col_release(&cdur);
    col_release(&cname);
    col_release(&ckind);
    col_release(&cstream);
    col_release(&ccorr);
    col_release(&cbytes);
    col_release(&cocc);
    PyMem_Free(idx);
    imap_free(&nid_map);
    imap_free(&stream_map);
    PyMem_Free(nids);
    PyMem_Free(kss);
    PyMem_Free(sset.v);
    PyMem_Free(delays.v);
    PyMem_Free(launch_s.v);
    PyMem_Free(launch_e.v);
    for (int k = 0; k < MAXT; k++) {
        PyMem_Free(closed_s[k].v);
        PyMem_Free(closed_e[k].v);
    }
    Py_XDECREF(sel);
    Py_XDECREF(mode);
    Py_XDECREF(names);
    Py_XDECREF(type_cache);
    Py_XDECREF(kstats);
    Py_XDECREF(kernel_ids);
    Py_XDECREF(time_by_kind);
    Py_XDECREF(memset_l);
    Py_XDECREF(dir_cache);
    Py_XDECREF(mem_dir);
    Py_XDECREF(open_s_l);
    Py_XDECREF(open_e_l);
    Py_XDECREF(closed_l);
    Py_XDECREF(type_total_l);
    Py_XDECREF(stream_state);
    Py_XDECREF(launches);
    Py_XDECREF(used);
    Py_XDECREF(missing);
    Py_XDECREF(graph_op);
    Py_XDECREF(type_index);
    Py_XDECREF(memcpy_direction);
    Py_XDECREF(kernel_types);
    Py_XDECREF(classify);
    Py_XDECREF(gpu);
    return result;
}

/* ---- TimeBins._add (profstack/analysis/timebins.py): busy time of intervals over the grid's bins ---- */

/* a float column: an array('d') (buffer) or a list of floats; 0 ok, 1 unsupported */
typedef struct {
    Py_buffer b;
    int has_buf;
    PyObject *fast;
    double *tmp;
    const double *v;
    Py_ssize_t n;
} FCol;

static int fcol_get(PyObject *o, FCol *c) {
    memset(c, 0, sizeof(*c));
    if (PyList_CheckExact(o)) {
        c->n = PyList_GET_SIZE(o);
        c->tmp = PyMem_Malloc((size_t)(c->n ? c->n : 1) * sizeof(double));
        if (c->tmp == NULL) return 1;
        for (Py_ssize_t j = 0; j < c->n; j++) {
            PyObject *x = PyList_GET_ITEM(o, j);
            if (!PyFloat_CheckExact(x)) return 1; /* an int time: Python's int arithmetic, not ours */
            c->tmp[j] = PyFloat_AS_DOUBLE(x);
        }
        c->v = c->tmp;
        return 0;
    }
    if (PyObject_GetBuffer(o, &c->b, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        return 1;
    }
    c->has_buf = 1;
    if (c->b.itemsize != 8 || c->b.format == NULL || strcmp(c->b.format, "d") != 0) return 1;
    c->v = c->b.buf;
    c->n = c->b.len / 8;
    return 0;
}

static void fcol_release(FCol *c) {
    if (c->has_buf) PyBuffer_Release(&c->b);
    PyMem_Free(c->tmp);
    c->has_buf = 0;
    c->tmp = NULL;
}

static PyObject *bins_add(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "bins_add(series, width, first, starts, ends)");
        return NULL;
    }
    PyObject *series = args[0];
    PyObject *result = NULL;
    double *bins = NULL;
    FCol cs, ce;
    memset(&cs, 0, sizeof(cs));
    memset(&ce, 0, sizeof(ce));
    if (!PyList_CheckExact(series) || !PyFloat_CheckExact(args[1]) || !PyLong_CheckExact(args[2])) goto decline;
    double w = PyFloat_AS_DOUBLE(args[1]);
    int ovf = 0;
    long long f = PyLong_AsLongLongAndOverflow(args[2], &ovf);
    if (ovf || (f == -1 && PyErr_Occurred()) || f > (1LL << 52) || f < -(1LL << 52)) {
        PyErr_Clear();
        goto decline;
    }
    if (!(w > 0) || isinf(w)) goto decline;
    if (fcol_get(args[3], &cs) || fcol_get(args[4], &ce) || cs.n != ce.n) goto decline;
    Py_ssize_t nb = PyList_GET_SIZE(series);
    if (nb == 0) goto decline;
    bins = PyMem_Malloc((size_t)nb * sizeof(double));
    if (bins == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t b = 0; b < nb; b++) {
        PyObject *x = PyList_GET_ITEM(series, b);
        if (!PyFloat_CheckExact(x)) goto decline;
        bins[b] = PyFloat_AS_DOUBLE(x);
    }
    for (Py_ssize_t j = 0; j < cs.n; j++) /* math.floor raises on these: let Python raise it */
        if (!isfinite(cs.v[j]) || !isfinite(ce.v[j])) goto decline;
    if (nb - 1 + f > (1LL << 53)) goto decline;
    {
        const double inv = 1.0 / w;
        if (!isfinite(inv)) goto decline; /* a subnormal width: lo * inv would be inf or NaN, cast to an integer */
        const long long last = (long long)nb - 1;
        const double fd = (double)f, hi_bin = (double)(f + last);
        for (Py_ssize_t j = 0; j < cs.n; j++) {
            double lo = cs.v[j], hi = ce.v[j];
            double bl = floor(lo * inv), bh = floor(hi * inv);
            if (!isfinite(bl) || !isfinite(bh)) goto decline; /* never cast inf or NaN to an integer */
            if (bl == bh && fd <= bl && bl <= hi_bin) {
                long long k = (long long)bl - f;
                bins[k] += hi - lo;
                continue;
            }
            /* i, j clamped to [0, last]; beyond +-2**53 only the side matters */
            double id = bl - fd, jd = bh - fd;
            long long i = id < 0 ? 0 : (id > (double)last ? last : (long long)id);
            long long jj = jd < 0 ? 0 : (jd > (double)last ? last : (long long)jd);
            if (i == jj) {
                bins[i] += hi - lo;
                continue;
            }
            bins[i] += (double)(f + i + 1) * w - lo;
            for (long long b = i + 1; b < jj; b++) bins[b] += w;
            bins[jj] += hi - (double)(f + jj) * w;
        }
    }
    for (Py_ssize_t b = 0; b < nb; b++) {
        PyObject *x = PyList_GET_ITEM(series, b);
        if (PyFloat_AS_DOUBLE(x) == bins[b] && !(bins[b] == 0 && signbit(bins[b]) != signbit(PyFloat_AS_DOUBLE(x))))
            continue;
        PyObject *nx = PyFloat_FromDouble(bins[b]);
        if (nx == NULL) goto done;
        PyList_SetItem(series, b, nx);
    }
    Py_INCREF(Py_None);
    result = Py_None;
    goto done;
decline:
    Py_INCREF(Py_NotImplemented);
    result = Py_NotImplemented;
done:
    fcol_release(&cs);
    fcol_release(&ce);
    PyMem_Free(bins);
    return result;
}

/* ---- intervals.union and intervals.partition_by_set (profstack/analysis/intervals.py) ---- */

typedef struct {
    double a, b;
} Pair;

static int pair_cmp(const void *x, const void *y) { /* (start, end), as Python sorts tuples */
    const Pair *p = x, *q = y;
    if (p->a < q->a) return -1;
    if (p->a > q->a) return 1;
    return p->b < q->b ? -1 : (p->b > q->b ? 1 : 0);
}

typedef struct {
    double t;
    long long d;
} Point;

static int point_cmp(const void *x, const void *y) { /* (time, delta): at equal times an end sorts first */
    const Point *p = x, *q = y;
    if (p->t < q->t) return -1;
    if (p->t > q->t) return 1;
    return p->d < q->d ? -1 : (p->d > q->d ? 1 : 0);
}

static int plain(double v) { return !isnan(v) && !(v == 0 && signbit(v)); } /* NaN / -0.0: let Python decide */

/* the (starts, ends) columns of a list of Merged; 0 ok, 1 unsupported */
static int merged_cols(PyObject *sets, FCol **cols, Py_ssize_t *n_sets, Py_ssize_t *total) {
    *n_sets = PyList_CheckExact(sets) ? PyList_GET_SIZE(sets) : -1;
    if (*n_sets < 0) return 1;
    *cols = PyMem_Calloc((size_t)(*n_sets ? *n_sets : 1) * 2, sizeof(FCol));
    if (*cols == NULL) return 1;
    *total = 0;
    for (Py_ssize_t k = 0; k < *n_sets; k++) {
        PyObject *m = PyList_GET_ITEM(sets, k);
        PyObject *st = PyObject_GetAttrString(m, "starts"), *en = PyObject_GetAttrString(m, "ends");
        int bad = st == NULL || en == NULL || fcol_get(st, &(*cols)[2 * k]) || fcol_get(en, &(*cols)[2 * k + 1]);
        Py_XDECREF(st);
        Py_XDECREF(en);
        if (bad) {
            PyErr_Clear();
            return 1;
        }
        if ((*cols)[2 * k].n != (*cols)[2 * k + 1].n) return 1;
        for (Py_ssize_t j = 0; j < (*cols)[2 * k].n; j++)
            if (!plain((*cols)[2 * k].v[j]) || !plain((*cols)[2 * k + 1].v[j])) return 1;
        *total += (*cols)[2 * k].n;
    }
    return 0;
}

static void merged_release(FCol *cols, Py_ssize_t n_sets) {
    if (cols == NULL) return;
    for (Py_ssize_t k = 0; k < 2 * n_sets; k++) fcol_release(&cols[k]);
    PyMem_Free(cols);
}

static PyObject *union_spans(PyObject *module, PyObject *sets) {
    (void)module;
    FCol *cols = NULL;
    Py_ssize_t n_sets = 0, total = 0;
    Pair *v = NULL;
    PyObject *result = NULL;
    if (merged_cols(sets, &cols, &n_sets, &total)) goto decline;
    v = PyMem_Malloc((size_t)(total ? total : 1) * sizeof(Pair));
    if (v == NULL) goto decline;
    Py_ssize_t n = 0;
    for (Py_ssize_t k = 0; k < n_sets; k++)
        for (Py_ssize_t j = 0; j < cols[2 * k].n; j++) {
            v[n].a = cols[2 * k].v[j];
            v[n].b = cols[2 * k + 1].v[j];
            n++;
        }
    qsort(v, (size_t)n, sizeof(Pair), pair_cmp);
    Py_ssize_t m = 0; /* merged in place into v[0 .. m) */
    for (Py_ssize_t j = 0; j < n; j++) {
        double a = v[j].a, b = v[j].b;
        if (b <= a) continue;
        if (m && a <= v[m - 1].b) {
            if (b > v[m - 1].b) v[m - 1].b = b;
        } else {
            v[m].a = a;
            v[m].b = b;
            m++;
        }
    }
    {
        DBuf s = {0}, e = {0};
        int bad = 0;
        for (Py_ssize_t j = 0; j < m && !bad; j++) bad = dbuf_push(&s, v[j].a) < 0 || dbuf_push(&e, v[j].b) < 0;
        if (!bad) {
            PyObject *sa = dbuf_array(&s), *ea = dbuf_array(&e);
            if (sa && ea) result = PyTuple_Pack(2, sa, ea);
            Py_XDECREF(sa);
            Py_XDECREF(ea);
        }
        PyMem_Free(s.v);
        PyMem_Free(e.v);
    }
    goto done;
decline:
    PyErr_Clear();
    Py_INCREF(Py_NotImplemented);
    result = Py_NotImplemented;
done:
    merged_release(cols, n_sets);
    PyMem_Free(v);
    return result;
}

static PyObject *partition(PyObject *module, PyObject *sets) {
    (void)module;
    FCol *cols = NULL;
    Py_ssize_t n_sets = 0, total = 0;
    Point *v = NULL;
    PyObject *result = NULL;
    long long *masks = NULL;
    double *sums = NULL;
    IMap map = {0};
    if (merged_cols(sets, &cols, &n_sets, &total) || n_sets > 62) goto decline;
    v = PyMem_Malloc((size_t)(total ? 2 * total : 1) * sizeof(Point));
    masks = PyMem_Malloc((size_t)(total ? 2 * total : 1) * sizeof(long long));
    sums = PyMem_Malloc((size_t)(total ? 2 * total : 1) * sizeof(double));
    if (v == NULL || masks == NULL || sums == NULL) goto decline;
    Py_ssize_t n = 0;
    for (Py_ssize_t k = 0; k < n_sets; k++) {
        long long bit = 1LL << k;
        for (Py_ssize_t j = 0; j < cols[2 * k].n; j++) {
            v[n].t = cols[2 * k].v[j];
            v[n++].d = bit;
        }
        for (Py_ssize_t j = 0; j < cols[2 * k + 1].n; j++) {
            v[n].t = cols[2 * k + 1].v[j];
            v[n++].d = -bit;
        }
    }
    qsort(v, (size_t)n, sizeof(Point), point_cmp);
    long long running = 0;
    double prev_t = 0.0;
    Py_ssize_t n_out = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        double t = v[j].t;
        if (running > 0 && t > prev_t) {
            int slot = imap_get(&map, running);
            if (slot < 0) {
                slot = (int)n_out;
                masks[n_out] = running;
                sums[n_out++] = 0.0;
                if (imap_put(&map, running, slot) < 0) goto error;
            }
            sums[slot] = sums[slot] + (t - prev_t);
        }
        running += v[j].d;
        prev_t = t;
    }
    result = PyList_New(n_out);
    if (result == NULL) goto error;
    for (Py_ssize_t j = 0; j < n_out; j++) {
        PyObject *it = Py_BuildValue("(Ld)", masks[j], sums[j]);
        if (it == NULL) {
            Py_CLEAR(result);
            goto error;
        }
        PyList_SET_ITEM(result, j, it);
    }
    goto done;
decline:
    PyErr_Clear();
    Py_INCREF(Py_NotImplemented);
    result = Py_NotImplemented;
    goto done;
error:
    Py_CLEAR(result);
done:
    merged_release(cols, n_sets);
    PyMem_Free(v);
    PyMem_Free(masks);
    PyMem_Free(sums);
    imap_free(&map);
    return result;
}

/* ---- _Parser._consume_events (profstack/analysis/parse.py): decoded events into columns and aggregates ---- */

/* a growing buffer of fixed-size items, appended to an array.array at the end (frombytes) */
typedef struct {
    char *v;
    Py_ssize_t n, cap, size;
    PyObject *arr; /* the target array (borrowed from its owner, kept alive by an extra reference) */
} ABuf;

static int abuf_push(ABuf *b, const void *x) {
    if (b->n == b->cap) {
        Py_ssize_t cap = b->cap ? b->cap * 2 : 1024;
        char *v = PyMem_Realloc(b->v, (size_t)(cap * b->size));
        if (v == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->v = v;
        b->cap = cap;
    }
    memcpy(b->v + b->n * b->size, x, (size_t)b->size);
    b->n++;
    return 0;
}

static int abuf_flush(ABuf *b) {
    if (b->n == 0 || b->arr == NULL) return 0;
    PyObject *bytes = PyBytes_FromStringAndSize(b->v, b->n * b->size);
    if (bytes == NULL) return -1;
    PyObject *r = PyObject_CallMethod(b->arr, "frombytes", "O", bytes);
    Py_DECREF(bytes);
    if (r == NULL) return -1;
    Py_DECREF(r);
    b->n = 0;
    return 0;
}

/* the target must be an array of this typecode and item size (what _consume_events appends to) */
static int abuf_init(ABuf *b, PyObject *arr, const char *fmt, Py_ssize_t size) {
    memset(b, 0, sizeof(*b));
    b->size = size;
    Py_buffer view;
    if (PyObject_GetBuffer(arr, &view, PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        return 1;
    }
    int ok = view.itemsize == size && view.format != NULL && strcmp(view.format, fmt) == 0;
    PyBuffer_Release(&view);
    if (!ok) return 1;
    Py_INCREF(arr);
    b->arr = arr;
    return 0;
}

static void abuf_free(ABuf *b) {
    PyMem_Free(b->v);
    Py_XDECREF(b->arr);
    memset(b, 0, sizeof(*b));
}

/* the slot offsets of the msgspec structs parse.Event and parse.Args (member descriptors) */
static PyObject *EventT = NULL, *ArgsT = NULL;
static Py_ssize_t o_ph, o_cat, o_name, o_ts, o_dur, o_args, o_corr, o_stream, o_bytes, o_occ, o_dev;

static int slot_offset(PyObject *type, const char *name, Py_ssize_t *off) {
    PyObject *d = PyDict_GetItemString(((PyTypeObject *)type)->tp_dict, name); /* borrowed */
    if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type)) return -1;
    PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
    if (m->type != T_OBJECT_EX && m->type != T_OBJECT) return -1;
    *off = m->offset;
    return 0;
}

static int struct_init(void) { /* 0 ok, 1 unsupported (layout not as expected), -1 error */
    if (EventT != NULL) return 0;
    PyObject *parse = PyImport_ImportModule("profstack.analysis.parse");
    if (parse == NULL) return -1;
    PyObject *ev = PyObject_GetAttrString(parse, "Event"), *ar = PyObject_GetAttrString(parse, "Args");
    Py_DECREF(parse);
    if (ev == NULL || ar == NULL || !PyType_Check(ev) || !PyType_Check(ar)) {
        Py_XDECREF(ev);
        Py_XDECREF(ar);
        return -1;
    }
    if (slot_offset(ev, "ph", &o_ph) || slot_offset(ev, "cat", &o_cat) || slot_offset(ev, "name", &o_name) ||
        slot_offset(ev, "ts", &o_ts) || slot_offset(ev, "dur", &o_dur) || slot_offset(ev, "args", &o_args) ||
        slot_offset(ar, "correlation", &o_corr) || slot_offset(ar, "stream", &o_stream) ||
        slot_offset(ar, "bytes", &o_bytes) || slot_offset(ar, "occupancy", &o_occ) || slot_offset(ar, "device", &o_dev)) {
        Py_DECREF(ev);
        Py_DECREF(ar);
        return 1;
    }
    EventT = ev;
    ArgsT = ar;
    return 0;
}

#define FLD(o, off) (*(PyObject **)((char *)(o) + (off)))

static int int64_of(PyObject *o, long long *v) { /* an int that fits int64: 0; else -1 with OverflowError */
    int ovf = 0;
    *v = PyLong_AsLongLongAndOverflow(o, &ovf);
    if (ovf) {
        PyErr_SetString(PyExc_OverflowError, "int too big to convert"); /* array('q')'s words */
        return -1;
    }
    return (*v == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int is_ascii_eq(PyObject *s, const char *lit, Py_ssize_t n) {
    return PyUnicode_IS_COMPACT_ASCII(s) && PyUnicode_GET_LENGTH(s) == n && memcmp(PyUnicode_DATA(s), lit, (size_t)n) == 0;
}

static int add_attr_long(PyObject *o, const char *name, long long v) { /* o.name += v */
    if (v == 0) return 0;
    PyObject *cur = PyObject_GetAttrString(o, name);
    if (cur == NULL) return -1;
    PyObject *vo = PyLong_FromLongLong(v);
    PyObject *r = vo ? PyNumber_InPlaceAdd(cur, vo) : NULL;
    Py_DECREF(cur);
    Py_XDECREF(vo);
    if (r == NULL) return -1;
    int rc = PyObject_SetAttrString(o, name, r);
    Py_DECREF(r);
    return rc;
}

static long long const_ll(PyObject *mod, const char *name, int *bad) {
    PyObject *v = PyObject_GetAttrString(mod, name);
    if (v == NULL) {
        *bad = 1;
        return 0;
    }
    long long x = PyLong_AsLongLong(v);
    Py_DECREF(v);
    if (x == -1 && PyErr_Occurred()) *bad = 1;
    return x;
}

/* parser._bounded(name) for a name longer than max (new reference in *bname), else *bname = NULL; -1 on error */
static int bound_name(PyObject *parser, PyObject *name, long long max, PyObject **bname) {
    *bname = NULL;
    if (PyUnicode_GET_LENGTH(name) <= max) return 0;
    *bname = PyObject_CallMethod(parser, "_bounded", "O", name);
    return *bname == NULL ? -1 : 0;
}

/* As _consume_events looks up a per-name record: table[name]; for a new name, the long one bounded and looked up
   again; still new, parser.<make>(name). A new reference (NULL on error); *bname: the bounded name, if made. */
static PyObject *agg_record(PyObject *parser, PyObject *table, PyObject *name, long long max, const char *make,
                            PyObject **bname) {
    *bname = NULL;
    PyObject *rec = PyDict_GetItemWithError(table, name);
    if (rec == NULL) {
        if (PyErr_Occurred() || bound_name(parser, name, max, bname) < 0) return NULL;
        if (*bname != NULL) {
            rec = PyDict_GetItemWithError(table, *bname);
            if (rec == NULL && PyErr_Occurred()) return NULL;
        }
        if (rec == NULL) return PyObject_CallMethod(parser, make, "O", *bname ? *bname : name);
    }
    Py_INCREF(rec);
    return rec;
}

/* args.stream as a GPU row's stream: an int within int32 as it is, anything else through parser._stream_of */
static int stream_id(PyObject *parser, PyObject *st, long long *out) {
    if (PyLong_CheckExact(st)) {
        int ovf = 0;
        long long sv = PyLong_AsLongLongAndOverflow(st, &ovf);
        if (!ovf && sv >= INT32_MIN && sv <= INT32_MAX) {
            *out = sv;
            return 0;
        }
        PyErr_Clear();
    }
    PyObject *r = PyObject_CallMethod(parser, "_stream_of", "O", st);
    if (r == NULL) return -1;
    int rr = int64_of(r, out);
    Py_DECREF(r);
    return rr;
}

enum { NB_OPS = 9, B_LCORR = 9, B_LTS, B_LDUR, B_CPU, B_DLTS, B_DLDUR, B_SNAME, B_STS, B_SDUR, B_ANAME, B_AGPU, B_ATS,
       B_ADUR, B_GSTS, B_GSDUR, B_MTS, B_MTID, B_MDEV, B_MBYTES, B_MALLOC, B_MRES, B_MOP, B_LOGTS, B_LOGDUR, B_LOGNAME, B_LOGTID, NBUF };

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
    /* from the reader only (mem_read): args' [memory] fields (mem_set: a bit per field present and not null,
       in the order of mem) and the tid, for a [memory] event added without a parse.Event */
    signed char mem_read, mem_set;
    signed char tid_t; /* 0 None (absent, null), 1 int (tid_i), 2 float (tid_f), 3 an ASCII str (tid_s, tid_n) */
    long long mem[5];  /* Bytes, Total Allocated, Total Reserved, Device Type, Device Id */
    long long tid_i;
    double tid_f;
    const char *tid_s;
    Py_ssize_t tid_n;
} Rec;

/* the event a Python helper takes (new reference): the Event itself, or the one parse._ONE_DECODER decodes from
   the event's own bytes (the batch decoded as list[Event] holds exactly that Event) */
static PyObject *rec_event(const Rec *r, PyObject *one_decoder) {
    if (r->ev != NULL) {
        Py_INCREF(r->ev);
        return r->ev;
    }
    return PyObject_CallMethod(one_decoder, "decode", "y#", r->src, r->len);
}

/* args.stream as stream_id reads it: an int within int32 as it is, anything else through parser._stream_of */
static int rec_stream_id(PyObject *parser, const Rec *r, long long *out) {
    if (r->stream_t == 1 && r->stream >= INT32_MIN && r->stream <= INT32_MAX) {
        *out = r->stream;
        return 0;
    }
    PyObject *st;
    if (r->stream_o != NULL) {
        st = r->stream_o;
        Py_INCREF(st);
    } else if (r->stream_t == 1) {
        if ((st = PyLong_FromLongLong(r->stream)) == NULL) return -1;
    } else {
        st = Py_None;
        Py_INCREF(st);
    }
    int rc = stream_id(parser, st, out);
    Py_DECREF(st);
    return rc;
}

/* the reader's tid as parse.Event holds it (a new reference): an int, a float, an ASCII str or None */
static PyObject *tid_key(const Rec *r) {
    switch (r->tid_t) {
    case 1: return PyLong_FromLongLong(r->tid_i);
    case 2: return PyFloat_FromDouble(r->tid_f);
    case 3: return PyUnicode_FromStringAndSize(r->tid_s, r->tid_n);
    default: return Py_NewRef(Py_None);
    }
}

/* One timed CPU op into the op log (memory.OpLog): its name's index (a name met first: op_log._new_name, -1 for
   an allocation primitive, which is not logged) and its tid's (the last tid is remembered: ops come in runs per
   thread). b: the log's four buffers (ts, dur, name, tid). room: the log holds fewer than max_ops. 0 logged or
   skipped, 1 full (or too many names or threads: the caller drops the log), -1 error. */
static int log_op(PyObject *op_log, PyObject *name_ids, PyObject *tid_ids, PyObject *tids, const Rec *r,
                  signed char *lt, long long *li, const char **ls, Py_ssize_t *ln, int *lidx, ABuf *b, int room) {
    long long ni;
    PyObject *nv = PyDict_GetItemWithError(name_ids, r->name); /* borrowed */
    if (nv == NULL) {
        if (PyErr_Occurred()) return -1;
        nv = PyObject_CallMethod(op_log, "_new_name", "O", r->name);
        if (nv == NULL) return -1;
        int bad = int64_of(nv, &ni) < 0;
        Py_DECREF(nv);
        if (bad) return -1;
        if (ni < -1) return 1; /* too many names */
    } else if (int64_of(nv, &ni) < 0) {
        return -1;
    }
    if (ni < 0) return 0; /* a primitive */
    int same = *lt == r->tid_t && (r->tid_t == 0 || (r->tid_t == 1 && *li == r->tid_i) ||
                                   (r->tid_t == 3 && *ln == r->tid_n && memcmp(*ls, r->tid_s, (size_t)r->tid_n) == 0));
    if (!same) {
        PyObject *key = tid_key(r);
        if (key == NULL) return -1;
        PyObject *tv = PyDict_GetItemWithError(tid_ids, key); /* borrowed */
        long long ti;
        if (tv == NULL) {
            if (PyErr_Occurred() || PyList_GET_SIZE(tids) >= INT32_MAX) {
                Py_DECREF(key);
                return PyErr_Occurred() ? -1 : 1;
            }
            ti = (long long)PyList_GET_SIZE(tids);
            PyObject *iv = PyLong_FromLongLong(ti);
            int rc = iv == NULL || PyList_Append(tids, key) < 0 || PyDict_SetItem(tid_ids, key, iv) < 0;
            Py_XDECREF(iv);
            Py_DECREF(key);
            if (rc) return -1;
        } else {
            Py_DECREF(key);
            if (int64_of(tv, &ti) < 0) return -1;
        }
        *lt = r->tid_t;
        *li = r->tid_i;
        *ls = r->tid_s;
        *ln = r->tid_n;
        *lidx = (int)ti;
    }
    if (!room) return 1;
    int n32 = (int)ni;
    if (abuf_push(&b[0], &r->ts) < 0 || abuf_push(&b[1], &r->dur) < 0 || abuf_push(&b[2], &n32) < 0 ||
        abuf_push(&b[3], lidx) < 0)
        return -1;
    return 0;
}

/* The loop of _consume_events over n records. count_events: also fd.events += n first (decode_consume, whose
   caller has not counted them). Returns (launches, X events, runtime calls), NotImplemented (nothing changed)
   or NULL. */
static PyObject *consume_core(PyObject *parser, const Rec *recs, Py_ssize_t n, PyObject *const *arrays,
                              int count_events) {
    PyObject *result = NULL, *parse = NULL, *fd = NULL, *cat_kind = NULL, *memory_event_name = NULL;
    PyObject *cpu_agg = NULL, *rt_agg = NULL, *ids = NULL, *symbols = NULL, *feed = NULL, *ops = NULL;
    PyObject *devices = NULL, *other_name = NULL, *first_gpu = NULL, *one_decoder = NULL;
    PyObject *memory = NULL, *mem_tids = NULL;
    /* parser.op_log (memory.OpLog) while it is kept: the reader's timed CPU ops, for memory.attribute_log */
    PyObject *op_log = NULL, *log_name_ids = NULL, *log_tid_ids = NULL, *log_tids = NULL;
    Py_ssize_t log_len = 0, log_max = 0;
    int log_on = 0, log_full = 0;
    struct {
        signed char t; /* the last tid's Rec.tid_t (-1: none yet), its value and log index */
        long long i;
        const char *s;
        Py_ssize_t n;
        int idx;
    } last_tid = {-1, 0, NULL, 0, 0};
    Py_ssize_t mem_len = 0, mem_max = 0; /* memory's events before this batch, memory.MAX_EVENTS */
    long long mem_seen = 0;              /* [memory] events added here (memory.seen) */
    ABuf buf[NBUF];
    memset(buf, 0, sizeof(buf));
    int loaded = 0;
    long long no_ph = 0, begin_end = 0, n_kernels = 0, n_memcpy = 0, n_memset = 0, flow_s = 0, flow_f = 0;
    long long n_launch = 0, n_x = 0, n_rt = 0;

    /* ---- constants and containers, read as _consume_events reads them ---- */
    parse = PyImport_ImportModule("profstack.analysis.parse");
    if (parse == NULL) goto error;
    int bad = 0;
    const long long K_CPU = const_ll(parse, "K_CPU", &bad), K_RUNTIME = const_ll(parse, "K_RUNTIME", &bad),
                    K_KERNEL = const_ll(parse, "K_KERNEL", &bad), K_MEMCPY = const_ll(parse, "K_MEMCPY", &bad),
                    K_MEMSET = const_ll(parse, "K_MEMSET", &bad), K_ANNOT = const_ll(parse, "K_ANNOT", &bad),
                    K_GPU_ANNOT = const_ll(parse, "K_GPU_ANNOT", &bad), K_GPU_SYNC = const_ll(parse, "K_GPU_SYNC", &bad),
                    F_STEP = const_ll(parse, "F_STEP", &bad), F_DATALOADER = const_ll(parse, "F_DATALOADER", &bad),
                    MAX_NAME = const_ll(parse, "MAX_NAME_CHARS", &bad), MAX_DEVICES = const_ll(parse, "MAX_DEVICES", &bad),
                    OP_KERNEL = const_ll(parse, "OP_KERNEL", &bad), OP_MEMCPY = const_ll(parse, "OP_MEMCPY", &bad),
                    OP_MEMSET = const_ll(parse, "OP_MEMSET", &bad), OP_SYNC = const_ll(parse, "OP_SYNC", &bad);
    if (bad) goto error;
    if (!(K_CPU == 1 && K_RUNTIME == 2 && K_KERNEL == 3 && K_MEMCPY == 4 && K_MEMSET == 5 && K_ANNOT == 6 &&
          K_GPU_ANNOT == 7 && K_GPU_SYNC == 8))
        goto decline; /* the dispatch below is written for these */
    double time_limit;
    {
        PyObject *v = PyObject_GetAttrString(parse, "MAX_TIME_US");
        if (v == NULL) goto error;
        time_limit = PyFloat_AsDouble(v);
        Py_DECREF(v);
        if (time_limit == -1.0 && PyErr_Occurred()) goto error;
        if (!(time_limit <= LIM53)) goto decline; /* ceil(ts) exact in int64 */
    }
    if ((cat_kind = PyObject_GetAttrString(parse, "CAT_KIND")) == NULL) goto error;
    if ((memory_event_name = PyObject_GetAttrString(parse, "MEMORY_EVENT")) == NULL) goto error;
    if ((other_name = PyObject_GetAttrString(parse, "OTHER_NAME")) == NULL) goto error;
    if ((one_decoder = PyObject_GetAttrString(parse, "_ONE_DECODER")) == NULL) goto error;
    if ((fd = PyObject_GetAttrString(parser, "fd")) == NULL) goto error;
    if ((cpu_agg = PyObject_GetAttrString(fd, "cpu_agg")) == NULL) goto error;
    if ((rt_agg = PyObject_GetAttrString(fd, "rt_agg")) == NULL) goto error;
    if ((devices = PyObject_GetAttrString(fd, "devices")) == NULL) goto error;
    if ((symbols = PyObject_GetAttrString(parser, "symbols")) == NULL) goto error;
    if ((ids = PyObject_GetAttrString(symbols, "ids")) == NULL) goto error;
    if ((feed = PyObject_GetAttrString(parser, "feed")) == NULL) goto error;
    if ((ops = PyObject_GetAttrString(feed, "ops")) == NULL) goto error;
    if ((first_gpu = PyObject_GetAttrString(fd, "first_gpu_ts")) == NULL) goto error;
    int have_first_gpu = first_gpu != Py_None;
    int count_sync;
    {
        PyObject *v = PyObject_GetAttrString(parser, "count_sync");
        if (v == NULL) goto error;
        count_sync = PyObject_IsTrue(v);
        Py_DECREF(v);
        if (count_sync < 0) goto error;
    }
    if (!PyDict_CheckExact(cat_kind) || !PyDict_CheckExact(cpu_agg) || !PyDict_CheckExact(rt_agg) ||
        !PyDict_CheckExact(ids) || !PySet_CheckExact(devices) || !PyUnicode_CheckExact(memory_event_name))
        goto decline;
    {
        const char *opn[NB_OPS] = {"s", "ts", "dur", "name", "kind", "stream", "corr", "nbytes", "occ"};
        const char *opf[NB_OPS] = {"q", "d", "d", "i", "b", "i", "q", "q", "f"};
        const Py_ssize_t ops_sz[NB_OPS] = {8, 8, 8, 4, 1, 4, 8, 8, 4};
        for (int k = 0; k < NB_OPS; k++) {
            PyObject *a = PyObject_GetAttrString(ops, opn[k]);
            if (a == NULL) goto error;
            int r = abuf_init(&buf[k], a, opf[k], ops_sz[k]);
            Py_DECREF(a);
            if (r) goto decline;
        }
        if (abuf_init(&buf[B_LCORR], arrays[0], "q", 8) || abuf_init(&buf[B_LTS], arrays[1], "d", 8) ||
            abuf_init(&buf[B_LDUR], arrays[2], "d", 8) || abuf_init(&buf[B_CPU], arrays[3], "d", 8))
            goto decline;
        const char *fdn[] = {"dl_ts", "dl_dur", "s_name", "s_ts", "s_dur", "a_name", "a_gpu", "a_ts", "a_dur", "gs_ts", "gs_dur"};
        const char *fdf[] = {"d", "d", "i", "d", "d", "i", "b", "d", "d", "d", "d"};
        const Py_ssize_t fds[] = {8, 8, 4, 8, 8, 4, 1, 8, 8, 8, 8};
        for (int k = 0; k < 11; k++) {
            PyObject *a = PyObject_GetAttrString(fd, fdn[k]);
            if (a == NULL) goto error;
            int r = abuf_init(&buf[B_DLTS + k], a, fdf[k], fds[k]);
            Py_DECREF(a);
            if (r) goto decline;
        }
    }
    { /* fd.memory's columns (MemoryEvents.add): appended here for the reader's [memory] events */
        PyObject *mm = PyImport_ImportModule("profstack.analysis.memory");
        if (mm == NULL) goto error;
        int bad_m = 0;
        mem_max = (Py_ssize_t)const_ll(mm, "MAX_EVENTS", &bad_m);
        Py_DECREF(mm);
        if (bad_m) goto error;
        if ((memory = PyObject_GetAttrString(fd, "memory")) == NULL) goto error;
        if ((mem_tids = PyObject_GetAttrString(memory, "tids")) == NULL) goto error;
        if (!PyDict_CheckExact(mem_tids)) goto decline;
        const char *mn[] = {"ts", "tid", "dev", "nbytes", "alloc", "reserved", "op"};
        const char *mf[] = {"d", "i", "i", "q", "q", "q", "i"};
        const Py_ssize_t ms[] = {8, 4, 4, 8, 8, 8, 4};
        for (int k = 0; k < 7; k++) {
            PyObject *a = PyObject_GetAttrString(memory, mn[k]);
            if (a == NULL) goto error;
            if (k == 0) mem_len = PyObject_Length(a);
            int r = mem_len < 0 ? -1 : abuf_init(&buf[B_MTS + k], a, mf[k], ms[k]);
            Py_DECREF(a);
            if (r < 0) goto error;
            if (r) goto decline;
        }
    }
    if ((op_log = PyObject_GetAttrString(parser, "op_log")) == NULL) goto error;
    if (op_log != Py_None) {
        PyObject *v = PyObject_GetAttrString(op_log, "valid");
        if (v == NULL) goto error;
        log_on = PyObject_IsTrue(v);
        Py_DECREF(v);
        if (log_on < 0) goto error;
    }
    if (log_on) {
        int bad_l = 0;
        log_max = (Py_ssize_t)const_ll(op_log, "max_ops", &bad_l);
        if (bad_l) goto error;
        if ((log_name_ids = PyObject_GetAttrString(op_log, "name_ids")) == NULL ||
            (log_tid_ids = PyObject_GetAttrString(op_log, "tid_ids")) == NULL ||
            (log_tids = PyObject_GetAttrString(op_log, "tids")) == NULL)
            goto error;
        if (!PyDict_CheckExact(log_name_ids) || !PyDict_CheckExact(log_tid_ids) || !PyList_CheckExact(log_tids))
            goto decline;
        const char *ln[] = {"ts", "dur", "name", "tid"};
        const char *lf[] = {"d", "d", "i", "i"};
        const Py_ssize_t ls[] = {8, 8, 4, 4};
        for (int k = 0; k < 4; k++) {
            PyObject *a = PyObject_GetAttrString(op_log, ln[k]);
            if (a == NULL) goto error;
            if (k == 0) log_len = PyObject_Length(a);
            int r = log_len < 0 ? -1 : abuf_init(&buf[B_LOGTS + k], a, lf[k], ls[k]);
            Py_DECREF(a);
            if (r < 0) goto error;
            if (r) goto decline;
        }
    }
    loaded = 1;
    if (count_events && add_attr_long(fd, "events", (long long)n) < 0) goto error;

    /* ---- the loop ---- */
    PyObject *last_cat = NULL; /* the previous event's category string and kind: most events repeat it */
    long long last_kind = 0;
    int last_cpu_cat = 0; /* last_cat is "cpu_op" or "Operator" (memory._CPU_CATS) */
    long long last_dev = 0;
    int last_dev_known = 0; /* last_dev is in fd.devices */
    for (Py_ssize_t k = 0; k < n; k++) {
        const Rec *r = &recs[k];
        PyObject *cat = r->cat, *ph_o = r->ph;
        long long kind;
        if (last_cat != NULL && PyUnicode_GET_LENGTH(cat) == PyUnicode_GET_LENGTH(last_cat) &&
            PyUnicode_KIND(cat) == PyUnicode_KIND(last_cat) &&
            memcmp(PyUnicode_DATA(cat), PyUnicode_DATA(last_cat),
                   (size_t)(PyUnicode_GET_LENGTH(cat) * PyUnicode_KIND(cat))) == 0) {
            kind = last_kind;
        } else {
            PyObject *kv = PyDict_GetItemWithError(cat_kind, cat);
            if (kv == NULL && PyErr_Occurred()) goto error;
            if (kv == NULL) kind = 0;
            else if (int64_of(kv, &kind) < 0) goto error;
            if (kind < 0 || kind > 8) {
                PyErr_SetString(PyExc_ValueError, "CAT_KIND holds an unknown kind");
                goto error;
            }
            last_cat = cat;
            last_kind = kind;
            last_cpu_cat = is_ascii_eq(cat, "cpu_op", 6) || is_ascii_eq(cat, "Operator", 8);
        }
        int ph_x = is_ascii_eq(ph_o, "X", 1);
        /* the op log: what memory.attribute's read of this event would find (a timed CPU op, allocation
           primitives aside, whose tid _Op decodes: a float tid it does not) */
        if (log_on && ph_x && last_cpu_cat && r->mem_read && r->ts == r->ts && r->tid_t != 2) {
            int rc = log_op(op_log, log_name_ids, log_tid_ids, log_tids, r, &last_tid.t, &last_tid.i, &last_tid.s,
                            &last_tid.n, &last_tid.idx, &buf[B_LOGTS], log_len + buf[B_LOGTS].n < log_max);
            if (rc < 0) goto error;
            if (rc > 0) {
                log_on = 0;
                log_full = 1;
            }
        }
        if (kind == 0) {
            if (ph_x) {
                n_x += 1;
                if (r->has_args && (r->stream_t != 0 || r->has_dev)) {
                    PyObject *r = PyObject_CallMethod(parser, "_unknown", "O", cat);
                    if (r == NULL) goto error;
                    Py_DECREF(r);
                }
            } else if (is_ascii_eq(ph_o, "i", 1)) {
                int eq = PyUnicode_Compare(r->name, memory_event_name);
                if (eq == -1 && PyErr_Occurred()) goto error;
                if (eq == 0 && r->mem_read) { /* parser.memory_event -> MemoryEvents.add, in C */
                    if (!r->has_args || !(r->mem_set & 1)) continue; /* no args, or Bytes null */
                    mem_seen += 1;
                    if (mem_len + buf[B_MTS].n >= mem_max || r->ts != r->ts) continue;
                    PyObject *key = tid_key(r);
                    if (key == NULL) goto error;
                    PyObject *tv = PyDict_GetItemWithError(mem_tids, key); /* borrowed */
                    long long ti;
                    if (tv == NULL) {
                        if (PyErr_Occurred()) {
                            Py_DECREF(key);
                            goto error;
                        }
                        ti = (long long)PyDict_GET_SIZE(mem_tids);
                        PyObject *nv = PyLong_FromLongLong(ti);
                        int rc = nv == NULL ? -1 : PyDict_SetItem(mem_tids, key, nv);
                        Py_XDECREF(nv);
                        if (rc < 0) {
                            Py_DECREF(key);
                            goto error;
                        }
                    } else if (int64_of(tv, &ti) < 0) {
                        Py_DECREF(key);
                        goto error;
                    }
                    Py_DECREF(key);
                    if (ti < INT32_MIN || ti > INT32_MAX) {
                        PyErr_SetString(PyExc_OverflowError, "signed integer is greater than maximum");
                        goto error;
                    }
                    int t32 = (int)ti, op32 = -1;
                    const long long *mv = r->mem;
                    long long dt = (r->mem_set & 8) && mv[3] >= 0 && mv[3] < (1 << 15) ? mv[3] : 0x7FFF;
                    long long di = (r->mem_set & 16) && mv[4] >= 0 && mv[4] < 0xFFFF ? mv[4] : 0xFFFF;
                    int dev = (int)(dt * 65536 + di); /* < 2**31: memory.device_key */
                    long long nb = mv[0], al = (r->mem_set & 2) ? mv[1] : -1, rs = (r->mem_set & 4) ? mv[2] : -1;
                    double mts = r->ts;
                    if (abuf_push(&buf[B_MTS], &mts) < 0 || abuf_push(&buf[B_MTID], &t32) < 0 ||
                        abuf_push(&buf[B_MDEV], &dev) < 0 || abuf_push(&buf[B_MBYTES], &nb) < 0 ||
                        abuf_push(&buf[B_MALLOC], &al) < 0 || abuf_push(&buf[B_MRES], &rs) < 0 ||
                        abuf_push(&buf[B_MOP], &op32) < 0)
                        goto error;
                } else if (eq == 0) {
                    PyObject *e = rec_event(r, one_decoder);
                    if (e == NULL) goto error;
                    PyObject *rv = PyObject_CallMethod(parser, "memory_event", "O", e);
                    Py_DECREF(e);
                    if (rv == NULL) goto error;
                    Py_DECREF(rv);
                }
            } else if (is_ascii_eq(cat, "ac2g", 4)) { /* a launch's flow: starts at the launch, ends at its GPU row */
                if (is_ascii_eq(ph_o, "s", 1)) flow_s += 1;
                else if (is_ascii_eq(ph_o, "f", 1)) flow_f += 1;
            }
            continue;
        }
        double ts = r->ts, dur = r->dur;
        if (!ph_x || ts != ts || dur < 0) {
            if (!ph_x) {
                if (PyUnicode_GET_LENGTH(ph_o) == 0 && ts == ts) no_ph += 1;
                else if (is_ascii_eq(ph_o, "B", 1) || is_ascii_eq(ph_o, "E", 1)) begin_end += 1;
                continue;
            }
            PyObject *e = rec_event(r, one_decoder);
            if (e == NULL) goto error;
            PyObject *rv = PyObject_CallMethod(parser, "invalid_event", "OO", e, dur < 0 ? Py_True : Py_False);
            Py_DECREF(e);
            if (rv == NULL) goto error;
            Py_DECREF(rv);
            continue;
        }
        n_x += 1;
        PyObject *name = r->name;
        if (kind == 1) { /* K_CPU */
            if (abuf_push(&buf[B_CPU], &ts) < 0) goto error;
            PyObject *bname; /* the bounded name, when it is one */
            PyObject *rec = agg_record(parser, cpu_agg, name, MAX_NAME, "_new_cpu_rec", &bname);
            if (rec == NULL) {
                Py_XDECREF(bname);
                goto error;
            }
            if (!PyList_CheckExact(rec) || PyList_GET_SIZE(rec) < 3) {
                PyErr_SetString(PyExc_TypeError, "a cpu_agg record is not [flag, count, total]");
                Py_DECREF(rec);
                Py_XDECREF(bname);
                goto error;
            }
            long long flag;
            int bad2 = add_long(rec, 1, 1) < 0 || add_double(rec, 2, dur) < 0 || int64_of(PyList_GET_ITEM(rec, 0), &flag) < 0;
            if (!bad2 && flag) {
                if (flag == F_STEP) {
                    PyObject *rv = PyObject_CallMethod(parser, "_step", "Odd", bname ? bname : name, ts, dur);
                    if (rv == NULL) bad2 = 1;
                    Py_XDECREF(rv);
                } else {
                    bad2 = abuf_push(&buf[B_DLTS], &ts) < 0 || abuf_push(&buf[B_DLDUR], &dur) < 0;
                }
            }
            Py_DECREF(rec);
            Py_XDECREF(bname);
            if (bad2) goto error;
        } else if (kind == 2) { /* K_RUNTIME */
            n_rt += 1;
            PyObject *rbname;
            PyObject *rrec = agg_record(parser, rt_agg, name, MAX_NAME, "_new_runtime", &rbname);
            Py_XDECREF(rbname);
            if (rrec == NULL) goto error;
            if (!PyTuple_CheckExact(rrec) || PyTuple_GET_SIZE(rrec) != 3) {
                PyErr_SetString(PyExc_TypeError, "a rt_agg record is not (is_sync, name id, join class)");
                Py_DECREF(rrec);
                goto error;
            }
            long long klass, rnid;
            int is_sync = PyObject_IsTrue(PyTuple_GET_ITEM(rrec, 0));
            int bad2 = is_sync < 0 || int64_of(PyTuple_GET_ITEM(rrec, 2), &klass) < 0 ||
                       int64_of(PyTuple_GET_ITEM(rrec, 1), &rnid) < 0;
            Py_DECREF(rrec);
            if (bad2) goto error;
            if (klass >= 0 && r->has_args && r->has_corr) {
                long long c = r->corr;
                if (abuf_push(&buf[B_LCORR], &c) < 0 || abuf_push(&buf[B_LTS], &ts) < 0) goto error;
                double rd;
                if (klass == 0) {
                    n_launch += 1;
                    rd = dur;
                } else if (klass == 1) {
                    n_launch += 1;
                    /* Python negates, then subtracts (a NaN keeps the negated sign); volatile keeps GCC from
                       rewriting it as -1.0 - dur, which gives a NaN the other sign */
                    volatile double neg = -dur;
                    rd = neg - 1.0;
                } else {
                    rd = NAN;
                }
                if (abuf_push(&buf[B_LDUR], &rd) < 0) goto error;
            }
            if (is_sync) {
                if (rnid < INT32_MIN || rnid > INT32_MAX) {
                    PyErr_SetString(PyExc_OverflowError, "signed integer is greater than maximum");
                    goto error;
                }
                int v = (int)rnid;
                if (abuf_push(&buf[B_SNAME], &v) < 0 || abuf_push(&buf[B_STS], &ts) < 0 || abuf_push(&buf[B_SDUR], &dur) < 0)
                    goto error;
            }
        } else if (kind <= 5) { /* kernel, memcpy, memset */
            if (!(-time_limit < ts && ts < time_limit) || dur >= time_limit) {
                n_x -= 1;
                PyObject *e = rec_event(r, one_decoder);
                if (e == NULL) goto error;
                PyObject *rv = PyObject_CallMethod(parser, "invalid_event", "OO", e, Py_False);
                Py_DECREF(e);
                if (rv == NULL) goto error;
                Py_DECREF(rv);
                continue;
            }
            PyObject *bname;
            if (bound_name(parser, name, MAX_NAME, &bname) < 0) goto error;
            PyObject *nm = bname ? bname : name;
            PyObject *nid_o = PyDict_GetItemWithError(ids, nm);
            long long nid;
            if (nid_o == NULL) {
                if (PyErr_Occurred()) {
                    Py_XDECREF(bname);
                    goto error;
                }
                nid_o = PyObject_CallMethod(parser, "_gpu_name_id", "OL", nm, kind);
                Py_XDECREF(bname);
                if (nid_o == NULL) goto error;
                int r = int64_of(nid_o, &nid);
                Py_DECREF(nid_o);
                if (r < 0) goto error;
            } else {
                Py_XDECREF(bname);
                if (int64_of(nid_o, &nid) < 0) goto error;
            }
            long long stream = 0, corr = -1, nbytes = 0;
            double occ = -1.0;
            if (r->has_args) {
                if (rec_stream_id(parser, r, &stream) < 0) goto error;
                if (r->has_corr) corr = r->corr;
                if (r->bytes_t == 1) {
                    nbytes = r->bytes_i;
                } else if (r->bytes_t == 2) {
                    double bd = r->bytes_f; /* int(float): truncation; the decoder bounds it */
                    if (!(bd > -TWO63 && bd < TWO63)) {
                        PyObject *fo = PyFloat_FromDouble(bd);
                        PyObject *io = fo ? PyNumber_Long(fo) : NULL;
                        Py_XDECREF(fo);
                        if (io == NULL) goto error;
                        int rr = int64_of(io, &nbytes);
                        Py_DECREF(io);
                        if (rr < 0) goto error;
                    } else {
                        nbytes = (long long)bd;
                    }
                }
                if (r->has_occ) {
                    double od = r->occ;
                    if (0.0 <= od && od <= 100.0) occ = od;
                }
                if (r->has_dev) {
                    if (r->dev_ovf || !last_dev_known || r->dev != last_dev) {
                        PyObject *dv = r->dev_o;
                        if (dv != NULL) Py_INCREF(dv);
                        else if ((dv = PyLong_FromLongLong(r->dev)) == NULL) goto error;
                        int in = PySet_Contains(devices, dv);
                        if (in >= 0 && !in && PySet_GET_SIZE(devices) < MAX_DEVICES) {
                            in = PySet_Add(devices, dv) < 0 ? -1 : 1;
                        }
                        Py_DECREF(dv);
                        if (in < 0) goto error;
                        last_dev_known = in && !r->dev_ovf;
                        last_dev = r->dev;
                    }
                }
            }
            signed char op_kind;
            if (kind == 3) {
                op_kind = (signed char)OP_KERNEL;
                n_kernels += 1;
            } else if (kind == 4) {
                op_kind = (signed char)OP_MEMCPY;
                n_memcpy += 1;
            } else {
                op_kind = (signed char)OP_MEMSET;
                n_memset += 1;
            }
            if (!have_first_gpu) {
                PyObject *t = PyFloat_FromDouble(ts);
                if (t == NULL || PyObject_SetAttrString(fd, "first_gpu_ts", t) < 0) {
                    Py_XDECREF(t);
                    goto error;
                }
                Py_DECREF(t);
                have_first_gpu = 1;
            }
            /* the columns in Python's order: an int32 overflow raises after the columns before it */
            long long sc = (long long)ceil(ts);
            if (abuf_push(&buf[0], &sc) < 0 || abuf_push(&buf[1], &ts) < 0 || abuf_push(&buf[2], &dur) < 0) goto error;
            if (nid < INT32_MIN || nid > INT32_MAX) {
                PyErr_SetString(PyExc_OverflowError,
                                nid > 0 ? "signed integer is greater than maximum" : "signed integer is less than minimum");
                goto error;
            }
            int nid32 = (int)nid;
            if (abuf_push(&buf[3], &nid32) < 0 || abuf_push(&buf[4], &op_kind) < 0) goto error;
            if (stream < INT32_MIN || stream > INT32_MAX) {
                PyErr_SetString(PyExc_OverflowError,
                                stream > 0 ? "signed integer is greater than maximum" : "signed integer is less than minimum");
                goto error;
            }
            int st32 = (int)stream;
            float occ32 = (float)occ;
            if (abuf_push(&buf[5], &st32) < 0 || abuf_push(&buf[6], &corr) < 0 || abuf_push(&buf[7], &nbytes) < 0 ||
                abuf_push(&buf[8], &occ32) < 0)
                goto error;
        } else if (kind == 6 || kind == 7) { /* annotations on CPU and GPU */
            PyObject *bname;
            if (bound_name(parser, name, MAX_NAME, &bname) < 0) goto error;
            PyObject *cls = PyObject_CallMethod(parser, "_annot_class", "O", bname ? bname : name);
            Py_XDECREF(bname);
            if (cls == NULL) goto error;
            long long flag = 0, anid = 0;
            int bad2 = !PyTuple_CheckExact(cls) || PyTuple_GET_SIZE(cls) != 2 ||
                       int64_of(PyTuple_GET_ITEM(cls, 0), &flag) < 0 || int64_of(PyTuple_GET_ITEM(cls, 1), &anid) < 0;
            Py_DECREF(cls);
            if (bad2) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "_annot_class did not return (flag, id)");
                goto error;
            }
            if (flag == F_STEP) {
                if (kind == 6) {
                    PyObject *rv = PyObject_CallMethod(parser, "_step", "Odd", name, ts, dur);
                    if (rv == NULL) goto error;
                    Py_DECREF(rv);
                }
                continue;
            }
            if (flag == F_DATALOADER && kind == 6)
                if (abuf_push(&buf[B_DLTS], &ts) < 0 || abuf_push(&buf[B_DLDUR], &dur) < 0) goto error;
            if (anid < INT32_MIN || anid > INT32_MAX) {
                PyErr_SetString(PyExc_OverflowError, "signed integer is greater than maximum");
                goto error;
            }
            int a32 = (int)anid;
            signed char g = kind == 7 ? 1 : 0;
            if (abuf_push(&buf[B_ANAME], &a32) < 0 || abuf_push(&buf[B_AGPU], &g) < 0 || abuf_push(&buf[B_ATS], &ts) < 0 ||
                abuf_push(&buf[B_ADUR], &dur) < 0)
                goto error;
        } else { /* K_GPU_SYNC */
            if (abuf_push(&buf[B_GSTS], &ts) < 0 || abuf_push(&buf[B_GSDUR], &dur) < 0) goto error;
            if (!count_sync || !r->has_args) continue;
            if (r->stream_t == 0 || (r->stream_t == 1 && r->stream == -1)) continue;
            if (!(-time_limit < ts && ts < time_limit) || dur >= time_limit) continue;
            PyObject *nid_o = PyDict_GetItemWithError(ids, name);
            long long nid;
            if (nid_o == NULL) {
                if (PyErr_Occurred()) goto error;
                nid_o = PyObject_CallMethod(parser, "_new_symbol", "OO", name, other_name);
                if (nid_o == NULL) goto error;
                int r = int64_of(nid_o, &nid);
                Py_DECREF(nid_o);
                if (r < 0) goto error;
            } else if (int64_of(nid_o, &nid) < 0) {
                goto error;
            }
            long long corr = -1, zero = 0;
            if (r->has_corr) corr = r->corr;
            long long sc = (long long)ceil(ts);
            signed char opk = (signed char)OP_SYNC;
            if (abuf_push(&buf[0], &sc) < 0 || abuf_push(&buf[1], &ts) < 0 || abuf_push(&buf[2], &dur) < 0) goto error;
            if (nid < INT32_MIN || nid > INT32_MAX) {
                PyErr_SetString(PyExc_OverflowError,
                                nid > 0 ? "signed integer is greater than maximum" : "signed integer is less than minimum");
                goto error;
            }
            int nid32 = (int)nid;
            if (abuf_push(&buf[3], &nid32) < 0 || abuf_push(&buf[4], &opk) < 0) goto error;
            long long stream; /* after the first five columns, as Python calls _stream_of there */
            if (rec_stream_id(parser, r, &stream) < 0) goto error;
            if (stream < INT32_MIN || stream > INT32_MAX) {
                PyErr_SetString(PyExc_OverflowError,
                                stream > 0 ? "signed integer is greater than maximum" : "signed integer is less than minimum");
                goto error;
            }
            int st32 = (int)stream;
            float occ32 = -1.0f;
            if (abuf_push(&buf[5], &st32) < 0 || abuf_push(&buf[6], &corr) < 0 || abuf_push(&buf[7], &zero) < 0 ||
                abuf_push(&buf[8], &occ32) < 0)
                goto error;
        }
    }
    (void)K_CPU;
    /* ---- write back: the columns and the counters _consume_events changes on the way ---- */
    for (int k = 0; k < NBUF; k++)
        if (abuf_flush(&buf[k]) < 0) goto error;
    loaded = 0;
    if (add_attr_long(memory, "seen", mem_seen) < 0) goto error_written;
    if (log_full) { /* the log is full: dropped; the call's result (None) released */
        PyObject *rv = PyObject_CallMethod(op_log, "drop", NULL);
        if (rv == NULL) goto error_written;
        Py_DECREF(rv);
    }
    if (add_attr_long(fd, "no_ph", no_ph) < 0 || add_attr_long(fd, "begin_end", begin_end) < 0 ||
        add_attr_long(fd, "n_kernels", n_kernels) < 0 || add_attr_long(fd, "n_memcpy", n_memcpy) < 0 ||
        add_attr_long(fd, "n_memset", n_memset) < 0 || add_attr_long(fd, "flow_starts", flow_s) < 0 ||
        add_attr_long(fd, "flow_finishes", flow_f) < 0)
        goto error_written;
    result = Py_BuildValue("(LLL)", n_launch, n_x, n_rt);
    goto done;

decline:
    PyErr_Clear();
    Py_INCREF(Py_NotImplemented);
    result = Py_NotImplemented;
    goto done;

error:
    if (loaded) { /* Python's loop had appended and counted up to the failing event: keep them equal */
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        for (int k = 0; k < NBUF; k++) {
            abuf_flush(&buf[k]);
            PyErr_Clear();
        }
        if (fd != NULL) {
            add_attr_long(fd, "no_ph", no_ph);
            add_attr_long(fd, "begin_end", begin_end);
            add_attr_long(fd, "n_kernels", n_kernels);
            add_attr_long(fd, "n_memcpy", n_memcpy);
            add_attr_long(fd, "n_memset", n_memset);
            add_attr_long(fd, "flow_starts", flow_s);
            add_attr_long(fd, "flow_finishes", flow_f);
            PyErr_Clear();
        }
        if (memory != NULL) {
            add_attr_long(memory, "seen", mem_seen);
            PyErr_Clear();
        }
        if (op_log != NULL && op_log != Py_None) { /* the log is incomplete: this file's attribution reads it again */
            PyObject *rv = PyObject_CallMethod(op_log, "drop", NULL);
            Py_XDECREF(rv);
            PyErr_Clear();
        }
        PyErr_Restore(t, v, tb);
    }
error_written:
    result = NULL;

done:
    for (int k = 0; k < NBUF; k++) abuf_free(&buf[k]);
    Py_XDECREF(parse);
    Py_XDECREF(fd);
    Py_XDECREF(cat_kind);
    Py_XDECREF(memory_event_name);
    Py_XDECREF(other_name);
    Py_XDECREF(cpu_agg);
    Py_XDECREF(rt_agg);
    Py_XDECREF(devices);
    Py_XDECREF(symbols);
    Py_XDECREF(ids);
    Py_XDECREF(feed);
    Py_XDECREF(ops);
    Py_XDECREF(first_gpu);
    Py_XDECREF(one_decoder);
    Py_XDECREF(memory);
    Py_XDECREF(mem_tids);
    Py_XDECREF(op_log);
    Py_XDECREF(log_name_ids);
    Py_XDECREF(log_tid_ids);
    Py_XDECREF(log_tids);
    return result;
}


/* consume_events(parser, events, l_corr, l_ts, l_dur, cpu_starts): the loop over a list of parse.Event */
static PyObject *consume_events(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "consume_events(parser, events, l_corr, l_ts, l_dur, cpu_starts)");
        return NULL;
    }
    PyObject *events = args[1];
    int si = struct_init();
    if (si < 0) return NULL;
    if (si > 0 || !PyList_CheckExact(events)) Py_RETURN_NOTIMPLEMENTED;
    Py_ssize_t n = PyList_GET_SIZE(events);
    Rec *recs = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(Rec));
    if (recs == NULL) return PyErr_NoMemory();
    /* every event an Event with the field types the decoder gives (else Python, which handles them all) */
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *e = PyList_GET_ITEM(events, k);
        Rec *r = &recs[k];
        if ((PyObject *)Py_TYPE(e) != EventT) goto decline;
        PyObject *ph = FLD(e, o_ph), *cat = FLD(e, o_cat), *name = FLD(e, o_name), *ts = FLD(e, o_ts),
                 *dur = FLD(e, o_dur), *a = FLD(e, o_args);
        if (!ph || !cat || !name || !ts || !dur || !a) goto decline;
        if (!PyUnicode_CheckExact(ph) || !PyUnicode_CheckExact(cat) || !PyUnicode_CheckExact(name) ||
            !PyFloat_CheckExact(ts) || !PyFloat_CheckExact(dur))
            goto decline;
        r->ph = ph;
        r->cat = cat;
        r->name = name;
        r->ev = e;
        r->ts = PyFloat_AS_DOUBLE(ts);
        r->dur = PyFloat_AS_DOUBLE(dur);
        if (a == Py_None) continue;
        if ((PyObject *)Py_TYPE(a) != ArgsT) goto decline;
        PyObject *c = FLD(a, o_corr), *st = FLD(a, o_stream), *b = FLD(a, o_bytes), *oc = FLD(a, o_occ),
                 *dv = FLD(a, o_dev);
        if (!c || !st || !b || !oc || !dv) goto decline;
        if ((c != Py_None && !PyLong_CheckExact(c)) || (st != Py_None && !PyLong_CheckExact(st) && !PyUnicode_CheckExact(st)) ||
            (b != Py_None && !PyLong_CheckExact(b) && !PyFloat_CheckExact(b)) || (oc != Py_None && !PyFloat_CheckExact(oc)) ||
            (dv != Py_None && !PyLong_CheckExact(dv)))
            goto decline;
        r->has_args = 1;
        /* values an int64 column cannot hold: Python raises from the append, after the columns before it */
        if (c != Py_None) {
            if (int64_of(c, &r->corr) < 0) goto decline;
            r->has_corr = 1;
        }
        if (b != Py_None) {
            if (PyLong_CheckExact(b)) {
                if (int64_of(b, &r->bytes_i) < 0) goto decline;
                r->bytes_t = 1;
            } else {
                r->bytes_f = PyFloat_AS_DOUBLE(b);
                if (!(r->bytes_f > -TWO63 && r->bytes_f < TWO63)) goto decline;
                r->bytes_t = 2;
            }
        }
        if (st != Py_None) {
            r->stream_o = st;
            r->stream_t = 2;
            if (PyLong_CheckExact(st)) {
                int ovf = 0;
                long long v = PyLong_AsLongLongAndOverflow(st, &ovf);
                if (v == -1 && PyErr_Occurred()) goto error;
                if (!ovf) {
                    r->stream = v;
                    r->stream_t = 1;
                }
            }
        }
        if (oc != Py_None) {
            r->occ = PyFloat_AS_DOUBLE(oc);
            r->has_occ = 1;
        }
        if (dv != Py_None) {
            int ovf = 0;
            r->dev = PyLong_AsLongLongAndOverflow(dv, &ovf);
            if (r->dev == -1 && PyErr_Occurred()) goto error;
            r->dev_o = dv;
            r->dev_ovf = (signed char)(ovf != 0);
            r->has_dev = 1;
        }
    }
    PyObject *res = consume_core(args[0], recs, n, args + 2, 0);
    PyMem_Free(recs);
    return res;
decline:
    PyErr_Clear();
    PyMem_Free(recs);
    Py_RETURN_NOTIMPLEMENTED;
error:
    PyMem_Free(recs);
    return NULL;
}

/* ---- decode_consume: the batch's JSON read straight into records (no parse.Event per event) ----
 *
 * Contract: for a batch (one JSON array) that msgspec decodes as list[parse.Event], the records equal the
 * Events' fields, so the loop leaves what consume(_LIST_DECODER.decode(batch)) leaves. It accepts only a subset
 * of what msgspec accepts, and declines (NotImplemented, before anything is changed) on the rest, where the
 * caller runs msgspec: the reader never decides that a batch is malformed, msgspec does. Declined: escapes in
 * keys and in the strings it keeps (ph, cat, name, tid, a string stream), a string beyond the cache's reach,
 * surrogate escapes anywhere, numbers it cannot convert exactly (more than 19 significant digits, exponents
 * beyond what one correctly rounded division or product holds), any type msgspec would reject, nesting deeper
 * than 64. Strings it keeps are checked as UTF-8 by Python's strict decoder (msgspec checks them too);
 * strings it skips are only checked for control characters and escapes, as msgspec checks them.
 */

#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "num_double's fast path assumes double arithmetic in double precision (no x87 excess precision)"
#endif
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the JSON reader's word-at-a-time string scan assumes a little-endian machine"
#endif
#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

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
static SCache file_cache;

/* The batch records, kept between calls (a fresh buffer per batch cost a page fault per 4 KB), unless a batch
   of tiny events grew them beyond this (a 1 MB batch of "{}" is 340k records). */
#define KEPT_RECORDS 65536
static Rec *kept_recs = NULL;
static Py_ssize_t kept_cap = 0;

/* decode_consume is running: the file cache and the kept records are its own; a call made meanwhile (a helper
   calling back) uses a cache and records of its own, and reader_reset leaves them */
static int reader_busy = 0;

/* The string cache's hash is keyed with 16 random bytes per process (os.urandom at import): names crafted to
   collide under a fixed hash flooded one probe sequence (187 s of CPU for a 100 MB trace against 2.9 s). A probe
   sequence longer than SC_MAX_PROBES declines the batch instead (msgspec reads it), so even names that collide
   under the key cost a bounded number of comparisons each. */
static uint64_t hash_key[2] = {0x9E3779B97F4A7C15ull, 0xC2B2AE3D27D4EB4Full};
#define SC_MAX_PROBES 48
static Py_ssize_t sc_declined = 0; /* lookups declined for a probe sequence beyond SC_MAX_PROBES */
static Py_ssize_t sc_max_probe = 0;
static int hash_degenerate = 0; /* tests only: every name hashes alike (_test_degenerate_hash) */

static uint64_t bytes_hash(const unsigned char *p, size_t n) {
    if (hash_degenerate) return 0;
    uint64_t h = hash_key[0] ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    h = (h ^ w ^ hash_key[1]) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    h = (h ^ hash_key[1]) * 0xff51afd7ed558ccdull;
    return h ^ (h >> 32);
}

static void sc_free(SCache *c) {
    if (c->t != NULL)
        for (size_t i = 0; i <= c->mask; i++) Py_XDECREF(c->t[i].s);
    PyMem_Free(c->t);
    memset(c, 0, sizeof(*c));
}

static int sc_grow(SCache *c) {
    size_t cap = c->t == NULL ? 256 : (c->mask + 1) * 2;
    SEnt *t = PyMem_Calloc(cap, sizeof(SEnt));
    if (t == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (c->t != NULL) {
        for (size_t i = 0; i <= c->mask; i++) {
            if (c->t[i].s == NULL) continue;
            size_t j = (size_t)c->t[i].h & (cap - 1);
            while (t[j].s != NULL) j = (j + 1) & (cap - 1);
            t[j] = c->t[i];
        }
        PyMem_Free(c->t);
    }
    c->t = t;
    c->mask = cap - 1;
    return 0;
}

/* the str of these bytes (borrowed, owned by the cache): 0; 1 not valid UTF-8 (decline); -1 error */
static int sc_get(SCache *c, const unsigned char *p, Py_ssize_t n, int high, PyObject **out) {
    if (c->t == NULL || (c->used + 1) * 2 > c->mask + 1)
        if (sc_grow(c) < 0) return -1;
    uint64_t h = bytes_hash(p, (size_t)n);
    size_t i = (size_t)h & c->mask;
    Py_ssize_t probes = 0;
    while (c->t[i].s != NULL) {
        if (c->t[i].h == h && c->t[i].n == n && memcmp(c->t[i].p, p, (size_t)n) == 0) {
            *out = c->t[i].s;
            return 0;
        }
        i = (i + 1) & c->mask;
        if (++probes > SC_MAX_PROBES) { /* a crafted (or unlucky) cluster: bounded work, msgspec reads the batch */
            sc_declined++;
            return 1;
        }
    }
    if (probes > sc_max_probe) sc_max_probe = probes;
    PyObject *s;
    if (!high) {
        s = PyUnicode_New(n, 127);
        if (s == NULL) return -1;
        memcpy(PyUnicode_DATA(s), p, (size_t)n);
    } else {
        s = PyUnicode_DecodeUTF8((const char *)p, n, "strict");
        if (s == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) return -1;
            PyErr_Clear();
            return 1;
        }
    }
    const unsigned char *own = NULL; /* the key bytes, owned by the str: its ASCII data, or its cached UTF-8 */
    if (PyUnicode_IS_COMPACT_ASCII(s)) {
        own = (const unsigned char *)PyUnicode_DATA(s);
    } else {
        Py_ssize_t un;
        own = (const unsigned char *)PyUnicode_AsUTF8AndSize(s, &un);
        if (own == NULL || un != n) { /* cannot happen for strictly decoded UTF-8; decline rather than trust it */
            Py_DECREF(s);
            if (own == NULL) return -1;
            return 1;
        }
    }
    c->t[i].h = h;
    c->t[i].p = own;
    c->t[i].n = n;
    c->t[i].s = s;
    c->used++;
    c->bytes += (size_t)n;
    *out = s;
    return 0;
}

typedef struct {
    const unsigned char *p; /* the bytes of the last string kept for this field, and its str (borrowed) */
    Py_ssize_t n;
    PyObject *s;
} Memo;

typedef struct {
    const unsigned char *p, *end;
    SCache *sc;
    Memo ph, cat; /* most events repeat the previous event's ph and cat */
} Rd;

static inline void rd_ws(Rd *rd) {
    const unsigned char *p = rd->p, *end = rd->end;
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    rd->p = p;
}

static inline int hexv(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* a string at rd->p (its opening quote): its content [*s, *s + *n), rd->p after the closing quote; *flags: 1 a byte
   >= 0x80, 2 an escape. 0 ok, 1 decline (a control character, an invalid or surrogate escape, the end). */
static int rd_str(Rd *rd, const unsigned char **s, Py_ssize_t *n, int *flags) {
    const unsigned char *p = rd->p + 1, *end = rd->end;
    int f = 0;
    *s = p;
    for (;;) {
#if defined(__SSE2__)
        { /* 16 bytes at a time: the first quote, backslash or control character, and any byte >= 0x80 before it */
            const __m128i qv = _mm_set1_epi8('"'), bv = _mm_set1_epi8('\\'), cv = _mm_set1_epi8(0x1F);
            while (end - p >= 16) {
                __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
                __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, qv), _mm_cmpeq_epi8(v, bv)),
                                         _mm_cmpeq_epi8(_mm_max_epu8(v, cv), cv));
                unsigned mask = (unsigned)_mm_movemask_epi8(m), hi = (unsigned)_mm_movemask_epi8(v);
                if (mask) {
                    int at = __builtin_ctz(mask);
                    if (hi & ((1u << at) - 1)) f |= 1;
                    p += at;
                    goto special;
                }
                if (hi) f |= 1;
                p += 16;
            }
        }
#endif
        while (end - p >= 8) {
            uint64_t w;
            memcpy(&w, p, 8);
            uint64_t q = w ^ (ONES * 0x22), b = w ^ (ONES * 0x5C);
            uint64_t t = (((q - ONES) & ~q) | ((b - ONES) & ~b) | ((w - ONES * 0x20) & ~w)) & HIGHS;
            if (t) { /* the lowest flagged byte is exact (a borrow only flags bytes above a true one) */
                int at = __builtin_ctzll(t) >> 3;
                if (at && (w & HIGHS & ((1ull << (at * 8)) - 1))) f |= 1;
                p += at;
                goto special;
            }
            if (w & HIGHS) f |= 1;
            p += 8;
        }
        if (p >= end) return 1;
    special:;
        unsigned char c = *p;
        if (c == '"') {
            *n = p - *s;
            rd->p = p + 1;
            *flags = f;
            return 0;
        }
        if (c < 0x20) return 1;
        if (c == '\\') {
            f |= 2;
            if (end - p < 2) return 1;
            unsigned char e = p[1];
            if (e == 'u') {
                if (end - p < 6) return 1;
                int v = 0;
                for (int k = 2; k < 6; k++) {
                    int d = hexv(p[k]);
                    if (d < 0) return 1;
                    v = v * 16 + d;
                }
                if (v >= 0xD800 && v <= 0xDFFF) return 1;
                p += 6;
            } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
                p += 2;
            } else {
                return 1;
            }
            continue;
        }
        if (c >= 0x80) f |= 1;
        p++;
    }
}

/* an object key at rd->p (its opening quote): rd_str, with a fast path for a short key without escapes (most
   keys). 0 ok, 1 decline (as rd_str, or an escaped key: the reader matches keys by their bytes) */
static inline int rd_key(Rd *rd, const unsigned char **k, Py_ssize_t *kn) {
    const unsigned char *p = rd->p;
    if (p >= rd->end || *p != '"') return 1;
#if defined(__SSE2__)
    if (rd->end - p >= 17) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + 1));
        const __m128i cv = _mm_set1_epi8(0x1F);
        __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                                 _mm_cmpeq_epi8(_mm_max_epu8(v, cv), cv));
        unsigned mask = (unsigned)_mm_movemask_epi8(m);
        if (mask) {
            int at = __builtin_ctz(mask);
            if (p[1 + at] == '"') {
                *k = p + 1;
                *kn = at;
                rd->p = p + 2 + at;
                return 0;
            }
        }
    }
#endif
    int f;
    if (rd_str(rd, k, kn, &f) || (f & 2)) return 1;
    return 0;
}

/* a JSON number at rd->p checked by JSON's grammar and skipped (its value is not needed): 0 ok, 1 decline */
static int rd_num_skip(Rd *rd) {
    const unsigned char *p = rd->p, *end = rd->end;
    if (p < end && *p == '-') p++;
    if (p >= end) return 1;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9')
        while (p < end && *p >= '0' && *p <= '9') p++;
    else return 1;
    if (p < end && *p == '.') {
        p++;
        if (p >= end || *p < '0' || *p > '9') return 1;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') return 1;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    rd->p = p;
    return 0;
}

typedef struct {
    uint64_t m;  /* the significant digits (at most 19) */
    int exp10;   /* value = m * 10**exp10 */
    int neg, is_int, big; /* big: more than 19 significant digits or a huge exponent (not converted) */
} NumTok;

/* a JSON number at rd->p: 0 ok, 1 decline (not a number by JSON's grammar) */
static int rd_num(Rd *rd, NumTok *t) {
    const unsigned char *p = rd->p, *end = rd->end;
    uint64_t m = 0;
    int digits = 0, exp10 = 0, big = 0;
    t->neg = 0;
    t->is_int = 1;
    if (p < end && *p == '-') {
        t->neg = 1;
        p++;
    }
    if (p >= end) return 1;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') {
            if (digits < 19) {
                m = m * 10 + (uint64_t)(*p - '0');
                digits++;
            } else {
                big = 1;
            }
            p++;
        }
    } else {
        return 1;
    }
    if (p < end && *p == '.') {
        t->is_int = 0;
        p++;
        if (p >= end || *p < '0' || *p > '9') return 1;
        while (p < end && *p >= '0' && *p <= '9') {
            int d = *p - '0';
            if (m == 0 && d == 0) {
                exp10--;
            } else if (digits < 19) {
                m = m * 10 + (uint64_t)d;
                digits++;
                exp10--;
            } else {
                big = 1;
            }
            p++;
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        t->is_int = 0;
        p++;
        int eneg = 0;
        if (p < end && (*p == '+' || *p == '-')) {
            eneg = *p == '-';
            p++;
        }
        if (p >= end || *p < '0' || *p > '9') return 1;
        long e = 0;
        while (p < end && *p >= '0' && *p <= '9') {
            if (e < 100000) e = e * 10 + (*p - '0');
            p++;
        }
        if (e >= 100000) big = 1;
        else exp10 += eneg ? -(int)e : (int)e;
    }
    t->m = m;
    t->exp10 = exp10;
    t->big = big;
    rd->p = p;
    return 0;
}

static int bitlen64(uint64_t v) { return v == 0 ? 0 : 64 - __builtin_clzll(v); }

/* q (exact, or with a nonzero remainder below it when sticky) * 2**bexp, rounded once to nearest-even */
static double round_scaled(uint64_t q, int sticky, int bexp) {
    int L = bitlen64(q);
    if (L <= 53) return ldexp((double)q, bexp); /* sticky only with L >= 55 (the callers' quotients) */
    int sh = L - 53;
    uint64_t mant = q >> sh, rem = q & ((1ull << sh) - 1), half = 1ull << (sh - 1);
    if (rem > half || (rem == half && (sticky || (mant & 1)))) mant++;
    int e = bexp + sh; /* value = mant * 2**e, mant in [2**52, 2**53] */
    if (mant == (1ull << 53)) {
        mant >>= 1;
        e++;
    }
    int biased = e + 52 + 1023;
    if (biased < 1 || biased > 2046) return ldexp((double)mant, e); /* subnormal or beyond: let ldexp say */
    uint64_t bits = ((uint64_t)biased << 52) | (mant - (1ull << 52));
    double v;
    memcpy(&v, &bits, 8);
    return v;
}

/* the float msgspec gives for this token in a float field (the nearest double: msgspec rounds correctly):
   0 ok, 1 decline (not exactly convertible here, or out of range, which msgspec rejects) */
static int num_double(const NumTok *t, double *out) {
    static const uint64_t P5[28] = {1ull, 5ull, 25ull, 125ull, 625ull, 3125ull, 15625ull, 78125ull, 390625ull,
                                    1953125ull, 9765625ull, 48828125ull, 244140625ull, 1220703125ull, 6103515625ull,
                                    30517578125ull, 152587890625ull, 762939453125ull, 3814697265625ull,
                                    19073486328125ull, 95367431640625ull, 476837158203125ull, 2384185791015625ull,
                                    11920928955078125ull, 59604644775390625ull, 298023223876953125ull,
                                    1490116119384765625ull, 7450580596923828125ull};
    /* m * 10**e, both exact doubles (m <= 2**53, |e| <= 22): one IEEE product or quotient, correctly rounded
       (Clinger's fast path; FLT_EVAL_METHOD 0 and no contraction, see native_build's flags) */
    static const double P10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                   1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    if (t->big) return 1;
    if (!t->is_int && t->m <= (1ull << 53) && t->exp10 >= -22 && t->exp10 <= 22) {
        double v = t->exp10 < 0 ? (double)t->m / P10[-t->exp10] : (double)t->m * P10[t->exp10];
        *out = t->neg ? -v : v;
        return 0;
    }
    if (t->is_int) { /* an int token: float(int), exact up to 2**53 */
        if (t->m > (1ull << 53)) return 1;
        *out = t->neg && t->m ? -(double)t->m : (double)t->m;
        return 0;
    }
    double v;
    if (t->m == 0) {
        v = 0.0;
    } else if (t->exp10 >= 0) {
        if (t->exp10 > 19) return 1;
        unsigned __int128 x = (unsigned __int128)t->m;
        for (int k = 0; k < t->exp10; k++) x *= 10;
        if (x >> 64) return 1;
        v = round_scaled((uint64_t)x, 0, 0);
    } else {
        int k = -t->exp10;
        if (k > 27) return 1;
        uint64_t d = P5[k];
        int s = 56 + bitlen64(d) - bitlen64(t->m);
        if (s < 0) s = 0;
        unsigned __int128 num = (unsigned __int128)t->m << s;
        unsigned __int128 q = num / d, r = num % d;
        if (q >> 64) return 1;
        v = round_scaled((uint64_t)q, r != 0, -s - k);
    }
    if (!isfinite(v)) return 1;
    *out = t->neg ? -v : v;
    return 0;
}

/* an int token within [lo, hi]: 0 ok, 1 decline (msgspec rejects it or gives a Python int beyond int64) */
static int num_int(const NumTok *t, long long lo, long long hi, long long *out) {
    if (t->big || !t->is_int) return 1;
    if (t->neg) {
        if (t->m > (1ull << 63)) return 1;
        long long v = t->m == (1ull << 63) ? LLONG_MIN : -(long long)t->m;
        if (v < lo) return 1;
        *out = v;
    } else {
        if (t->m > (uint64_t)LLONG_MAX || (long long)t->m > hi) return 1;
        *out = (long long)t->m;
    }
    return 0;
}

static int rd_lit(Rd *rd, const char *lit, size_t n) {
    if ((size_t)(rd->end - rd->p) < n || memcmp(rd->p, lit, n) != 0) return 1;
    rd->p += n;
    return 0;
}

/* any JSON value, checked and skipped: 0 ok, 1 decline */
static int rd_skip(Rd *rd, int depth) {
    if (rd->p >= rd->end) return 1;
    unsigned char c = *rd->p;
    const unsigned char *s;
    Py_ssize_t n;
    int f;
    switch (c) {
    case '"':
        return rd_str(rd, &s, &n, &f);
    case 't':
        return rd_lit(rd, "true", 4);
    case 'f':
        return rd_lit(rd, "false", 5);
    case 'n':
        return rd_lit(rd, "null", 4);
    case '{':
        if (depth >= 64) return 1;
        rd->p++;
        rd_ws(rd);
        if (rd->p < rd->end && *rd->p == '}') {
            rd->p++;
            return 0;
        }
        for (;;) {
            if (rd->p >= rd->end || *rd->p != '"' || rd_str(rd, &s, &n, &f)) return 1; /* any key (escapes too) */
            rd_ws(rd);
            if (rd->p >= rd->end || *rd->p != ':') return 1;
            rd->p++;
            rd_ws(rd);
            if (rd_skip(rd, depth + 1)) return 1;
            rd_ws(rd);
            if (rd->p >= rd->end) return 1;
            if (*rd->p == '}') {
                rd->p++;
                return 0;
            }
            if (*rd->p != ',') return 1;
            rd->p++;
            rd_ws(rd);
        }
    case '[':
        if (depth >= 64) return 1;
        rd->p++;
        rd_ws(rd);
        if (rd->p < rd->end && *rd->p == ']') {
            rd->p++;
            return 0;
        }
        for (;;) {
            if (rd_skip(rd, depth + 1)) return 1;
            rd_ws(rd);
            if (rd->p >= rd->end) return 1;
            if (*rd->p == ']') {
                rd->p++;
                return 0;
            }
            if (*rd->p != ',') return 1;
            rd->p++;
            rd_ws(rd);
        }
    default:
        if (c == '-' || (c >= '0' && c <= '9')) return rd_num_skip(rd);
        return 1;
    }
}

static int key_is(const unsigned char *s, Py_ssize_t n, const char *lit) {
    size_t k = strlen(lit);
    return (size_t)n == k && memcmp(s, lit, k) == 0;
}

/* a value for a field of type `float`: the nearest double; 0 ok, 1 decline */
static int rd_double(Rd *rd, double *out) {
    NumTok t;
    if (rd->p >= rd->end || !(*rd->p == '-' || (*rd->p >= '0' && *rd->p <= '9')) || rd_num(rd, &t)) return 1;
    return num_double(&t, out);
}

/* a value for a field of type `float | None`: *set 0 for null; 0 ok, 1 decline */
static int rd_double_or_null(Rd *rd, signed char *set, double *out) {
    if (rd->p < rd->end && *rd->p == 'n') {
        *set = 0;
        return rd_lit(rd, "null", 4);
    }
    *set = 1;
    return rd_double(rd, out);
}

/* a value for a field of type `I64 | None` etc.: *set 0 for null; 0 ok, 1 decline */
static int rd_int_or_null(Rd *rd, long long lo, long long hi, signed char *set, long long *out) {
    if (rd->p < rd->end && *rd->p == 'n') {
        *set = 0;
        return rd_lit(rd, "null", 4);
    }
    NumTok t;
    if (rd->p >= rd->end || !(*rd->p == '-' || (*rd->p >= '0' && *rd->p <= '9')) || rd_num(rd, &t)) return 1;
    if (num_int(&t, lo, hi, out)) return 1;
    *set = 1;
    return 0;
}

#define I32_LO (-2147483647LL - 1)
#define I32_HI 2147483647LL

/* a kept string (ph, cat, name, a string stream): 0 ok, 1 decline, -1 error */
static int rd_kept_str(Rd *rd, PyObject **out, Memo *memo) {
    const unsigned char *s;
    Py_ssize_t n;
    int f;
    if (rd->p >= rd->end || *rd->p != '"' || rd_str(rd, &s, &n, &f) || (f & 2)) return 1;
    if (memo != NULL && memo->s != NULL && memo->n == n && memcmp(memo->p, s, (size_t)n) == 0) {
        *out = memo->s;
        return 0;
    }
    int rc = sc_get(rd->sc, s, n, f & 1, out);
    if (rc == 0 && memo != NULL) {
        memo->p = s;
        memo->n = n;
        memo->s = *out;
    }
    return rc;
}

/* parse.Args: the fields the loop reads, and the [memory] fields checked (the event is decoded again for those);
   0 ok, 1 decline, -1 error */
static int mem_field(const unsigned char *k, Py_ssize_t kn) { /* the index in Rec.mem of a [memory] field, or -1 */
    switch (kn) { /* by length first: most args keys are none of these */
    case 5: return memcmp(k, "Bytes", 5) == 0 ? 0 : -1;
    case 15: return memcmp(k, "Total Allocated", 15) == 0 ? 1 : -1;
    case 14: return memcmp(k, "Total Reserved", 14) == 0 ? 2 : -1;
    case 11: return memcmp(k, "Device Type", 11) == 0 ? 3 : -1;
    case 9: return memcmp(k, "Device Id", 9) == 0 ? 4 : -1;
    default: return -1;
    }
}

static int rd_args(Rd *rd, Rec *r) {
    r->has_args = 1;
    r->has_corr = r->has_occ = r->has_dev = r->dev_ovf = r->stream_t = r->bytes_t = r->mem_set = 0;
    r->stream_o = NULL;
    rd->p++;
    rd_ws(rd);
    if (rd->p < rd->end && *rd->p == '}') {
        rd->p++;
        return 0;
    }
    for (;;) {
        const unsigned char *k;
        Py_ssize_t kn;
        if (rd_key(rd, &k, &kn)) return 1;
        rd_ws(rd);
        if (rd->p >= rd->end || *rd->p != ':') return 1;
        rd->p++;
        rd_ws(rd);
        if (rd->p >= rd->end) return 1;
        signed char set;
        long long iv;
        int mf;
        if (key_is(k, kn, "correlation")) {
            if (rd_int_or_null(rd, LLONG_MIN, LLONG_MAX, &r->has_corr, &r->corr)) return 1;
        } else if (key_is(k, kn, "stream")) {
            r->stream_o = NULL;
            if (*rd->p == '"') { /* a string stream (ROCm writes "0x0"): _stream_of maps it */
                int rc = rd_kept_str(rd, &r->stream_o, NULL);
                if (rc) return rc;
                r->stream_t = 2;
            } else {
                if (rd_int_or_null(rd, LLONG_MIN, LLONG_MAX, &set, &r->stream)) return 1;
                r->stream_t = set;
            }
        } else if (key_is(k, kn, "device")) {
            if (rd_int_or_null(rd, LLONG_MIN, LLONG_MAX, &r->has_dev, &r->dev)) return 1;
        } else if (key_is(k, kn, "bytes")) {
            if (*rd->p == 'n') {
                if (rd_lit(rd, "null", 4)) return 1;
                r->bytes_t = 0;
            } else {
                NumTok t;
                if (!(*rd->p == '-' || (*rd->p >= '0' && *rd->p <= '9')) || rd_num(rd, &t)) return 1;
                if (t.is_int) {
                    if (num_int(&t, LLONG_MIN, LLONG_MAX, &r->bytes_i)) return 1;
                    r->bytes_t = 1;
                } else {
                    if (num_double(&t, &r->bytes_f) || !(r->bytes_f >= 0.0 && r->bytes_f <= 4611686018427387904.0)) return 1;
                    r->bytes_t = 2;
                }
            }
        } else if (key_is(k, kn, "est. achieved occupancy %")) {
            if (rd_double_or_null(rd, &r->has_occ, &r->occ)) return 1;
        } else if ((mf = mem_field(k, kn)) >= 0) { /* I64 | None, the device type and id I32 | None */
            if (rd_int_or_null(rd, mf < 3 ? LLONG_MIN : I32_LO, mf < 3 ? LLONG_MAX : I32_HI, &set, &iv)) return 1;
            r->mem[mf] = iv;
            if (set) r->mem_set |= (signed char)(1 << mf);
            else r->mem_set &= (signed char)~(1 << mf);
        } else if (rd_skip(rd, 2)) {
            return 1;
        }
        rd_ws(rd);
        if (rd->p >= rd->end) return 1;
        if (*rd->p == '}') {
            rd->p++;
            return 0;
        }
        if (*rd->p != ',') return 1;
        rd->p++;
        rd_ws(rd);
    }
}

/* one parse.Event at rd->p ('{'): 0 ok, 1 decline, -1 error */
static int rd_event(Rd *rd, Rec *r, PyObject *empty) {
    memset(r, 0, sizeof(*r));
    r->mem_read = 1;
    r->ph = r->cat = r->name = empty;
    r->ts = NAN;
    r->dur = 0.0;
    r->src = (const char *)rd->p;
    rd->p++;
    rd_ws(rd);
    if (rd->p < rd->end && *rd->p == '}') {
        rd->p++;
        r->len = (const char *)rd->p - r->src;
        return 0;
    }
    for (;;) {
        const unsigned char *k;
        Py_ssize_t kn;
        int f, rc = 0;
        if (rd_key(rd, &k, &kn)) return 1;
        rd_ws(rd);
        if (rd->p >= rd->end || *rd->p != ':') return 1;
        rd->p++;
        rd_ws(rd);
        if (rd->p >= rd->end) return 1;
        NumTok t;
        if (key_is(k, kn, "ph")) {
            rc = rd_kept_str(rd, &r->ph, &rd->ph);
        } else if (key_is(k, kn, "cat")) {
            rc = rd_kept_str(rd, &r->cat, &rd->cat);
        } else if (key_is(k, kn, "name")) {
            rc = rd_kept_str(rd, &r->name, NULL);
        } else if (key_is(k, kn, "ts") || key_is(k, kn, "dur")) {
            double v;
            if (rd_double(rd, &v)) return 1;
            if (k[0] == 't') r->ts = v;
            else r->dur = v;
        } else if (key_is(k, kn, "args")) {
            if (*rd->p == 'n') {
                if (rd_lit(rd, "null", 4)) return 1;
                r->has_args = 0;
                r->has_corr = r->has_occ = r->has_dev = r->stream_t = r->bytes_t = r->mem_set = 0;
                r->stream_o = NULL;
            } else if (*rd->p != '{') {
                return 1;
            } else {
                rc = rd_args(rd, r);
                if (rc) return rc;
            }
        } else if (key_is(k, kn, "tid")) { /* int | float | str | None, kept for [memory] events */
            unsigned char c = *rd->p;
            if (c == '"') {
                const unsigned char *s;
                Py_ssize_t n;
                if (rd_str(rd, &s, &n, &f) || f) return 1; /* ASCII without escapes: its bytes are the str */
                r->tid_t = 3;
                r->tid_s = (const char *)s;
                r->tid_n = n;
            } else if (c == 'n') {
                if (rd_lit(rd, "null", 4)) return 1;
                r->tid_t = 0;
            } else { /* msgspec rejects a float out of range; the reader declines ints beyond int64 */
                if (!(c == '-' || (c >= '0' && c <= '9')) || rd_num(rd, &t) || t.big) return 1;
                if (t.is_int) {
                    if (num_int(&t, LLONG_MIN, LLONG_MAX, &r->tid_i)) return 1;
                    r->tid_t = 1;
                } else {
                    if (num_double(&t, &r->tid_f)) return 1;
                    r->tid_t = 2;
                }
            }
        } else if (rd_skip(rd, 1)) {
            return 1;
        }
        if (rc) return rc;
        rd_ws(rd);
        if (rd->p >= rd->end) return 1;
        if (*rd->p == '}') {
            rd->p++;
            r->len = (const char *)rd->p - r->src;
            return 0;
        }
        if (*rd->p != ',') return 1;
        rd->p++;
        rd_ws(rd);
    }
}

/* A batch (one JSON array of objects, the whole buffer) read one element at a time: one(rd, rec, ctx, &keep)
   reads the object at rd->p into the next record of *recs (item size bytes, grown as needed: *n used of *cap),
   which is kept where it sets keep (1 before the call). 0 ok, 1 decline, -1 error (*recs stays the caller's to
   free either way). Shared by decode_consume and attribute_ops. */
typedef int (*ReadOne)(Rd *rd, void *rec, void *ctx, int *keep);

static int rd_batch(Rd *rd, void **recs, Py_ssize_t *n, Py_ssize_t *cap, size_t size, ReadOne one, void *ctx) {
    rd_ws(rd);
    if (rd->p >= rd->end || *rd->p != '[') return 1;
    rd->p++;
    rd_ws(rd);
    if (rd->p < rd->end && *rd->p == ']') {
        rd->p++;
    } else {
        for (;;) {
            if (rd->p >= rd->end || *rd->p != '{') return 1;
            if (*n == *cap) {
                Py_ssize_t nc = *cap ? *cap * 2 : 4096;
                void *nr = PyMem_Realloc(*recs, (size_t)nc * size);
                if (nr == NULL) {
                    PyErr_NoMemory();
                    return -1;
                }
                *recs = nr;
                *cap = nc;
            }
            int keep = 1, rc = one(rd, (char *)*recs + (size_t)*n * size, ctx, &keep);
            if (rc) return rc;
            if (keep) (*n)++;
            rd_ws(rd);
            if (rd->p >= rd->end) return 1;
            if (*rd->p == ']') {
                rd->p++;
                break;
            }
            if (*rd->p != ',') return 1;
            rd->p++;
            rd_ws(rd);
        }
    }
    rd_ws(rd);
    return rd->p != rd->end;
}

static int rd_event_one(Rd *rd, void *rec, void *empty, int *keep) {
    (void)keep;
    return rd_event(rd, rec, empty);
}

/* reader_reset(): drop the strings kept for the file just read */
static PyObject *reader_reset(PyObject *module, PyObject *unused) {
    (void)module;
    (void)unused;
    if (!reader_busy) sc_free(&file_cache);
    Py_RETURN_NONE;
}

/* decode_consume(parser, batch, l_corr, l_ts, l_dur, cpu_starts): what consume_events returns (launches, X events,
   runtime calls; fd.events counted), or NotImplemented with nothing changed (the caller then decodes the batch
   with msgspec) */
static PyObject *decode_consume(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "decode_consume(parser, batch, l_corr, l_ts, l_dur, cpu_starts)");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = NULL, *empty = PyUnicode_New(0, 0);
    Rd rd;
    memset(&rd, 0, sizeof(rd));
    rd.p = (const unsigned char *)view.buf;
    rd.end = rd.p + view.len;
    SCache local;
    memset(&local, 0, sizeof(local));
    int outer = !reader_busy; /* this call uses the kept cache and records */
    Rec *recs = NULL;
    Py_ssize_t n = 0, cap = 0;
    if (outer) {
        reader_busy = 1;
        if (file_cache.used > FILE_CACHE_ENTRIES || file_cache.bytes > FILE_CACHE_BYTES) sc_free(&file_cache);
        rd.sc = &file_cache;
        recs = kept_recs;
        cap = kept_cap;
    } else {
        rd.sc = &local;
    }
    if (empty == NULL) goto done;
    {
        void *buf = recs;
        int rc = rd_batch(&rd, &buf, &n, &cap, sizeof(Rec), rd_event_one, empty);
        recs = buf;
        if (rc < 0) goto done;
        if (rc > 0) goto decline;
    }
    result = consume_core(args[0], recs, n, args + 2, 1);
    goto done;
decline:
    Py_INCREF(Py_NotImplemented);
    result = Py_NotImplemented;
done:
    if (outer && cap <= KEPT_RECORDS) {
        kept_recs = recs;
        kept_cap = cap;
    } else {
        PyMem_Free(recs);
        if (outer) {
            kept_recs = NULL;
            kept_cap = 0;
        }
    }
    if (outer) reader_busy = 0;
    else sc_free(&local);
    Py_XDECREF(empty);
    PyBuffer_Release(&view);
    return result;
}

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
    rd->p++;
    rd_ws(rd);
    if (rd->p < rd->end && *rd->p == '}') {
        rd->p++;
        return 0;
    }
    for (;;) {
        const unsigned char *k;
        Py_ssize_t kn;
        if (rd_key(rd, &k, &kn)) return 1;
        rd_ws(rd);
        if (rd->p >= rd->end || *rd->p != ':') return 1;
        rd->p++;
        rd_ws(rd);
        if (rd->p >= rd->end) return 1;
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
        rd_ws(rd);
        if (rd->p >= rd->end) return 1;
        if (*rd->p == '}') {
            rd->p++;
            break;
        }
        if (*rd->p != ',') return 1;
        rd->p++;
        rd_ws(rd);
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
static PyObject *attribute_ops(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
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
    if (outer && cap <= KEPT_OPS) {
        kept_ops = recs;
        kept_ops_cap = cap;
    } else {
        PyMem_Free(recs);
        if (outer) {
            kept_ops = NULL;
            kept_ops_cap = 0;
        }
    }
    if (outer) ops_busy = 0;
    PyBuffer_Release(&opv);
    PyBuffer_Release(&bestv);
    PyBuffer_Release(&view);
    return result;
}

/* attribute_log(ts, dur, name, tid, threads, spans, best, op, names, intern): memory.attribute_log's loop over the
   op log (memory.OpLog's columns; threads[log tid] -> index in mem.tids or -1); None, or NotImplemented with
   nothing changed (buffers or indices not as expected) */
static PyObject *attribute_log(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
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

/* gather(column, idx): array(column.typecode, (column[i] for i in idx)) for an array column of 4- or 8-byte items
   and an array('i') of indices within it; NotImplemented otherwise (the caller's Python loop then says why) */
static PyObject *gather(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "gather(column, idx)");
        return NULL;
    }
    Py_buffer col, ix;
    if (PyObject_GetBuffer(args[0], &col, PyBUF_FORMAT) < 0) return NULL;
    if (PyObject_GetBuffer(args[1], &ix, PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&col);
        return NULL;
    }
    PyObject *result = NULL, *typecode = NULL;
    Py_ssize_t size = col.itemsize, n = ix.len / 4, len = size > 0 ? col.len / size : 0;
    if (strcmp(ix.format, "i") != 0 || ix.itemsize != 4 || (size != 4 && size != 8) || col.format == NULL ||
        strlen(col.format) != 1)
        goto decline;
    const int *idx = ix.buf;
    for (Py_ssize_t k = 0; k < n; k++)
        if (idx[k] < 0 || idx[k] >= len) goto decline;
    char *out = PyMem_Malloc((size_t)(n > 0 ? n : 1) * (size_t)size);
    if (out == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (size == 8) {
        const uint64_t *c = col.buf;
        uint64_t *o = (uint64_t *)(void *)out;
        for (Py_ssize_t k = 0; k < n; k++) o[k] = c[idx[k]];
    } else {
        const uint32_t *c = col.buf;
        uint32_t *o = (uint32_t *)(void *)out;
        for (Py_ssize_t k = 0; k < n; k++) o[k] = c[idx[k]];
    }
    PyObject *bytes = PyBytes_FromStringAndSize(out, n * size);
    PyMem_Free(out);
    if (bytes == NULL) goto done;
    typecode = PyUnicode_FromString(col.format);
    if (typecode != NULL) result = PyObject_CallFunctionObjArgs(array_type, typecode, bytes, NULL);
    Py_DECREF(bytes);
    goto done;
decline:
    result = Py_NewRef(Py_NotImplemented);
done:
    Py_XDECREF(typecode);
    PyBuffer_Release(&ix);
    PyBuffer_Release(&col);
    return result;
}

/* ---- LaunchJoin.add (profstack/analysis/gpu.py) without its pruning ---- */

static PyObject *join_launches(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "join_launches(join, corrs, starts, durs)");
        return NULL;
    }
    PyObject *join = args[0], *result = NULL, *launches = NULL, *unjoined = NULL, *first_o = NULL, *last_o = NULL;
    PyObject *count_o = NULL;
    Col cc = {0}, cs = {0}, cd = {0};
    Py_ssize_t n = -1;
    int rc = col_get_obj(args[1], "q", 8, &cc, &n);
    if (rc == 0) rc = col_get_obj(args[2], "d", 8, &cs, &n);
    if (rc == 0) rc = col_get_obj(args[3], "d", 8, &cd, &n);
    if (rc < 0) goto done;
    if (rc > 0 || n == 0) goto decline;
    if ((launches = PyObject_GetAttrString(join, "launches")) == NULL) goto done;
    if ((unjoined = PyObject_GetAttrString(join, "unjoined")) == NULL) goto done;
    if ((first_o = PyObject_GetAttrString(join, "first_ts")) == NULL) goto done;
    if ((last_o = PyObject_GetAttrString(join, "last_end")) == NULL) goto done;
    if ((count_o = PyObject_GetAttrString(join, "count")) == NULL) goto done;
    if (!PyDict_CheckExact(launches) || !PySet_CheckExact(unjoined) || !PyFloat_CheckExact(last_o) ||
        !(first_o == Py_None || PyFloat_CheckExact(first_o)) || !PyLong_CheckExact(count_o))
        goto decline;
    const long long *corrs = cc.b.buf;
    const double *starts = cs.b.buf, *durs = cd.b.buf;
    /* first = min(starts): the first smallest, as min() keeps it */
    double first = starts[0];
    for (Py_ssize_t j = 1; j < n; j++)
        if (starts[j] < first) first = starts[j];
    if (first_o == Py_None || first < PyFloat_AS_DOUBLE(first_o)) {
        PyObject *f = PyFloat_FromDouble(first);
        if (f == NULL || PyObject_SetAttrString(join, "first_ts", f) < 0) {
            Py_XDECREF(f);
            goto done;
        }
        Py_DECREF(f);
    }
    /* last_end = max(last_end, *(start + dur)): an item replaces the current one only when greater (NaN never) */
    double last = PyFloat_AS_DOUBLE(last_o);
    for (Py_ssize_t j = 0; j < n; j++) {
        double v = starts[j] + durs[j];
        if (v > last) last = v;
    }
    {
        PyObject *f = PyFloat_FromDouble(last);
        if (f == NULL || PyObject_SetAttrString(join, "last_end", f) < 0) {
            Py_XDECREF(f);
            goto done;
        }
        Py_DECREF(f);
        PyObject *k = PyLong_FromSsize_t(n);
        PyObject *c = k ? PyNumber_Add(count_o, k) : NULL;
        Py_XDECREF(k);
        if (c == NULL || PyObject_SetAttrString(join, "count", c) < 0) {
            Py_XDECREF(c);
            goto done;
        }
        Py_DECREF(c);
    }
    if (PySet_GET_SIZE(unjoined)) { /* a launch whose op was already analysed: the caller raises */
        for (Py_ssize_t j = 0; j < n; j++) {
            PyObject *k = PyLong_FromLongLong(corrs[j]);
            if (k == NULL) goto done;
            int in = PySet_Contains(unjoined, k);
            if (in) {
                if (in > 0) result = k;
                else Py_DECREF(k);
                goto done;
            }
            Py_DECREF(k);
        }
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *k = PyLong_FromLongLong(corrs[j]);
        PyObject *v = k ? PyComplex_FromDoubles(starts[j], durs[j]) : NULL;
        int r = v == NULL ? -1 : PyDict_SetItem(launches, k, v);
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (r < 0) goto done;
    }
    Py_INCREF(Py_None);
    result = Py_None;
    goto done;
decline:
    Py_INCREF(Py_NotImplemented);
    result = Py_NotImplemented;
done:
    col_release(&cc);
    col_release(&cs);
    col_release(&cd);
    Py_XDECREF(launches);
    Py_XDECREF(unjoined);
    Py_XDECREF(first_o);
    Py_XDECREF(last_o);
    Py_XDECREF(count_o);
    return result;
}

static PyObject *cache_stats(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    return Py_BuildValue("{s:n,s:n,s:n,s:i}", "declined", sc_declined, "max_probe", sc_max_probe, "max_probes",
                         (Py_ssize_t)SC_MAX_PROBES, "degenerate", hash_degenerate);
}

static PyObject *test_degenerate_hash(PyObject *self, PyObject *flag) {
    (void)self;
    int on = PyObject_IsTrue(flag);
    if (on < 0) return NULL;
    hash_degenerate = on;
    sc_free(&file_cache);
    sc_declined = sc_max_probe = 0;
    Py_RETURN_NONE;
}

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
     "consume_events(parser, events, l_corr, l_ts, l_dur, cpu_starts): _Parser._consume_events in C, or NotImplemented"},
    {"decode_consume", (PyCFunction)(void (*)(void))decode_consume, METH_FASTCALL,
     "decode_consume(parser, batch, l_corr, l_ts, l_dur, cpu_starts): the batch's JSON read into the same loop "
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
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_gpuaccel", "C per-op loop of GpuAccumulator.add", -1,
                                       methods, NULL, NULL, NULL, NULL};

static int seed_hash(void) {
    PyObject *os = PyImport_ImportModule("os");
    if (os == NULL) return -1;
    PyObject *bytes = PyObject_CallMethod(os, "urandom", "i", (int)sizeof(hash_key));
    Py_DECREF(os);
    if (bytes == NULL) return -1;
    if (!PyBytes_Check(bytes) || PyBytes_GET_SIZE(bytes) != (Py_ssize_t)sizeof(hash_key)) {
        Py_DECREF(bytes);
        PyErr_SetString(PyExc_RuntimeError, "os.urandom gave no key for the string cache");
        return -1;
    }
    memcpy(hash_key, PyBytes_AS_STRING(bytes), sizeof(hash_key));
    Py_DECREF(bytes);
    return 0;
}

PyMODINIT_FUNC PyInit__gpuaccel(void) {
    if (seed_hash() < 0) return NULL;
    PyObject *arr = PyImport_ImportModule("array");
    if (arr == NULL) return NULL;
    array_type = PyObject_GetAttrString(arr, "array");
    Py_DECREF(arr);
    if (array_type == NULL) return NULL;
    return PyModule_Create(&moduledef);
}
