#include "common.h"
#include "accumulator.h"
#include "intervals.h"

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
PyObject *bins_add(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
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
PyObject *union_spans(PyObject *module, PyObject *sets) {
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
PyObject *partition(PyObject *module, PyObject *sets) {
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
/* us_column(col, base_us): gpu._us_column: array('d', (x / 1000.0 + base_us for x in col)), the accumulator's
   relative ns as µs on the timeline's clock (one division, one addition, as Python does them), or NotImplemented */
PyObject *us_column(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "us_column(col, base_us)");
        return NULL;
    }
    if (!PyFloat_CheckExact(args[1])) Py_RETURN_NOTIMPLEMENTED;
    double base = PyFloat_AS_DOUBLE(args[1]);
    Col c = {0};
    Py_ssize_t n = -1;
    int rc = col_get_obj(args[0], "d", 8, &c, &n);
    if (rc < 0) return NULL;
    if (rc > 0) {
        col_release(&c);
        Py_RETURN_NOTIMPLEMENTED;
    }
    DBuf out = {0};
    const double *x = c.b.buf;
    PyObject *result = NULL;
    for (Py_ssize_t k = 0; k < n; k++) {
        double v = x[k] / 1000.0;
        if (dbuf_push(&out, v + base) < 0) goto done;
    }
    result = dbuf_array(&out);
done:
    col_release(&c);
    PyMem_Free(out.v);
    return result;
}
