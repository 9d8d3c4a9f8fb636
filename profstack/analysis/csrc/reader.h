#ifndef PROFSTACK_READER_H
#define PROFSTACK_READER_H

/* The JSON reader: a batch's JSON read straight into records (decode_consume) without a parse.Event per event,
   declining (NotImplemented) on anything it does not read exactly, where msgspec reads the batch instead. */

#include "common.h"
#include "strcache.h"

typedef struct {
    const unsigned char *p; /* the bytes of the last string kept for this field, and its str (borrowed) */
    Py_ssize_t n;
    PyObject *s;
} Memo;
typedef struct {
    const unsigned char *p, *end;
    SCache *sc;
    Memo ph, cat; /* most events repeat the previous event's ph and cat */
    long long fractions; /* numbers with a fraction or exponent skipped so far (a loose event declines on one) */
} Rd;
static inline void rd_ws(Rd *rd) {
    const unsigned char *p = rd->p, *end = rd->end;
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    rd->p = p;
}
/* At the opening '{' or '[' of a container (rd->p): step in; 1 when it is empty (its ``close`` read too), else 0 */
static inline int rd_enter(Rd *rd, unsigned char close) {
    rd->p++;
    rd_ws(rd);
    if (rd->p < rd->end && *rd->p == close) {
        rd->p++;
        return 1;
    }
    return 0;
}
/* After a member's key: the ':' and the space around it. 0 ok, 1 decline (no ':', or nothing after it) */
int rd_colon(Rd *rd);
/* After a member: 0 when ',' (read) says another follows, 2 when the container's ``close`` (read) ends it, 1 decline */
int rd_next(Rd *rd, unsigned char close);
int rd_str(Rd *rd, const unsigned char **s, Py_ssize_t *n, int *flags);
int rd_key(Rd *rd, const unsigned char **k, Py_ssize_t *kn);
typedef struct {
    uint64_t m;  /* the significant digits (at most 19) */
    int exp10;   /* value = m * 10**exp10 */
    int neg, is_int, big; /* big: more than 19 significant digits or a huge exponent (not converted) */
} NumTok;
int rd_num(Rd *rd, NumTok *t);
int num_int(const NumTok *t, long long lo, long long hi, long long *out);
int rd_lit(Rd *rd, const char *lit, size_t n);
int rd_skip(Rd *rd, int depth);
int key_is(const unsigned char *s, Py_ssize_t n, const char *lit);
int rd_double(Rd *rd, double *out);
int rd_double_or_null(Rd *rd, signed char *set, double *out);
int rd_ext(Rd *rd, signed char *t, long long *out);
/* A batch (one JSON array of objects, the whole buffer) read one element at a time: one(rd, rec, ctx, &keep)
   reads the object at rd->p into the next record of *recs (item size bytes, grown as needed: *n used of *cap),
   which is kept where it sets keep (1 before the call). 0 ok, 1 decline, -1 error (*recs stays the caller's to
   free either way). Shared by decode_consume and attribute_ops. */
typedef int (*ReadOne)(Rd *rd, void *rec, void *ctx, int *keep);
/* At the end of a call: an outer call keeps its record buffer for the next one, unless it grew beyond ``max``
   records; a nested call (a helper calling back) frees its own. */
static inline void recs_keep(void **kept, Py_ssize_t *kept_cap, void *recs, Py_ssize_t cap, Py_ssize_t max,
                             int outer) {
    if (outer && cap <= max) {
        *kept = recs;
        *kept_cap = cap;
        return;
    }
    PyMem_Free(recs);
    if (outer) {
        *kept = NULL;
        *kept_cap = 0;
    }
}
int rd_batch(Rd *rd, void **recs, Py_ssize_t *n, Py_ssize_t *cap, size_t size, ReadOne one, void *ctx);
PyObject *reader_reset(PyObject *module, PyObject *unused);
PyObject *decode_consume(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif /* PROFSTACK_READER_H */
