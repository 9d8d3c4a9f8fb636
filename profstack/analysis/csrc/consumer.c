#include "common.h"
#include "consumer.h"
#include "reader.h"

/* ---- _Parser._consume_events (profstack/analysis/parse.py): decoded events into columns and aggregates ---- */

/* a growing buffer of fixed-size items, appended to an array.array at the end (frombytes) */
typedef struct {
    char *v;
    Py_ssize_t n, cap, size;
    PyObject *arr; /* the target array (borrowed from its owner, kept alive by an extra reference) */
} ABuf;
static int abuf_push(ABuf *b, const void *x) {
    if (grow((void **)&b->v, &b->cap, b->n, (size_t)b->size, 1024) < 0) return -1;
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
/* ABufs onto ``n`` array attributes of ``owner`` (names[k], of typecode fmts[k] and item size sizes[k]); *len:
   the first one's length. 0 ok, 1 decline, -1 error */
static int abufs_init(ABuf *bufs, PyObject *owner, int n, const char *const *names, const char *const *fmts,
                      const Py_ssize_t *sizes, Py_ssize_t *len) {
    for (int k = 0; k < n; k++) {
        PyObject *a = PyObject_GetAttrString(owner, names[k]);
        if (a == NULL) return -1;
        if (k == 0) *len = PyObject_Length(a);
        int r = *len < 0 ? -1 : abuf_init(&bufs[k], a, fmts[k], sizes[k]);
        Py_DECREF(a);
        if (r) return r;
    }
    return 0;
}
static void abuf_free(ABuf *b) {
    PyMem_Free(b->v);
    Py_XDECREF(b->arr);
    memset(b, 0, sizeof(*b));
}
/* the slot offsets of the msgspec structs parse.Event and parse.Args (member descriptors) */
static PyObject *EventT = NULL, *ArgsT = NULL, *RawT = NULL, *ExtOfText = NULL;
static Py_ssize_t o_ph, o_cat, o_name, o_ts, o_dur, o_args, o_corr, o_stream, o_bytes, o_occ, o_dev, o_ext, o_ext2, o_types;
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
    PyObject *no_raw = PyObject_GetAttrString(parse, "NO_RAW");
    Py_DECREF(parse);
    if (ev == NULL || ar == NULL || no_raw == NULL || !PyType_Check(ev) || !PyType_Check(ar)) {
        Py_XDECREF(ev);
        Py_XDECREF(ar);
        Py_XDECREF(no_raw);
        return -1;
    }
    PyObject *raw_t = Py_NewRef((PyObject *)Py_TYPE(no_raw)); /* msgspec.Raw: the op types' fields */
    Py_DECREF(no_raw);
    if (slot_offset(ev, "ph", &o_ph) || slot_offset(ev, "cat", &o_cat) || slot_offset(ev, "name", &o_name) ||
        slot_offset(ev, "ts", &o_ts) || slot_offset(ev, "dur", &o_dur) || slot_offset(ev, "args", &o_args) ||
        slot_offset(ar, "correlation", &o_corr) || slot_offset(ar, "stream", &o_stream) ||
        slot_offset(ar, "bytes", &o_bytes) || slot_offset(ar, "occupancy", &o_occ) || slot_offset(ar, "device", &o_dev) ||
        slot_offset(ar, "external_id", &o_ext) || slot_offset(ar, "external_id_2021", &o_ext2) ||
        slot_offset(ar, "input_types", &o_types)) {
        Py_DECREF(ev);
        Py_DECREF(ar);
        Py_DECREF(raw_t);
        return 1;
    }
    PyObject *otm = PyImport_ImportModule("profstack.analysis.op_types");
    PyObject *eot = otm == NULL ? NULL : PyObject_GetAttrString(otm, "ext_of_text");
    Py_XDECREF(otm);
    if (eot == NULL) {
        Py_DECREF(ev);
        Py_DECREF(ar);
        Py_DECREF(raw_t);
        return -1;
    }
    EventT = ev;
    ArgsT = ar;
    RawT = raw_t;
    ExtOfText = eot;
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
       B_ADUR, B_GSTS, B_GSDUR, B_MTS, B_MTID, B_MDEV, B_MBYTES, B_MALLOC, B_MRES, B_MOP, B_LOGTS, B_LOGDUR, B_LOGNAME, B_LOGTID,
       B_PEXT, B_PNID, B_PDUR, B_LEMPTY, NBUF }; /* B_PEXT..B_PDUR: consecutive (abufs_init) */
/* the event a Python helper takes (new reference): the Event itself, or the one parse._ONE_DECODER decodes from
   the event's own bytes (the batch decoded as list[Event] holds exactly that Event) */
static PyObject *rec_event(const Rec *r, PyObject *one_decoder) {
    if (r->ev != NULL) {
        Py_INCREF(r->ev);
        return r->ev;
    }
    if (r->loose) /* one_decoder is the parse module's pair: (the strict decoder, the loose reading) */
        return PyObject_CallFunction(PyTuple_GET_ITEM(one_decoder, 1), "y#", r->src, r->len);
    return PyObject_CallMethod(PyTuple_GET_ITEM(one_decoder, 0), "decode", "y#", r->src, r->len);
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
/* ---- op_types.Collector's op and kernel (profstack/analysis/op_types.py), for the loop below ---- */
/* "Input type" texts -> class codes, for one collector at a time (tc_owner, a strong reference): the collector's
   types_code is called for a text not held here, so its own cache sees each text first where Python's loop shows
   it. Bounded (slots, probes, key length): beyond, the call is made each time. Emptied by reader_reset. */
#define TC_SLOTS 2048
#define TC_PROBES 8
#define TC_MAX_KEY 1024
typedef struct {
    uint64_t h;
    char *p;
    Py_ssize_t n;
    long long code;
} TCEnt;
static TCEnt tc[TC_SLOTS];
static size_t tc_used = 0;
static PyObject *tc_owner = NULL;
void types_cache_reset(void) {
    for (size_t i = 0; i < TC_SLOTS; i++) PyMem_Free(tc[i].p);
    memset(tc, 0, sizeof(tc));
    tc_used = 0;
    Py_CLEAR(tc_owner);
}
static uint64_t tc_hash(const char *p, Py_ssize_t n) { /* FNV-1a; colliding texts cost a call each, no more */
    uint64_t h = 1469598103934665603ull ^ (uint64_t)n;
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return h;
}
/* collector.types_code(text), through the cache: 0 ok (*code), -1 error */
static int types_code(PyObject *ot, const char *p, Py_ssize_t n, long long *code) {
    if (ot != tc_owner) {
        types_cache_reset();
        tc_owner = Py_NewRef(ot);
    }
    uint64_t h = tc_hash(p, n);
    size_t i = (size_t)h & (TC_SLOTS - 1);
    TCEnt *slot = NULL;
    for (int k = 0; k < TC_PROBES; k++, i = (i + 1) & (TC_SLOTS - 1)) {
        TCEnt *e = &tc[i];
        if (e->p == NULL) {
            slot = e;
            break;
        }
        if (e->h == h && e->n == n && memcmp(e->p, p, (size_t)n) == 0) {
            *code = e->code;
            return 0;
        }
    }
    PyObject *b = PyBytes_FromStringAndSize(p, n);
    PyObject *v = b == NULL ? NULL : PyObject_CallMethod(ot, "types_code", "O", b);
    Py_XDECREF(b);
    if (v == NULL) return -1;
    int bad = int64_of(v, code);
    Py_DECREF(v);
    if (bad) return -1;
    if (slot != NULL && n <= TC_MAX_KEY && tc_used < TC_SLOTS / 2) {
        char *copy = PyMem_Malloc(n > 0 ? (size_t)n : 1);
        if (copy != NULL) {
            memcpy(copy, p, (size_t)n);
            slot->h = h;
            slot->p = copy;
            slot->n = n;
            slot->code = *code;
            tc_used++;
        }
    }
    return 0;
}
/* op_types.external_id: "External id", else (absent or null) "external id": 1 with *ext, 0 none */
static int rec_ext(const Rec *r, long long *ext) {
    if (!r->has_args) return 0;
    if (r->ext_t == 1) {
        *ext = r->ext;
        return 1;
    }
    if (r->ext_t == 0 && r->ext2_t == 1) {
        *ext = r->ext2;
        return 1;
    }
    return 0;
}
/* Collector._code: the class code of the operator of External id ext (1, *code), or none remembered (0); -1 error */
static int ot_code(PyObject *dense, PyObject *ops, long long ext, long long *code) {
    if (ext >= 0 && ext < PyByteArray_GET_SIZE(dense)) {
        unsigned char got = (unsigned char)PyByteArray_AS_STRING(dense)[ext];
        *code = (long long)got - 2;
        return got != 0;
    }
    PyObject *ko = PyLong_FromLongLong(ext);
    if (ko == NULL) return -1;
    PyObject *co = PyDict_GetItemWithError(ops, ko); /* borrowed */
    Py_DECREF(ko);
    if (co == NULL) return PyErr_Occurred() ? -1 : 0;
    return int64_of(co, code) < 0 ? -1 : 1;
}
/* Collector.op's store (the bound checked by the caller): 1 a new operator, 0 one replaced, -1 error */
static int ot_store(PyObject *dense, PyObject *ops, long long dense_ids, long long ext, long long code) {
    if (ext >= 0 && ext < dense_ids) {
        Py_ssize_t len = PyByteArray_GET_SIZE(dense);
        if (ext >= len) { /* dense.extend(bytes(ext + 1 - len)) */
            if (PyByteArray_Resize(dense, (Py_ssize_t)ext + 1) < 0) return -1;
            memset(PyByteArray_AS_STRING(dense) + len, 0, (size_t)(ext + 1 - len));
        }
        char *d = PyByteArray_AS_STRING(dense);
        int fresh = d[ext] == 0;
        d[ext] = (char)(code + 2);
        return fresh;
    }
    PyObject *ko = PyLong_FromLongLong(ext), *co = PyLong_FromLongLong(code);
    int in = (ko == NULL || co == NULL) ? -1 : PyDict_Contains(ops, ko);
    int rc = in < 0 ? -1 : PyDict_SetItem(ops, ko, co);
    Py_XDECREF(ko);
    Py_XDECREF(co);
    return rc < 0 ? -1 : !in;
}
/* Collector._add: by_key[nid * 8 + code] += [1, max(dur, 0.0)] (a new cell [0, 0.0] first) */
static int ot_add(PyObject *by_key, long long nid, long long code, double dur) {
    PyObject *key = PyLong_FromLongLong(nid * 8 + code);
    if (key == NULL) return -1;
    PyObject *cell = PyDict_GetItemWithError(by_key, key); /* borrowed */
    if (cell == NULL) {
        if (PyErr_Occurred()) {
            Py_DECREF(key);
            return -1;
        }
        PyObject *z = PyLong_FromLong(0), *zf = PyFloat_FromDouble(0.0);
        cell = (z && zf) ? PyList_New(2) : NULL;
        if (cell != NULL) {
            PyList_SET_ITEM(cell, 0, z);
            PyList_SET_ITEM(cell, 1, zf);
        } else {
            Py_XDECREF(z);
            Py_XDECREF(zf);
        }
        int rc = cell == NULL ? -1 : PyDict_SetItem(by_key, key, cell);
        Py_XDECREF(cell); /* the dict holds it */
        if (rc < 0) {
            Py_DECREF(key);
            return -1;
        }
    }
    Py_DECREF(key);
    if (!PyList_CheckExact(cell) || PyList_GET_SIZE(cell) < 2) {
        PyErr_SetString(PyExc_TypeError, "an op_types cell is not [kernels, us]");
        return -1;
    }
    return add_long(cell, 0, 1) < 0 || add_double(cell, 1, 0.0 > dur ? 0.0 : dur) < 0 ? -1 : 0;
}
/* The loop of _consume_events over n records. count_events: also fd.events += n first (decode_consume, whose
   caller has not counted them). Returns (launches, X events, runtime calls), NotImplemented (nothing changed)
   or NULL. */
PyObject *consume_core(PyObject *parser, const Rec *recs, Py_ssize_t n, PyObject *const *arrays,
                              int count_events) {
    PyObject *result = NULL, *parse = NULL, *fd = NULL, *cat_kind = NULL, *memory_event_name = NULL;
    PyObject *cpu_agg = NULL, *rt_agg = NULL, *ids = NULL, *symbols = NULL, *feed = NULL, *ops = NULL;
    PyObject *devices = NULL, *other_name = NULL, *first_gpu = NULL, *one_decoder = NULL;
    PyObject *memory = NULL, *mem_tids = NULL;
    /* parser.op_log (memory.OpLog) while it is kept: the reader's timed CPU ops, for memory.attribute_log */
    PyObject *op_log = NULL, *log_name_ids = NULL, *log_tid_ids = NULL, *log_tids = NULL;
    /* parser.op_types (op_types.Collector) while it collects: its operators, cells and follow flags */
    PyObject *ot = NULL, *ot_ops = NULL, *ot_dense = NULL, *ot_by_key = NULL, *ot_follow = NULL;
    long long ot_max_ops = 0, ot_max_pending = 0, ot_invalid = 0, ot_yes = 0, ot_unknown = 0, ot_dense_ids = 0;
    long long ot_n_ops = 0; /* its n_ops, kept here and written back */
    long long ot_without = 0, ot_dropped = 0, ot_added = 0; /* its kernels_without_op, ops_dropped, n_ops: added at the end */
    Py_ssize_t pend_len = 0;
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
    long long n_frac = 0; /* GPU rows with a fraction of a µs in ts or dur (fd.gpu_fractional) */
    long long args_loose = 0; /* events whose int args were read by the loose rule (parse.decode_one counts them) */
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
                    OP_MEMSET = const_ll(parse, "OP_MEMSET", &bad), OP_SYNC = const_ll(parse, "OP_SYNC", &bad),
                    JOIN_MAYBE_EMPTY = const_ll(parse, "JOIN_MAYBE_EMPTY", &bad);
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
        if (!(time_limit <= LIM53)) goto decline; /* start_ns(ts) exact in int64 (2**53 * 1000 < 2**63) */
    }
    if ((cat_kind = PyObject_GetAttrString(parse, "CAT_KIND")) == NULL) goto error;
    if ((memory_event_name = PyObject_GetAttrString(parse, "MEMORY_EVENT")) == NULL) goto error;
    if ((other_name = PyObject_GetAttrString(parse, "OTHER_NAME")) == NULL) goto error;
    {
        PyObject *strict = PyObject_GetAttrString(parse, "_ONE_DECODER");
        PyObject *loose = strict == NULL ? NULL : PyObject_GetAttrString(parse, "event_from_loose");
        one_decoder = loose == NULL ? NULL : PyTuple_Pack(2, strict, loose);
        Py_XDECREF(strict);
        Py_XDECREF(loose);
        if (one_decoder == NULL) goto error;
    }
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
    int count_sync, whole_us;
    {
        PyObject *v = PyObject_GetAttrString(parser, "count_sync");
        if (v == NULL) goto error;
        count_sync = PyObject_IsTrue(v);
        Py_DECREF(v);
        if (count_sync < 0) goto error;
        if ((v = PyObject_GetAttrString(parser, "hta_compat")) == NULL) goto error;
        whole_us = PyObject_IsTrue(v); /* the start column's time model (gpu.start_ns) */
        Py_DECREF(v);
        if (whole_us < 0) goto error;
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
            abuf_init(&buf[B_LDUR], arrays[2], "d", 8) || abuf_init(&buf[B_CPU], arrays[3], "d", 8) ||
            abuf_init(&buf[B_LEMPTY], arrays[4], "b", 1))
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
        int r = abufs_init(&buf[B_MTS], memory, 7, mn, mf, ms, &mem_len);
        if (r < 0) goto error;
        if (r) goto decline;
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
        int r = abufs_init(&buf[B_LOGTS], op_log, 4, ln, lf, ls, &log_len);
        if (r < 0) goto error;
        if (r) goto decline;
    }
    if ((ot = PyObject_GetAttrString(parser, "op_types")) == NULL) goto error;
    if (ot == Py_None) {
        Py_CLEAR(ot);
    } else {
        PyObject *otm = PyImport_ImportModule("profstack.analysis.op_types");
        if (otm == NULL) goto error;
        int bad_o = 0;
        ot_invalid = const_ll(otm, "INVALID", &bad_o);
        ot_yes = const_ll(otm, "FOLLOW_YES", &bad_o);
        ot_unknown = const_ll(otm, "FOLLOW_UNKNOWN", &bad_o);
        ot_dense_ids = const_ll(otm, "DENSE_IDS", &bad_o);
        Py_DECREF(otm);
        ot_n_ops = const_ll(ot, "n_ops", &bad_o);
        ot_max_ops = const_ll(ot, "max_ops", &bad_o);
        ot_max_pending = const_ll(ot, "max_pending", &bad_o);
        if (bad_o) goto error;
        if ((ot_ops = PyObject_GetAttrString(ot, "ops")) == NULL || (ot_by_key = PyObject_GetAttrString(ot, "by_key")) == NULL ||
            (ot_follow = PyObject_GetAttrString(ot, "follow")) == NULL || (ot_dense = PyObject_GetAttrString(ot, "dense")) == NULL)
            goto error;
        if (!PyDict_CheckExact(ot_ops) || !PyDict_CheckExact(ot_by_key) || !PyByteArray_CheckExact(ot_follow) ||
            !PyByteArray_CheckExact(ot_dense) || ot_dense_ids < 0 || ot_dense_ids > PY_SSIZE_T_MAX / 2)
            goto decline;
        const char *pn[] = {"pending_ext", "pending_nid", "pending_dur"};
        const char *pf[] = {"q", "i", "d"};
        const Py_ssize_t ps[] = {8, 4, 8};
        int r = abufs_init(&buf[B_PEXT], ot, 3, pn, pf, ps, &pend_len);
        if (r < 0) goto error;
        if (r) goto decline;
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
        args_loose += r->loose;
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
            long long ext, code;
            if (ot != NULL && r->has_args && r->types_p != NULL && rec_ext(r, &ext)) { /* Collector.op */
                if (types_code(ot, r->types_p, r->types_n, &code) < 0) goto error;
                if (code != ot_invalid) {
                    if (ot_n_ops + ot_added >= ot_max_ops) {
                        ot_dropped += 1;
                    } else {
                        int fresh = ot_store(ot_dense, ot_ops, ot_dense_ids, ext, code);
                        if (fresh < 0) goto error;
                        ot_added += fresh;
                    }
                }
            }
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
                signed char maybe_empty = klass >= JOIN_MAYBE_EMPTY; /* a copy, memset, ...: may enqueue nothing */
                if (maybe_empty) klass -= JOIN_MAYBE_EMPTY;
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
                if (abuf_push(&buf[B_LDUR], &rd) < 0 || abuf_push(&buf[B_LEMPTY], &maybe_empty) < 0) goto error;
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
            if (ts != floor(ts) || dur != floor(dur)) n_frac += 1;
            long long sc = start_ns_small(ts, whole_us); /* |ts| < MAX_TIME_US <= 2**53: fits int64 */
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
            if (ot != NULL && kind == 3) { /* Collector.kernel */
                long long flag = nid < PyByteArray_GET_SIZE(ot_follow) ? PyByteArray_AS_STRING(ot_follow)[nid] : ot_unknown;
                if (flag == ot_unknown) {
                    PyObject *fv = PyObject_CallMethod(ot, "new_name", "L", nid);
                    if (fv == NULL) goto error;
                    int bad3 = int64_of(fv, &flag);
                    Py_DECREF(fv);
                    if (bad3) goto error;
                }
                long long ext;
                if (flag != ot_yes) {
                    /* not followed */
                } else if (!rec_ext(r, &ext)) {
                    ot_without += 1;
                } else {
                    long long code;
                    int found = ot_code(ot_dense, ot_ops, ext, &code);
                    if (found < 0) goto error;
                    if (!found) {
                        if (pend_len + buf[B_PEXT].n < ot_max_pending) {
                            if (abuf_push(&buf[B_PEXT], &ext) < 0 || abuf_push(&buf[B_PNID], &nid32) < 0 ||
                                abuf_push(&buf[B_PDUR], &dur) < 0)
                                goto error;
                        } else {
                            ot_without += 1;
                        }
                    } else if (code < 0) {
                        ot_without += 1;
                    } else if (ot_add(ot_by_key, nid, code, dur) < 0) {
                        goto error;
                    }
                }
            }
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
            long long sc = start_ns_small(ts, whole_us);
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
        add_attr_long(fd, "flow_finishes", flow_f) < 0 || add_attr_long(fd, "args_loose", args_loose) < 0 ||
        add_attr_long(fd, "gpu_fractional", n_frac) < 0)
        goto error_written;
    if (ot != NULL && (add_attr_long(ot, "kernels_without_op", ot_without) < 0 ||
                       add_attr_long(ot, "ops_dropped", ot_dropped) < 0 || add_attr_long(ot, "n_ops", ot_added) < 0))
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
            add_attr_long(fd, "args_loose", args_loose);
            add_attr_long(fd, "gpu_fractional", n_frac);
            PyErr_Clear();
        }
        if (ot != NULL) {
            add_attr_long(ot, "kernels_without_op", ot_without);
            add_attr_long(ot, "ops_dropped", ot_dropped);
            add_attr_long(ot, "n_ops", ot_added);
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
    Py_XDECREF(ot);
    Py_XDECREF(ot_ops);
    Py_XDECREF(ot_dense);
    Py_XDECREF(ot_by_key);
    Py_XDECREF(ot_follow);
    return result;
}
/* a msgspec.Raw's JSON text (borrowed from the Raw, which the event holds): 0 ok (*n 0: the empty default), 1 not
   a Raw */
static int raw_text(PyObject *o, const char **p, Py_ssize_t *n) {
    if ((PyObject *)Py_TYPE(o) != RawT) return 1;
    Py_buffer v;
    if (PyObject_GetBuffer(o, &v, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        return 1;
    }
    *p = v.buf;
    *n = v.len;
    PyBuffer_Release(&v); /* a Raw's bytes do not move while it lives */
    return 0;
}
/* an External id's text as the reader reads it (rd_ext), else (escapes, numbers it does not convert) as
   op_types.ext_of_text reads it: 0 ok, 1 decline (not a Raw), -1 error */
static int raw_ext(PyObject *o, signed char *t, long long *out) {
    const char *p;
    Py_ssize_t n;
    if (raw_text(o, &p, &n)) return 1;
    *t = 0;
    if (n == 0) return 0;
    Rd rd;
    memset(&rd, 0, sizeof(rd));
    rd.p = (const unsigned char *)p;
    rd.end = rd.p + n;
    if (rd_ext(&rd, t, out) == 0 && rd.p == rd.end) return 0;
    PyObject *v = PyObject_CallFunction(ExtOfText, "y#", p, n);
    if (v == NULL) return -1;
    *t = 2;
    int rc = 0;
    if (v != Py_None) {
        rc = int64_of(v, out) < 0 ? -1 : 0;
        *t = 1;
    }
    Py_DECREF(v);
    return rc;
}
/* consume_events(parser, events, l_corr, l_ts, l_dur, cpu_starts, l_maybe_empty): the loop over a list of
   parse.Event */
PyObject *consume_events(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "consume_events(parser, events, l_corr, l_ts, l_dur, cpu_starts, l_maybe_empty)");
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
        PyObject *xa = FLD(a, o_ext), *xb = FLD(a, o_ext2), *ty = FLD(a, o_types);
        if (!c || !st || !b || !oc || !dv || !xa || !xb || !ty) goto decline;
        int re = raw_ext(xa, &r->ext_t, &r->ext);
        if (re == 0) re = raw_ext(xb, &r->ext2_t, &r->ext2);
        if (re < 0) goto error;
        if (re > 0 || raw_text(ty, &r->types_p, &r->types_n)) goto decline;
        if (r->types_n == 0) r->types_p = NULL;
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
