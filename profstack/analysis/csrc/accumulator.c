#include "common.h"
#include "accumulator.h"

static inline size_t imap_hash(long long k) {
    unsigned long long x = (unsigned long long)k * 0x9E3779B97F4A7C15ULL;
    return (size_t)(x ^ (x >> 29));
}
int imap_get(const IMap *m, long long key) {
    if (m->cap == 0) return -1;
    size_t mask = (size_t)m->cap - 1;
    for (size_t j = imap_hash(key) & mask;; j = (j + 1) & mask) {
        if (m->vals[j] < 0) return -1;
        if (m->keys[j] == key) return m->vals[j];
    }
}
int imap_put(IMap *m, long long key, int val) { /* key not present */
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
void imap_free(IMap *m) {
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
    if (grow((void **)&set->v, &set->cap, set->n, sizeof(StreamSt), 16) < 0) return -1;
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
        if (e.i >= NS_LIM || e.i <= -NS_LIM) return 0;
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
/* A launch time on the ns clock, as gpu.py computes it: mode 0 ns_of(x), 1 ceil(x) * 1000, 2 floor(x) * 1000.
   0: *out within +-2**62; 1: beyond, a Python int in *big (new reference); -1: error (NaN, infinity: raised as
   math.floor / math.ceil raise) */
static int ns_time(double x, int mode, long long *out, PyObject **big) {
    *big = NULL;
    if (x > -LIM52 && x < LIM52) {
        *out = mode == 0 ? ns_of_small(x) : (long long)(mode == 1 ? ceil(x) : floor(x)) * 1000;
        return 0;
    }
    Num r; /* |x| >= 2**52: x is a whole number, ns_of(x) = ceil(x) * 1000 = floor(x) * 1000 */
    PyObject *v;
    int rr = round_to_int(x, mode == 1, &r, &v);
    if (rr < 0) return -1;
    if (rr == 0 && (v = PyLong_FromLongLong(r.i)) == NULL) return -1;
    PyObject *k = PyLong_FromLong(1000);
    *big = k == NULL ? NULL : PyNumber_Multiply(v, k);
    Py_XDECREF(k);
    Py_DECREF(v);
    return *big == NULL ? -1 : 1;
}
/* a + b (two ns_time results) - as a Python int where either is big: 0 and *out, 1 and *big, -1 error */
static int ns_sum(long long a, PyObject *abig, long long b, PyObject *bbig, long long *out, PyObject **big) {
    *big = NULL;
    if (abig == NULL && bbig == NULL) {
        __int128 v = (__int128)a + b;
        if (v > -(__int128)NS_LIM && v < (__int128)NS_LIM) {
            *out = (long long)v;
            return 0;
        }
    }
    PyObject *x = abig ? Py_NewRef(abig) : PyLong_FromLongLong(a);
    PyObject *y = bbig ? Py_NewRef(bbig) : PyLong_FromLongLong(b);
    *big = x && y ? PyNumber_Add(x, y) : NULL;
    Py_XDECREF(x);
    Py_XDECREF(y);
    return *big == NULL ? -1 : 1;
}
#define MAXT 64
PyObject *add_ops(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
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
    if (attr_num(acc, "delay_thr_ns", &thr_n, &unsupported) < 0) goto error;
    if (attr_num(acc, "union_ns", &union_n, &unsupported) < 0) goto error;
    if (attr_num(acc, "gpu_lo_ns", &gpu_lo, &unsupported) < 0) goto error;
    if (attr_num(acc, "gpu_hi_ns", &gpu_hi, &unsupported) < 0) goto error;
    int whole_us; /* the time model: HTA's whole µs (gpu.py: hta_compat), else ns as written */
    long long base = 0; /* GpuAccumulator.base_ns: ``closed`` holds intervals relative to it */
    {
        PyObject *v = attr(acc, "hta_compat");
        if (v == NULL) goto error;
        whole_us = PyObject_IsTrue(v);
        Py_DECREF(v);
        if (whole_us < 0) goto error;
        if ((v = attr(acc, "base_ns")) == NULL) goto error;
        if (v != Py_None) {
            Num b;
            if (num_from(v, &b) < 0 || !b.is_int || b.i >= NS_LIM || b.i <= -NS_LIM) unsupported = 1;
            else base = b.i;
        }
        Py_DECREF(v);
    }
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
    if ((time_by_kind = attr(acc, "time_by_kind_ns")) == NULL) goto error;
    if ((memset_l = attr(acc, "memset")) == NULL) goto error;
    if ((dir_cache = attr(acc, "dir_cache")) == NULL) goto error;
    if ((mem_dir = attr(acc, "mem_dir")) == NULL) goto error;
    if ((open_s_l = attr(acc, "open_s")) == NULL) goto error;
    if ((open_e_l = attr(acc, "open_e")) == NULL) goto error;
    if ((closed_l = attr(acc, "closed")) == NULL) goto error;
    if ((type_total_l = attr(acc, "type_total_ns")) == NULL) goto error;
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
            else if ((open_s[k].is_int && (open_s[k].i >= NS_LIM || open_s[k].i <= -NS_LIM)) ||
                     (open_e[k].is_int && (open_e[k].i >= NS_LIM || open_e[k].i <= -NS_LIM)))
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
        /* |ts|, |dur|, |ts + dur| < 2**52 µs and |start| < 2**62 ns: every end (start + ns_of(dur), or
           floor(ts + dur) * 1000) stays within +-2**62, so that the difference of any two fits int64 */
        double t = ts_col[i], d = dur_col[i], td = t + d;
        if (!(t > -LIM52 && t < LIM52 && d > -LIM52 && d < LIM52 && td > -LIM52 && td < LIM52)) goto decline;
        if (s_col[i] >= NS_LIM || s_col[i] <= -NS_LIM) goto decline;
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
            Num rc_n = {0, 0, rts}; /* rc = ceil(rts) if whole_us else rts */
            PyObject *big = NULL;
            int rr = whole_us ? round_to_int(rts, 1, &rc_n, &big) : 0;
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
        /* end_ns (gpu.py): within +-2**62 by the column checks */
        long long e = whole_us ? (long long)floor(ts + dur) * 1000 : s.i + ns_of_small(dur);
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
                if (grow((void **)&nids, &nid_cap, nid_n, sizeof(NidInfo), 64) < 0) goto error_nid;
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
                if (grow((void **)&kss, &ks_cap, ks_n, sizeof(KStat), 64) < 0) goto error_nid;
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
                    /* launch_end: floor(rts + rdur) * 1000 (HTA), or ns_of(rts) + ns_of(rdur) */
                    long long le = 0;
                    PyObject *big = NULL;
                    int rr;
                    if (whole_us) {
                        rr = ns_time(rts + rdur, 2, &le, &big);
                    } else {
                        long long a1 = 0, a2 = 0;
                        PyObject *b1 = NULL, *b2 = NULL;
                        rr = ns_time(rts, 0, &a1, &b1);
                        if (rr >= 0) rr = ns_time(rdur, 0, &a2, &b2);
                        if (rr >= 0) rr = ns_sum(a1, b1, a2, b2, &le, &big);
                        Py_XDECREF(b1);
                        Py_XDECREF(b2);
                    }
                    if (rr < 0) goto error_nid;
                    double delay; /* float(s - launch_end) / 1000.0 */
                    if (rr == 0) {
                        delay = (double)(s.i - le) / 1000.0; /* both within +-2**62 */
                    } else {
                        PyObject *so = PyLong_FromLongLong(s.i);
                        PyObject *diff = so ? PyNumber_Subtract(so, big) : NULL;
                        Py_XDECREF(so);
                        Py_DECREF(big);
                        if (diff == NULL) goto error_nid;
                        delay = PyLong_AsDouble(diff);
                        Py_DECREF(diff);
                        if (delay == -1.0 && PyErr_Occurred()) goto error_nid;
                        delay = delay / 1000.0;
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
                if (GT(open_e[kt], open_s[kt])) { /* relative to base_ns */
                    if (dbuf_push(&closed_s[kt], num_minus_as_double(&open_s[kt], base)) < 0 ||
                        dbuf_push(&closed_e[kt], num_minus_as_double(&open_e[kt], base)) < 0)
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
                if (has_launch) { /* ceil(rts) * 1000 (HTA) or ns_of(rts) > the previous end */
                    long long rc;
                    PyObject *big;
                    int rr = ns_time(rts, whole_us ? 1 : 0, &rc, &big);
                    if (rr < 0) goto error_nid;
                    if (rr == 1) {
                        PyObject *po = PyLong_FromLongLong(q->end);
                        launched_after = po == NULL ? -1 : PyObject_RichCompareBool(big, po, Py_GT);
                        Py_XDECREF(po);
                        Py_DECREF(big);
                        if (launched_after < 0) goto error_nid;
                    } else {
                        launched_after = rc > q->end;
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
        if (u == NULL || PyObject_SetAttrString(acc, "union_ns", u) < 0) {
            Py_XDECREF(u);
            goto error;
        }
        Py_DECREF(u);
        PyObject *lo = num_obj(&gpu_lo), *hi = num_obj(&gpu_hi);
        int bad = lo == NULL || hi == NULL || PyObject_SetAttrString(acc, "gpu_lo_ns", lo) < 0 ||
                  PyObject_SetAttrString(acc, "gpu_hi_ns", hi) < 0;
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
/* ---- LaunchJoin.add (profstack/analysis/gpu.py) without its pruning ---- */
PyObject *join_launches(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
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
