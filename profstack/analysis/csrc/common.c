#include "common.h"

/* ---- updates of Python objects held in lists, with Python's semantics ---- */
int set_item(PyObject *list, Py_ssize_t k, PyObject *v) { /* steals v */
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
int add_long(PyObject *list, Py_ssize_t k, long long v) {
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
int add_obj(PyObject *list, Py_ssize_t k, PyObject *o) {
    PyObject *item = get_item(list, k);
    if (item == NULL) return -1;
    PyObject *res = PyNumber_InPlaceAdd(item, o);
    Py_DECREF(item);
    return set_item(list, k, res);
}
/* list[k] += v (v a float) */
int add_double(PyObject *list, Py_ssize_t k, double v) {
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
int cmp_item_long(PyObject *list, Py_ssize_t k, long long v, int op) {
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
int round_to_int(double x, int up, Num *out, PyObject **big) {
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
int col_get(PyObject *ops, const char *attr, const char *fmt, Py_ssize_t itemsize, Col *c, Py_ssize_t *n) {
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
int col_get_obj(PyObject *a, const char *fmt, Py_ssize_t itemsize, Col *c, Py_ssize_t *n) {
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
void col_release(Col *c) {
    if (c->ok) PyBuffer_Release(&c->b);
    c->ok = 0;
}
int dbuf_push(DBuf *d, double x) {
    if (grow((void **)&d->v, &d->cap, d->n, sizeof(double), 256) < 0) return -1;
    d->v[d->n++] = x;
    return 0;
}
PyObject *array_type = NULL;
PyObject *dbuf_array(const DBuf *d) { /* array('d', ...) */
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
PyObject *attr(PyObject *o, const char *name) { return PyObject_GetAttrString(o, name); }
/* m.starts.frombytes(s), m.ends.frombytes(e) for an intervals.Merged m, then empty both buffers */
int merged_extend(PyObject *m, DBuf *s, DBuf *e) {
    if (s->n == 0) return 0;
    PyObject *st = attr(m, "starts"), *en = attr(m, "ends");
    int bad = st == NULL || en == NULL || dbuf_extend(st, s) < 0 || dbuf_extend(en, e) < 0;
    Py_XDECREF(st);
    Py_XDECREF(en);
    s->n = e->n = 0;
    return bad ? -1 : 0;
}
int attr_num(PyObject *o, const char *name, Num *n, int *unsupported) {
    PyObject *v = attr(o, name);
    if (v == NULL) return -1;
    if (num_from(v, n) < 0) *unsupported = 1;
    Py_DECREF(v);
    return 0;
}
/* a float or an int within +-2**53, as a double that compares with doubles as the original does */
int exact_double(const Num *n, double *out) {
    if (!n->is_int) {
        *out = n->f;
        return 0;
    }
    if (n->i > (long long)LIM53 || n->i < -(long long)LIM53) return -1;
    *out = (double)n->i;
    return 0;
}
/* gather(column, idx): array(column.typecode, (column[i] for i in idx)) for an array column of 4- or 8-byte items
   and an array('i') of indices within it; NotImplemented otherwise (the caller's Python loop then says why) */
PyObject *gather(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
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
