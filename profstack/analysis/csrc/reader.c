#include "common.h"
#include "consumer.h"
#include "reader.h"
#include "strcache.h"

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
/* The batch records, kept between calls (a fresh buffer per batch cost a page fault per 4 KB), unless a batch
   of tiny events grew them beyond this (a 1 MB batch of "{}" is 340k records). */
#define KEPT_RECORDS 65536
static Rec *kept_recs = NULL;
static Py_ssize_t kept_cap = 0;
/* decode_consume is running: the file cache and the kept records are its own; a call made meanwhile (a helper
   calling back) uses a cache and records of its own, and reader_reset leaves them */
static int reader_busy = 0;
int rd_colon(Rd *rd) {
    rd_ws(rd);
    if (rd->p >= rd->end || *rd->p != ':') return 1;
    rd->p++;
    rd_ws(rd);
    return rd->p >= rd->end;
}
int rd_next(Rd *rd, unsigned char close) {
    rd_ws(rd);
    if (rd->p >= rd->end) return 1;
    if (*rd->p == close) {
        rd->p++;
        return 2;
    }
    if (*rd->p != ',') return 1;
    rd->p++;
    rd_ws(rd);
    return 0;
}
static inline int hexv(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}
/* a string at rd->p (its opening quote): its content [*s, *s + *n), rd->p after the closing quote; *flags: 1 a byte
   >= 0x80, 2 an escape. 0 ok, 1 decline (a control character, an invalid or surrogate escape, the end). */
int rd_str(Rd *rd, const unsigned char **s, Py_ssize_t *n, int *flags) {
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
int rd_key(Rd *rd, const unsigned char **k, Py_ssize_t *kn) {
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
        rd->fractions++;
        if (p >= end || *p < '0' || *p > '9') return 1;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        rd->fractions++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') return 1;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    rd->p = p;
    return 0;
}
/* a JSON number at rd->p: 0 ok, 1 decline (not a number by JSON's grammar) */
int rd_num(Rd *rd, NumTok *t) {
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
        unsigned __int128 q, r;
        if ((num >> 64) == 0 && k <= 4) {
            /* the same quotient and remainder by a constant divisor, which the compiler turns into a multiply:
               Kineto's timestamps (16 digits of µs and 3 of ns, 19 digits) all take this branch */
            uint64_t n = (uint64_t)num;
            switch (k) {
            case 1: q = n / 5u, r = n % 5u; break;
            case 2: q = n / 25u, r = n % 25u; break;
            case 3: q = n / 125u, r = n % 125u; break;
            default: q = n / 625u, r = n % 625u; break;
            }
        } else {
            q = num / d, r = num % d;
        }
        if (q >> 64) return 1;
        v = round_scaled((uint64_t)q, r != 0, -s - k);
    }
    if (!isfinite(v)) return 1;
    *out = t->neg ? -v : v;
    return 0;
}
/* an int token within [lo, hi]: 0 ok, 1 decline (msgspec rejects it or gives a Python int beyond int64) */
int num_int(const NumTok *t, long long lo, long long hi, long long *out) {
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
int rd_lit(Rd *rd, const char *lit, size_t n) {
    if ((size_t)(rd->end - rd->p) < n || memcmp(rd->p, lit, n) != 0) return 1;
    rd->p += n;
    return 0;
}
/* any JSON value, checked and skipped: 0 ok, 1 decline */
int rd_skip(Rd *rd, int depth) {
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
        if (rd_enter(rd, '}')) return 0;
        for (;;) {
            if (rd->p >= rd->end || *rd->p != '"' || rd_str(rd, &s, &n, &f)) return 1; /* any key (escapes too) */
            if (rd_colon(rd) || rd_skip(rd, depth + 1)) return 1;
            int nx = rd_next(rd, '}');
            if (nx) return nx == 2 ? 0 : 1;
        }
    case '[':
        if (depth >= 64) return 1;
        if (rd_enter(rd, ']')) return 0;
        for (;;) {
            if (rd_skip(rd, depth + 1)) return 1;
            int nx = rd_next(rd, ']');
            if (nx) return nx == 2 ? 0 : 1;
        }
    default:
        if (c == '-' || (c >= '0' && c <= '9')) return rd_num_skip(rd);
        return 1;
    }
}
int key_is(const unsigned char *s, Py_ssize_t n, const char *lit) {
    size_t k = strlen(lit);
    return (size_t)n == k && memcmp(s, lit, k) == 0;
}
/* a value for a field of type `float`: the nearest double; 0 ok, 1 decline */
int rd_double(Rd *rd, double *out) {
    NumTok t;
    if (rd->p >= rd->end || !(*rd->p == '-' || (*rd->p >= '0' && *rd->p <= '9')) || rd_num(rd, &t)) return 1;
    return num_double(&t, out);
}
/* a value for a field of type `float | None`: *set 0 for null; 0 ok, 1 decline */
int rd_double_or_null(Rd *rd, signed char *set, double *out) {
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
/* parse.loose_int's rule on the text of a JSON string: `[+-]?[0-9]{1,19}` once spaces are stripped, within
   [lo, hi]. 0 a number (*out), 1 anything else (escapes, non-ASCII, other text, out of range). */
static int loose_digits(const unsigned char *s, Py_ssize_t n, long long lo, long long hi, long long *out) {
    while (n > 0 && *s == ' ') s++, n--;
    while (n > 0 && s[n - 1] == ' ') n--;
    int neg = 0;
    if (n > 0 && (*s == '+' || *s == '-')) {
        neg = *s == '-';
        s++, n--;
    }
    if (n < 1 || n > 19) return 1;
    unsigned long long v = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 1;
        v = v * 10u + (unsigned long long)(s[i] - '0'); /* 19 digits < 2^64 */
    }
    long long x;
    if (neg) {
        if (v > (unsigned long long)LLONG_MAX + 1u) return 1;
        x = v == (unsigned long long)LLONG_MAX + 1u ? LLONG_MIN : -(long long)v;
    } else {
        if (v > (unsigned long long)LLONG_MAX) return 1;
        x = (long long)v;
    }
    if (x < lo || x > hi) return 1;
    *out = x;
    return 0;
}
/* an int arg written as a string ("bytes": "32768", ROCm's roctracer): by parse.loose_int's rule, marking the event
   loose (Python reads such an event by parse.loose_args and counts it in fd.args_loose); 0 ok, 1 decline (a
   string the rule does not read: Python's loop names the field unknown) */
static int rd_loose_int(Rd *rd, Rec *r, long long lo, long long hi, long long *out) {
    const unsigned char *s;
    Py_ssize_t n;
    int f;
    if (rd_str(rd, &s, &n, &f) || f || loose_digits(s, n, lo, hi, out)) return 1;
    r->loose = 1;
    return 0;
}
/* An External id (parse.Args keeps its JSON text; op_types reads it by loose_int's rule): *t 0 null, 1 an integer
   (*out), 2 anything else (text or a float that is not one, true, false, an array, an object). 0 ok, 1 decline: a
   string with escapes or non-ASCII bytes, a number it cannot convert exactly (Python reads those). */
int rd_ext(Rd *rd, signed char *t, long long *out) {
    if (rd->p >= rd->end) return 1;
    unsigned char c = *rd->p;
    if (c == '"') {
        const unsigned char *s;
        Py_ssize_t n;
        int f;
        if (rd_str(rd, &s, &n, &f) || f) return 1;
        *t = loose_digits(s, n, LLONG_MIN, LLONG_MAX, out) ? 2 : 1;
        return 0;
    }
    if (c == 'n') {
        *t = 0;
        return rd_lit(rd, "null", 4);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        NumTok tk;
        if (rd_num(rd, &tk) || tk.big) return 1;
        if (tk.is_int) {
            *t = num_int(&tk, LLONG_MIN, LLONG_MAX, out) ? 2 : 1; /* beyond int64: not an integer loose_int keeps */
            return 0;
        }
        double v;
        if (num_double(&tk, &v)) return 1;
        if (v == floor(v) && v >= -TWO63 && v < TWO63) { /* an integral float: int(v) */
            *out = (long long)v;
            *t = 1;
        } else {
            *t = 2;
        }
        return 0;
    }
    *t = 2;
    return rd_skip(rd, 2);
}
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
/* A loose event's string stream: parse.loose_args reads a decimal one as that number, where the strict decode keeps
   the string (and _stream_of reads its digits: "-3" -> 3). Declined (Python reads it) rather than told apart. */
static int loose_stream(const Rec *r) {
    if (!r->loose || r->stream_t != 2 || r->stream_o == NULL) return 0;
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(r->stream_o, &n);
    long long ignored;
    if (s == NULL) return -1;
    return loose_digits((const unsigned char *)s, n, LLONG_MIN, LLONG_MAX, &ignored) == 0;
}
static int rd_args(Rd *rd, Rec *r) {
    r->has_args = 1;
    r->has_corr = r->has_occ = r->has_dev = r->dev_ovf = r->stream_t = r->bytes_t = r->mem_set = 0;
    r->ext_t = r->ext2_t = 0;
    r->types_p = NULL;
    r->stream_o = NULL;
    if (rd_enter(rd, '}')) return 0;
    for (;;) {
        const unsigned char *k;
        Py_ssize_t kn;
        if (rd_key(rd, &k, &kn)) return 1;
        if (rd_colon(rd)) return 1;
        signed char set;
        long long iv;
        int mf;
        int quoted = rd->p < rd->end && *rd->p == '"';
        if (key_is(k, kn, "correlation")) {
            if (quoted) {
                if (rd_loose_int(rd, r, LLONG_MIN, LLONG_MAX, &r->corr)) return 1;
                r->has_corr = 1;
            } else if (rd_int_or_null(rd, LLONG_MIN, LLONG_MAX, &r->has_corr, &r->corr)) {
                return 1;
            }
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
            if (quoted) {
                if (rd_loose_int(rd, r, LLONG_MIN, LLONG_MAX, &r->dev)) return 1;
                r->has_dev = 1;
            } else if (rd_int_or_null(rd, LLONG_MIN, LLONG_MAX, &r->has_dev, &r->dev)) {
                return 1;
            }
        } else if (key_is(k, kn, "bytes")) {
            if (quoted) {
                if (rd_loose_int(rd, r, LLONG_MIN, LLONG_MAX, &r->bytes_i)) return 1;
                r->bytes_t = 1;
            } else if (*rd->p == 'n') {
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
        } else if (kn == 11 && k[1] == 'x' && (memcmp(k, "External id", 11) == 0 || memcmp(k, "external id", 11) == 0)) {
            if (k[0] == 'E' ? rd_ext(rd, &r->ext_t, &r->ext) : rd_ext(rd, &r->ext2_t, &r->ext2)) return 1;
        } else if (kn == 10 && memcmp(k, "Input type", 10) == 0) { /* kept as JSON text, as msgspec.Raw keeps it */
            const unsigned char *v = rd->p;
            if (rd_skip(rd, 2)) return 1;
            r->types_p = (const char *)v;
            r->types_n = rd->p - v;
        } else if (key_is(k, kn, "est. achieved occupancy %")) {
            if (rd_double_or_null(rd, &r->has_occ, &r->occ)) return 1;
        } else if ((mf = mem_field(k, kn)) >= 0) { /* I64 | None, the device type and id I32 | None */
            long long lo = mf < 3 ? LLONG_MIN : I32_LO, hi = mf < 3 ? LLONG_MAX : I32_HI;
            if (quoted) {
                if (rd_loose_int(rd, r, lo, hi, &iv)) return 1;
                set = 1;
            } else if (rd_int_or_null(rd, lo, hi, &set, &iv)) {
                return 1;
            }
            r->mem[mf] = iv;
            if (set) r->mem_set |= (signed char)(1 << mf);
            else r->mem_set &= (signed char)~(1 << mf);
        } else if (rd_skip(rd, 2)) {
            return 1;
        }
        int nx = rd_next(rd, '}');
        if (nx) return nx == 2 ? loose_stream(r) : 1;
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
    long long fractions = rd->fractions;
    int nx = rd_enter(rd, '}') ? 2 : 0;
    while (nx == 0) {
        const unsigned char *k;
        Py_ssize_t kn;
        int f, rc = 0;
        if (rd_key(rd, &k, &kn)) return 1;
        if (rd_colon(rd)) return 1;
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
                r->ext_t = r->ext2_t = 0;
                r->types_p = NULL;
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
        nx = rd_next(rd, '}');
    }
    if (nx == 1) return 1;
    /* a loose event is read again by msgspec as _LooseEvent, its args as plain JSON values, which refuses a float
       beyond double's range (1e999) that the strict decode skips: declined whenever it skipped any fraction */
    if (r->loose && rd->fractions != fractions) return 1;
    /* and its "Input type" is encoded again from the decoded value (parse.loose_args): op_types.Collector's cache of
       type lists is keyed by that text, which the reader does not have */
    if (r->loose && r->has_args && r->types_p != NULL) return 1;
    r->len = (const char *)rd->p - r->src;
    return 0;
}
int rd_batch(Rd *rd, void **recs, Py_ssize_t *n, Py_ssize_t *cap, size_t size, ReadOne one, void *ctx) {
    rd_ws(rd);
    if (rd->p >= rd->end || *rd->p != '[') return 1;
    int nx = rd_enter(rd, ']') ? 2 : 0;
    while (nx == 0) {
        if (rd->p >= rd->end || *rd->p != '{') return 1;
        if (grow(recs, cap, *n, size, 4096) < 0) return -1;
        int keep = 1, rc = one(rd, (char *)*recs + (size_t)*n * size, ctx, &keep);
        if (rc) return rc;
        if (keep) (*n)++;
        nx = rd_next(rd, ']');
    }
    if (nx == 1) return 1;
    rd_ws(rd);
    return rd->p != rd->end;
}
static int rd_event_one(Rd *rd, void *rec, void *empty, int *keep) {
    (void)keep;
    return rd_event(rd, rec, empty);
}
/* reader_reset(): drop the strings kept for the file just read */
PyObject *reader_reset(PyObject *module, PyObject *unused) {
    (void)module;
    (void)unused;
    if (!reader_busy) {
        sc_free(&file_cache);
        types_cache_reset();
    }
    Py_RETURN_NONE;
}
/* decode_consume(parser, batch, l_corr, l_ts, l_dur, cpu_starts, l_maybe_empty): what consume_events returns (launches, X events,
   runtime calls; fd.events counted), or NotImplemented with nothing changed (the caller then decodes the batch
   with msgspec) */
PyObject *decode_consume(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "decode_consume(parser, batch, l_corr, l_ts, l_dur, cpu_starts, l_maybe_empty)");
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
    recs_keep((void **)&kept_recs, &kept_cap, recs, cap, KEPT_RECORDS, outer);
    if (outer) reader_busy = 0;
    else sc_free(&local);
    Py_XDECREF(empty);
    PyBuffer_Release(&view);
    return result;
}
