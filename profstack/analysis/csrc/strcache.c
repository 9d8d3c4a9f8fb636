#include "common.h"
#include "strcache.h"

SCache file_cache;
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
void sc_free(SCache *c) {
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
int sc_get(SCache *c, const unsigned char *p, Py_ssize_t n, int high, PyObject **out) {
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
PyObject *cache_stats(PyObject *self, PyObject *noargs) {
    (void)self;
    (void)noargs;
    return Py_BuildValue("{s:n,s:n,s:n,s:i}", "declined", sc_declined, "max_probe", sc_max_probe, "max_probes",
                         (Py_ssize_t)SC_MAX_PROBES, "degenerate", hash_degenerate);
}
PyObject *test_degenerate_hash(PyObject *self, PyObject *flag) {
    (void)self;
    int on = PyObject_IsTrue(flag);
    if (on < 0) return NULL;
    hash_degenerate = on;
    sc_free(&file_cache);
    sc_declined = sc_max_probe = 0;
    Py_RETURN_NONE;
}
int seed_hash(void) {
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
