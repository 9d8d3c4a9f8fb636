/* Probe for issue #17, target 1: how fast can native code turn Kineto JSON into columns on one core?
 *
 * Not part of the product and not a validator. It reads a whole .json trace into memory and, for every item of
 * "traceEvents", fills the columns ProfStack's reader fills (ph, name and cat as ids of an interning table,
 * ts, dur, pid, tid, args.correlation, args.stream), skipping every other value structurally (strings with
 * escapes, nested objects and arrays). It does not unescape strings or check UTF-8, so what it measures is a
 * lower bound for a real reader's cost. bench/native_scan.py compiles it, runs it, and checks its counts and
 * sums against msgspec's decode of the same file before it reports a time.
 *
 * Output, one line of JSON: events, symbols, sum_dur, with_correlation, sum_correlation, best_cpu_ms, bytes.
 * Exit status 2 when the input is not what it expects (no traceEvents array, an unterminated string, ...).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *end_of_input;

static void fail(const char *what) {
    fprintf(stderr, "kineto_scan: %s\n", what);
    exit(2);
}

static const char *skip_ws(const char *p) {
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t') p++;
    return p;
}

/* p at an opening quote; returns the position after the closing one */
static const char *skip_str(const char *p) {
    p++;
    for (;;) {
        const char *q = memchr(p, '"', (size_t)(end_of_input - p));
        if (!q) fail("unterminated string");
        const char *b = q;
        size_t backslashes = 0;
        while (b > p && b[-1] == '\\') { b--; backslashes++; }
        if (!(backslashes & 1)) return q + 1;
        p = q + 1;
    }
}

static const char *skip_val(const char *p) {
    p = skip_ws(p);
    if (*p == '"') return skip_str(p);
    if (*p == '{' || *p == '[') {
        int depth = 0;
        for (;;) {
            char c = *p;
            if (!c) fail("unterminated object or array");
            if (c == '"') { p = skip_str(p); continue; }
            if (c == '{' || c == '[') depth++;
            else if (c == '}' || c == ']') { if (--depth == 0) return p + 1; }
            p++;
        }
    }
    while (*p && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n' && *p != '\r' && *p != '\t') p++;
    return p;
}

/* the symbol table: open addressing over (pointer, length) into the input */
#define TABLE (1u << 20)
static const char *sym_p[TABLE];
static size_t sym_n[TABLE];
static int sym_id[TABLE];
static int n_symbols;

static int intern(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) { h ^= (unsigned char)s[i]; h *= 1099511628211ULL; }
    size_t i = h & (TABLE - 1);
    for (;;) {
        if (!sym_p[i]) {
            if (n_symbols >= (int)(TABLE / 2)) fail("symbol table full");
            sym_p[i] = s; sym_n[i] = n; sym_id[i] = n_symbols++;
            return sym_id[i];
        }
        if (sym_n[i] == n && !memcmp(sym_p[i], s, n)) return sym_id[i];
        i = (i + 1) & (TABLE - 1);
    }
}

static double *ts, *dur;
static int *name, *cat, *pid, *tid;
static char *ph;
static long long *corr, *stream;
static size_t cap, n_events;

static void grow(void) {
    cap = cap ? cap * 2 : 1u << 16;
    ts = realloc(ts, cap * sizeof *ts); dur = realloc(dur, cap * sizeof *dur);
    name = realloc(name, cap * sizeof *name); cat = realloc(cat, cap * sizeof *cat);
    pid = realloc(pid, cap * sizeof *pid); tid = realloc(tid, cap * sizeof *tid);
    ph = realloc(ph, cap); corr = realloc(corr, cap * sizeof *corr); stream = realloc(stream, cap * sizeof *stream);
    if (!ts || !dur || !name || !cat || !pid || !tid || !ph || !corr || !stream) fail("out of memory");
}

static const char *key(const char *p, const char **ks, size_t *kn) {
    if (*p != '"') fail("expected a key");
    *ks = p + 1;
    p = skip_str(p);
    *kn = (size_t)(p - 1 - *ks);
    p = skip_ws(p);
    if (*p != ':') fail("expected ':'");
    return skip_ws(p + 1);
}

static const char *parse_args(const char *p, size_t k) {
    if (*p != '{') return skip_val(p);
    p++;
    for (;;) {
        p = skip_ws(p);
        if (*p == '}') return p + 1;
        if (*p == ',') { p++; continue; }
        const char *ks; size_t kn; char *e;
        p = key(p, &ks, &kn);
        if (kn == 11 && !memcmp(ks, "correlation", 11) && *p != '"') { corr[k] = strtoll(p, &e, 10); p = skip_val(e); }
        else if (kn == 6 && !memcmp(ks, "stream", 6) && *p != '"') { stream[k] = strtoll(p, &e, 10); p = skip_val(e); }
        else p = skip_val(p);
    }
}

static int id_or_int(const char **pp) {
    const char *p = *pp; char *e;
    if (*p == '"') { const char *s = p + 1; p = skip_str(p); *pp = p; return -intern(s, (size_t)(p - 1 - s)) - 2; }
    long v = strtol(p, &e, 10); *pp = skip_val(e); return (int)v;
}

static void scan(const char *buf) {
    const char *p = strstr(buf, "\"traceEvents\"");
    if (!p) fail("no traceEvents");
    p = skip_ws(p + 13);
    if (*p != ':') fail("expected ':' after traceEvents");
    p = skip_ws(p + 1);
    if (*p != '[') fail("traceEvents is not an array");
    p++;
    for (;;) {
        p = skip_ws(p);
        if (*p == ',') { p++; continue; }
        if (*p == ']') return;
        if (*p != '{') { p = skip_val(p); continue; }  /* not an event object: skipped, as the reader counts it */
        if (n_events == cap) grow();
        size_t k = n_events++;
        ts[k] = dur[k] = 0; name[k] = cat[k] = -1; pid[k] = tid[k] = 0; ph[k] = 0; corr[k] = stream[k] = -1;
        p++;
        for (;;) {
            p = skip_ws(p);
            if (*p == '}') { p++; break; }
            if (*p == ',') { p++; continue; }
            const char *ks; size_t kn; char *e;
            p = key(p, &ks, &kn);
            if (kn == 2 && ks[0] == 'p' && ks[1] == 'h' && *p == '"') { ph[k] = p[1]; p = skip_str(p); }
            else if (kn == 2 && ks[0] == 't' && ks[1] == 's' && *p != '"') { ts[k] = strtod(p, &e); p = skip_val(e); }
            else if (kn == 3 && !memcmp(ks, "dur", 3) && *p != '"') { dur[k] = strtod(p, &e); p = skip_val(e); }
            else if (kn == 3 && !memcmp(ks, "pid", 3)) pid[k] = id_or_int(&p);
            else if (kn == 3 && !memcmp(ks, "tid", 3)) tid[k] = id_or_int(&p);
            else if (kn == 3 && !memcmp(ks, "cat", 3) && *p == '"') { const char *s = p + 1; p = skip_str(p); cat[k] = intern(s, (size_t)(p - 1 - s)); }
            else if (kn == 4 && !memcmp(ks, "name", 4) && *p == '"') { const char *s = p + 1; p = skip_str(p); name[k] = intern(s, (size_t)(p - 1 - s)); }
            else if (kn == 4 && !memcmp(ks, "args", 4)) p = parse_args(p, k);
            else p = skip_val(p);
        }
    }
}

int main(int argc, char **argv) {
    if (argc < 2) fail("usage: kineto_scan TRACE.json [REPEAT]");
    FILE *f = fopen(argv[1], "rb");
    if (!f) fail("cannot open the trace");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)size + 1);
    if (!buf || fread(buf, 1, (size_t)size, f) != (size_t)size) fail("cannot read the trace");
    buf[size] = 0;
    fclose(f);
    end_of_input = buf + size;
    int repeat = argc > 2 ? atoi(argv[2]) : 5;
    double best = 1e300;
    for (int r = 0; r < repeat; r++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
        memset(sym_p, 0, sizeof sym_p);
        n_symbols = 0;
        n_events = 0;
        scan(buf);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
        double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        if (dt < best) best = dt;
    }
    double sum_dur = 0;
    long long with_corr = 0, sum_corr = 0;
    for (size_t i = 0; i < n_events; i++) {
        sum_dur += dur[i];
        if (corr[i] >= 0) { with_corr++; sum_corr += corr[i]; }
    }
    printf("{\"events\": %zu, \"symbols\": %d, \"sum_dur\": %.17g, \"with_correlation\": %lld, \"sum_correlation\": %lld, "
           "\"best_cpu_ms\": %.3f, \"bytes\": %ld}\n",
           n_events, n_symbols, sum_dur, with_corr, sum_corr, best * 1e3, size);
    return 0;
}
