/* The quick path of an SGLang log in C (optional: logfast.py falls back to logfused's
   Python when this module is not built).

   scan() reads the lines of a block of bytes (UTF-8, lines split at "\n" only) the way
   logfused._Pass.block reads them with logshapes.block_pattern: a line in the usual stamp
   form with a decode line of one shape or a prefill line of another is a quick line (its
   summary row and its record's JSON are made here); any other line holding "batch" or
   SGLang's start-up banner goes back to Python (logfused._Pass.line) and the scan stops
   there; any other line is skipped. A line this code is not SURE it reads as Python does
   (a value out of range, a byte outside ASCII, a shape it has no template for) holds
   "batch" and so goes back to Python too: correctness never depends on this file covering
   a case. Every read is bounded by the line's end; every buffer grows with a checked size. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include <math.h>

#define N_SLOTS 6                /* line_no, time_s, rank, accept_len, gen_tok_s, warmup */
#define MAX_PIECES 256           /* pieces of a shape (a line has ~12) */
#define MAX_INT_DIGITS 18        /* logshapes.INT */
#define MAX_SIDE_DIGITS 7        /* logshapes.FLOAT: digits before / after the point */

enum { T_INT = 0, T_FLOAT = 1, T_TRUE = 2, T_FALSE = 3 };

typedef struct {            /* a text in the block: [at, at + len) */
    Py_ssize_t at, len;
} Span;

typedef struct {
    PyObject *kind, *flag;  /* borrowed from the spec tuple */
    const char *marker;     /* "Decode batch" | "Prefill batch" */
    Py_ssize_t marker_len;
    Py_ssize_t n;           /* pieces */
    const char *lit[MAX_PIECES];   /* the text before each value (", key: ") */
    Py_ssize_t lit_len[MAX_PIECES];
    int type[MAX_PIECES];
    int n_groups;           /* values that are not True / False */
    int ri, rt, ai, at, gi, gt;   /* group index (-1: none) and type of running, accept, gen */
    const char *tpl[MAX_PIECES + N_SLOTS + 1];
    Py_ssize_t tpl_len[MAX_PIECES + N_SLOTS + 1];
} Spec;

typedef struct {            /* a growable output buffer */
    char *p;
    Py_ssize_t len, cap;
} Buf;

static int buf_add(Buf *b, const char *s, Py_ssize_t n)
{
    if (n < 0 || n > PY_SSIZE_T_MAX / 2 - b->len) {
        PyErr_NoMemory();
        return -1;
    }
    if (b->len + n > b->cap) {
        Py_ssize_t cap = b->cap ? b->cap : 1 << 16;
        while (cap < b->len + n)
            cap *= 2;
        char *p = PyMem_Realloc(b->p, (size_t)cap);
        if (p == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->p = p;
        b->cap = cap;
    }
    char *q = b->p + b->len;
    /* most pieces are short: two fixed-size copies that may overlap (each compiled to a
       load and a store) cost less than a call to memcpy; each reads and writes within n */
    if (n >= 16 && n <= 32) {
        memcpy(q, s, 16);
        memcpy(q + n - 16, s + n - 16, 16);
    } else if (n >= 8 && n < 16) {
        memcpy(q, s, 8);
        memcpy(q + n - 8, s + n - 8, 8);
    } else if (n >= 4 && n < 8) {
        memcpy(q, s, 4);
        memcpy(q + n - 4, s + n - 4, 4);
    } else if (n < 4) {
        for (Py_ssize_t i = 0; i < n; i++)
            q[i] = s[i];
    } else {
        memcpy(q, s, (size_t)n);
    }
    b->len += n;
    return 0;
}

/* whether needle [m bytes, m > 0] occurs in [p, p + n) */
static int holds(const char *p, Py_ssize_t n, const char *needle, Py_ssize_t m)
{
    if (m <= 0)
        return 0;
    const char *end = p + n;
    while (end - p >= m) {
        const char *c = memchr(p, needle[0], (size_t)(end - p - m + 1));
        if (c == NULL)
            return 0;
        if (memcmp(c, needle, (size_t)m) == 0)
            return 1;
        p = c + 1;
    }
    return 0;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* spec: None, or (kind, flag, marker: bytes, literals: tuple[bytes], types: tuple[int],
   (ri, rt, ai, at, gi, gt), template pieces: tuple[bytes]) from logfast.spec() */
static int read_spec(PyObject *o, Spec *s, int *present)
{
    *present = 0;
    if (o == Py_None)
        return 0;
    PyObject *lits, *types, *idx, *tpl, *marker;
    if (!PyArg_ParseTuple(o, "UUO!O!O!O!O!;spec", &s->kind, &s->flag, &PyBytes_Type, &marker, &PyTuple_Type, &lits,
                          &PyTuple_Type, &types, &PyTuple_Type, &idx, &PyTuple_Type, &tpl))
        return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(lits);
    if (n > MAX_PIECES)  /* a line of that many pieces is left to Python */
        return 0;
    if (n < 1 || PyTuple_GET_SIZE(types) != n) {
        PyErr_SetString(PyExc_ValueError, "spec: bad pieces");
        return -1;
    }
    s->marker = PyBytes_AS_STRING(marker);
    s->marker_len = PyBytes_GET_SIZE(marker);
    s->n = n;
    s->n_groups = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *l = PyTuple_GET_ITEM(lits, i);
        if (!PyBytes_Check(l)) {
            PyErr_SetString(PyExc_TypeError, "spec: literal not bytes");
            return -1;
        }
        s->lit[i] = PyBytes_AS_STRING(l);
        s->lit_len[i] = PyBytes_GET_SIZE(l);
        long t = PyLong_AsLong(PyTuple_GET_ITEM(types, i));
        if (t < T_INT || t > T_FALSE) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "spec: bad type");
            return -1;
        }
        s->type[i] = (int)t;
        if (t == T_INT || t == T_FLOAT)
            s->n_groups++;
    }
    if (!PyArg_ParseTuple(idx, "iiiiii;spec indexes", &s->ri, &s->rt, &s->ai, &s->at, &s->gi, &s->gt))
        return -1;
    if (s->ri >= s->n_groups || s->ai >= s->n_groups || s->gi >= s->n_groups) {
        PyErr_SetString(PyExc_ValueError, "spec: index out of range");
        return -1;
    }
    if (PyTuple_GET_SIZE(tpl) != N_SLOTS + s->n_groups + 1) {
        PyErr_SetString(PyExc_ValueError, "spec: template pieces");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tpl); i++) {
        PyObject *t = PyTuple_GET_ITEM(tpl, i);
        if (!PyBytes_Check(t)) {
            PyErr_SetString(PyExc_TypeError, "spec: template piece not bytes");
            return -1;
        }
        s->tpl[i] = PyBytes_AS_STRING(t);
        s->tpl_len[i] = PyBytes_GET_SIZE(t);
    }
    *present = 1;
    return 0;
}

static int lit_at(const char *p, Py_ssize_t q, Py_ssize_t e, const char *lit, Py_ssize_t n)
{
    return e - q >= n && memcmp(p + q, lit, (size_t)n) == 0;
}

/* The stamp "[YYYY-mm-dd HH:MM:SS" + tail ".mmm DP1 TP0] " (logshapes' _MINUTE_RX, seconds,
   _TAIL_RX): the position after it, or -1. */
static Py_ssize_t stamp_end(const char *p, Py_ssize_t s, Py_ssize_t e)
{
    static const char form[] = "[0000-00-00 00:00:00";
    if (e - s < 20)
        return -1;
    for (int i = 0; i < 20; i++) {
        char f = form[i], c = p[s + i];
        if (f == '0' ? !is_digit(c) : c != f)
            return -1;
    }
    Py_ssize_t q = s + 20;
    if (q < e && p[q] == '.') {
        if (e - q < 4 || !is_digit(p[q + 1]) || !is_digit(p[q + 2]) || !is_digit(p[q + 3]))
            return -1;
        q += 4;
    }
    while (q < e && p[q] == ' ') {  /* " [A-Z_]+[0-9]+", as often as it comes */
        Py_ssize_t r = q + 1;
        while (r < e && ((p[r] >= 'A' && p[r] <= 'Z') || p[r] == '_'))
            r++;
        if (r == q + 1)
            return -1;
        Py_ssize_t d = r;
        while (d < e && is_digit(p[d]))
            d++;
        if (d == r)
            return -1;
        q = d;
    }
    if (e - q < 2 || p[q] != ']' || p[q + 1] != ' ')
        return -1;
    return q + 2;
}

/* A value of type `t` at q: its captured text in *g (a decimal less its trailing zeros);
   the position after the value's whole text, or -1 (logshapes.INT, FLOAT). */
static Py_ssize_t value_end(const char *p, Py_ssize_t q, Py_ssize_t e, int t, Span *g)
{
    Py_ssize_t d = q;
    while (d < e && is_digit(p[d]))
        d++;
    Py_ssize_t n = d - q;
    if (n < 1 || (p[q] == '0' && n > 1))
        return -1;
    if (t == T_INT) {
        if (n > MAX_INT_DIGITS)
            return -1;
        g->at = q;
        g->len = n;
        return d;
    }
    if (n > MAX_SIDE_DIGITS || d >= e || p[d] != '.')
        return -1;
    Py_ssize_t f = d + 1, end = f;
    while (end < e && is_digit(p[end]))
        end++;
    if (end == f)
        return -1;
    Py_ssize_t last = end;  /* after the last digit that is not 0 */
    while (last > f && p[last - 1] == '0')
        last--;
    if (last - f > MAX_SIDE_DIGITS)
        return -1;
    if (n == 1 && p[q] == '0' && end - f >= 4 && memcmp(p + f, "0000", 4) == 0)
        return -1;  /* under 0.0001 (logshapes.FLOAT's look-ahead) */
    g->at = q;
    g->len = (last == f ? f + 1 : last) - q;  /* "5.00" -> "5.0", "0.60" -> "0.6" */
    return end;
}

/* The value of group `gr` (int or float from its captured text, as int() / float() read
   it) in *out; 1 when read, 0 when absent (index -1), -1 on an error. */
static int read_value(const char *p, const Span *g, int gr, int t, PyObject **out, double *x)
{
    *out = NULL;
    if (gr < 0)
        return 0;
    const Span *s = &g[gr];
    char tmp[2 * MAX_SIDE_DIGITS + MAX_INT_DIGITS + 2];
    if (s->len <= 0 || s->len >= (Py_ssize_t)sizeof tmp) {
        PyErr_SetString(PyExc_SystemError, "_fastlog: value too long");
        return -1;
    }
    memcpy(tmp, p + s->at, (size_t)s->len);
    tmp[s->len] = '\0';
    if (t == T_INT) {
        long long v = 0;
        for (Py_ssize_t i = 0; i < s->len; i++)
            v = v * 10 + (tmp[i] - '0');  /* at most 18 digits: no overflow */
        *x = (double)v;
        *out = PyLong_FromLongLong(v);
        return *out ? 1 : -1;
    }
    double v = PyOS_string_to_double(tmp, NULL, NULL);
    if (v == -1.0 && PyErr_Occurred())
        return -1;
    *x = v;
    *out = PyFloat_FromDouble(v);
    return *out ? 1 : -1;
}

/* logvalues.checked, for values of at most 18 digits (ints compared exactly): 1 when
   every present value is in range; 0: not sure (Python reads the line). */
static int in_range(const Spec *s, PyObject *run, double r, PyObject *acc, double a, PyObject *gen, double x)
{
    if (run != NULL && !(r >= 0.0 && r <= 10000000.0 && floor(r) == r))
        return 0;
    if (acc != NULL && !(a >= 1.0 && a <= 1000.0))
        return 0;
    if (gen != NULL && !(x == 0.0 || (x >= 1e-6 && x <= 1e8)))
        return 0;
    /* an int of up to 18 digits read as a double may round: stay off the edges */
    if (s->rt == T_INT && run != NULL && r > 9.0e6)
        return 0;
    if (s->at == T_INT && acc != NULL && a > 999.0)
        return 0;
    if (s->gt == T_INT && gen != NULL && x > 9.0e7)
        return 0;
    return 1;
}

typedef struct {            /* the stamp of the line before: the same text gives the same values */
    Py_ssize_t at, len;     /* its text in the block, len 0: none yet */
    PyObject *time_s, *series, *time_j, *rank_j;  /* owned */
    char minute[18];        /* the last minute looked up, and its minutes[] value (owned, NULL: none) */
    PyObject *base;
    Py_ssize_t tail_at, tail_len;  /* the last tail looked up (in the block), and its tails[] value */
    PyObject *tail;
} Stamp;

static void stamp_clear(Stamp *st)
{
    Py_CLEAR(st->time_s);
    Py_CLEAR(st->series);
    Py_CLEAR(st->time_j);
    Py_CLEAR(st->rank_j);
    st->len = 0;
}

static void stamp_free(Stamp *st)
{
    stamp_clear(st);
    Py_CLEAR(st->base);
    Py_CLEAR(st->tail);
}

static PyObject *text_of(const char *p, Py_ssize_t at, Py_ssize_t len)
{
    return PyUnicode_DecodeASCII(p + at, len, "strict");
}

/* time_s, series, time_s's JSON, rank's JSON of the stamp [s, body): logfused's
   minutes[minute] + SECONDS[ss] (+ ms), tails[tail]; 0, or -1 on an error. */
static int read_stamp(const char *p, Py_ssize_t s, Py_ssize_t body, PyObject *minutes, PyObject *tails,
                      PyObject *dumps, Stamp *st)
{
    if (st->len == body - s && memcmp(p + st->at, p + s, (size_t)st->len) == 0)
        return 0;
    stamp_clear(st);
    PyObject *key, *base = NULL, *tail = NULL, *t = NULL, *j = NULL;
    if (st->base == NULL || memcmp(st->minute, p + s, 18) != 0) {  /* minutes[] and tails[] are pure */
        Py_CLEAR(st->base);
        if ((key = text_of(p, s, 18)) == NULL)
            return -1;
        st->base = PyObject_GetItem(minutes, key);
        Py_DECREF(key);
        if (st->base == NULL)
            return -1;
        memcpy(st->minute, p + s, 18);
    }
    base = Py_NewRef(st->base);
    if (st->tail == NULL || st->tail_len != body - s - 20
        || memcmp(p + st->tail_at, p + s + 20, (size_t)st->tail_len) != 0) {
        Py_CLEAR(st->tail);
        if ((key = text_of(p, s + 20, body - s - 20)) == NULL)
            goto fail;
        st->tail = PyObject_GetItem(tails, key);
        Py_DECREF(key);
        if (st->tail == NULL)
            goto fail;
        st->tail_at = s + 20;
        st->tail_len = body - s - 20;
    }
    tail = Py_NewRef(st->tail);
    if (!PyTuple_Check(tail) || PyTuple_GET_SIZE(tail) != 3) {
        PyErr_SetString(PyExc_TypeError, "_fastlog: tails[] not (ms, series, rank's JSON)");
        goto fail;
    }
    if (base == Py_None) {
        t = Py_NewRef(Py_None);
    } else {
        PyObject *sec = PyLong_FromLong((p[s + 18] - '0') * 10 + (p[s + 19] - '0'));
        if (sec == NULL)
            goto fail;
        t = PyNumber_Add(base, sec);
        Py_DECREF(sec);
        if (t == NULL)
            goto fail;
        int ms = PyObject_IsTrue(PyTuple_GET_ITEM(tail, 0));
        if (ms < 0)
            goto fail;
        if (ms) {
            PyObject *t2 = PyNumber_Add(t, PyTuple_GET_ITEM(tail, 0));
            Py_SETREF(t, t2);
            if (t == NULL)
                goto fail;
        }
    }
    j = PyObject_CallOneArg(dumps, t);
    if (j == NULL)
        goto fail;
    if (!PyBytes_Check(j) || !PyUnicode_Check(PyTuple_GET_ITEM(tail, 2))) {
        PyErr_SetString(PyExc_TypeError, "_fastlog: dumps() not bytes or rank's JSON not str");
        goto fail;
    }
    st->at = s;
    st->len = body - s;
    st->time_s = t;
    st->time_j = j;
    st->series = Py_NewRef(PyTuple_GET_ITEM(tail, 1));
    st->rank_j = Py_NewRef(PyTuple_GET_ITEM(tail, 2));
    Py_DECREF(base);
    Py_DECREF(tail);
    return 0;
fail:
    Py_XDECREF(base);
    Py_XDECREF(tail);
    Py_XDECREF(t);
    Py_XDECREF(j);
    return -1;
}

static int add_text(Buf *b, const char *p, const Span *g) { return buf_add(b, p + g->at, g->len); }

/* The record's JSON: the template's pieces with the slots filled (logfused's template % ...) */
static int write_record(Buf *b, const Spec *sp, const char *p, const Span *g, long long line_no, Stamp *st)
{
    char digits[24], *num = digits + sizeof digits;  /* line_no in decimal, as %d writes it */
    unsigned long long v = line_no < 0 ? 0ULL - (unsigned long long)line_no : (unsigned long long)line_no;
    do {
        *--num = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (line_no < 0)
        *--num = '-';
    int n = (int)(digits + sizeof digits - num);
    Py_ssize_t rl;
    const char *rank = PyUnicode_AsUTF8AndSize(st->rank_j, &rl);
    Py_ssize_t fl;
    const char *flag = PyUnicode_AsUTF8AndSize(sp->flag, &fl);
    if (rank == NULL || flag == NULL)
        return -1;
    if (buf_add(b, sp->tpl[0], sp->tpl_len[0]) || buf_add(b, num, n) || buf_add(b, sp->tpl[1], sp->tpl_len[1])
        || buf_add(b, PyBytes_AS_STRING(st->time_j), PyBytes_GET_SIZE(st->time_j))
        || buf_add(b, sp->tpl[2], sp->tpl_len[2]) || buf_add(b, rank, rl) || buf_add(b, sp->tpl[3], sp->tpl_len[3])
        || (sp->ai < 0 ? buf_add(b, "null", 4) : add_text(b, p, &g[sp->ai]))
        || buf_add(b, sp->tpl[4], sp->tpl_len[4])
        || (sp->gi < 0 ? buf_add(b, "null", 4) : add_text(b, p, &g[sp->gi]))
        || buf_add(b, sp->tpl[5], sp->tpl_len[5]) || buf_add(b, flag, fl) || buf_add(b, sp->tpl[6], sp->tpl_len[6]))
        return -1;
    for (int i = 0; i < sp->n_groups; i++)
        if (add_text(b, p, &g[i]) || buf_add(b, sp->tpl[N_SLOTS + 1 + i], sp->tpl_len[N_SLOTS + 1 + i]))
            return -1;
    return 0;
}

/* A quick line [s, e) of spec sp, its message from q (after the marker): its row appended
   to rows and its record to out. 1: done; 0: not sure (Python reads it); -1: error. */
static int quick_line(const char *p, Py_ssize_t s, Py_ssize_t body, Py_ssize_t e, const Spec *sp, Span *g,
                      PyObject *ctx[3], Stamp *st, PyObject *rows, Buf *out, Py_ssize_t *n_out, long long line_no,
                      long long offset)
{
    Py_ssize_t q = body + sp->marker_len;
    if (e - q < 2 || (p[q] != ',' && p[q] != '.') || p[q + 1] != ' ')
        return 0;
    q += 2;
    int gr = 0;
    for (Py_ssize_t i = 0; i < sp->n; i++) {
        if (!lit_at(p, q, e, sp->lit[i], sp->lit_len[i]))
            return 0;
        q += sp->lit_len[i];
        int t = sp->type[i];
        if (t == T_TRUE || t == T_FALSE) {
            const char *w = t == T_TRUE ? "True" : "False";
            Py_ssize_t wl = t == T_TRUE ? 4 : 5;
            if (!lit_at(p, q, e, w, wl))
                return 0;
            q += wl;
        } else {
            q = value_end(p, q, e, t, &g[gr++]);
            if (q < 0)
                return 0;
        }
    }
    if (q < e && p[q] == '\r')
        q++;
    if (q != e)
        return 0;
    PyObject *run = NULL, *acc = NULL, *gen = NULL;
    double r = 0, a = 0, x = 0;
    int ok = -1;
    if (read_value(p, g, sp->ri, sp->rt, &run, &r) < 0 || read_value(p, g, sp->ai, sp->at, &acc, &a) < 0
        || read_value(p, g, sp->gi, sp->gt, &gen, &x) < 0)
        goto done;
    if (!in_range(sp, run, r, acc, a, gen, x)) {
        ok = 0;
        goto done;
    }
    if (read_stamp(p, s, body, ctx[0], ctx[1], ctx[2], st) < 0)
        goto done;
    ok = 1;
done:
    if (ok == 1) {
        PyObject *ln = PyLong_FromLongLong(line_no);
        PyObject *row = ln ? PyTuple_Pack(7, sp->kind, st->series, run ? run : Py_None, acc ? acc : Py_None,
                                          gen ? gen : Py_None, st->time_s, ln) : NULL;
        Py_XDECREF(ln);
        if (row == NULL || PyList_Append(rows, row) < 0)
            ok = -1;
        Py_XDECREF(row);
        if (ok == 1 && out != NULL) {
            if ((*n_out && buf_add(out, ",\n", 2)) || write_record(out, sp, p, g, line_no + offset, st))
                ok = -1;
            else
                ++*n_out;
        }
    }
    Py_XDECREF(run);
    Py_XDECREF(acc);
    Py_XDECREF(gen);
    return ok;
}

static PyObject *scan(PyObject *self, PyObject *args)
{
    Py_buffer data;
    Py_ssize_t pos;
    long long line_no, offset;
    PyObject *dspec, *pspec, *minutes, *tails, *dumps, *rows, *batch;
    const char *banner;
    Py_ssize_t banner_len;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*nL(OO)(OOOy#)O!OL:scan", &data, &pos, &line_no, &dspec, &pspec, &minutes, &tails,
                          &dumps, &banner, &banner_len, &PyList_Type, &rows, &batch, &offset))
        return NULL;
    Spec *specs = PyMem_Malloc(2 * sizeof(Spec));  /* filled by read_spec before any use */
    Span *g = PyMem_Malloc(MAX_PIECES * sizeof(Span));  /* each written before it is read */
    Buf out = {NULL, 0, 0};
    Stamp st;
    memset(&st, 0, sizeof st);
    PyObject *result = NULL, *back = NULL;
    Py_ssize_t skipped = 0, n_out = 0;
    int have[2];
    if (specs == NULL || g == NULL) {
        PyErr_NoMemory();
        goto end;
    }
    if (batch != Py_None && !PyList_Check(batch)) {
        PyErr_SetString(PyExc_TypeError, "scan: batch must be a list or None");
        goto end;
    }
    if (read_spec(dspec, &specs[0], &have[0]) < 0 || read_spec(pspec, &specs[1], &have[1]) < 0)
        goto end;
    PyObject *ctx[3] = {minutes, tails, dumps};
    const char *p = data.buf;
    Py_ssize_t n = data.len;
    if (pos < 0)
        pos = 0;
    while (pos <= n) {
        Py_ssize_t s = pos;
        const char *nl = s < n ? memchr(p + s, '\n', (size_t)(n - s)) : NULL;
        Py_ssize_t e = nl ? nl - p : n;
        pos = e + 1;
        line_no++;
        Py_ssize_t body = stamp_end(p, s, e);
        if (body >= 0) {
            for (int k = 0; k < 2; k++) {
                const Spec *sp = &specs[k];
                if (!have[k] || !lit_at(p, body, e, sp->marker, sp->marker_len))
                    continue;
                int r = quick_line(p, s, body, e, sp, g, ctx, &st, rows, batch == Py_None ? NULL : &out, &n_out,
                                   line_no, offset);
                if (r < 0)
                    goto end;
                if (r > 0)
                    goto next;
                break;
            }
        }
        /* any other line: Python reads one holding "batch" or the banner, the rest are skipped */
        if (holds(p + s, e - s, "batch", 5) || holds(p + s, e - s, banner, banner_len)) {
            back = PyUnicode_DecodeUTF8(p + s, e - s, "replace");
            if (back == NULL)
                goto end;
            break;
        }
        skipped++;
    next:;
    }
    if (n_out) {
        PyObject *text = PyUnicode_DecodeASCII(out.p, out.len, "strict");
        if (text == NULL || PyList_Append(batch, text) < 0) {
            Py_XDECREF(text);
            goto end;
        }
        Py_DECREF(text);
    }
    result = Py_BuildValue("nLnnO", pos, line_no, skipped, n_out, back ? back : Py_None);
end:
    Py_XDECREF(back);
    stamp_free(&st);
    PyMem_Free(out.p);
    PyMem_Free(specs);
    PyMem_Free(g);
    PyBuffer_Release(&data);
    return result;
}

static int holds_any(const char *p, Py_ssize_t n, PyObject *needles)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(needles); i++) {
        PyObject *nd = PyTuple_GET_ITEM(needles, i);
        if (holds(p, n, PyBytes_AS_STRING(nd), PyBytes_GET_SIZE(nd)))
            return 1;
    }
    return 0;
}

static int all_bytes(PyObject *t)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++)
        if (!PyBytes_Check(PyTuple_GET_ITEM(t, i))) {
            PyErr_SetString(PyExc_TypeError, "kept: needles must be bytes");
            return 0;
        }
    return 1;
}

/* kept(data, skipped, wanted, follow, long, open) -> (lines, [(index, line bytes)], open):
   the lines of `data` (split at "\n") that hold none of `skipped` and one of `wanted`, or
   come right after such a line holding one of `follow` (`open`: the line before `data`
   did), and every line of `long` bytes or more; with their index (0: the first line) and
   how many lines `data` holds. Lines holding one of `skipped` do not count as "after". */
static PyObject *kept(PyObject *self, PyObject *args)
{
    Py_buffer data;
    PyObject *skipped, *wanted, *follow;
    Py_ssize_t long_line;
    int open;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*O!O!O!np:kept", &data, &PyTuple_Type, &skipped, &PyTuple_Type, &wanted,
                          &PyTuple_Type, &follow, &long_line, &open))
        return NULL;
    PyObject *out = PyList_New(0), *result = NULL;
    Py_ssize_t index = 0;
    if (out == NULL || !all_bytes(skipped) || !all_bytes(wanted) || !all_bytes(follow))
        goto end;
    const char *p = data.buf;
    Py_ssize_t n = data.len, pos = 0;
    for (;; index++) {
        const char *nl = pos < n ? memchr(p + pos, '\n', (size_t)(n - pos)) : NULL;
        Py_ssize_t e = nl ? nl - p : n, len = e - pos;
        int keep;
        if (len >= long_line) {  /* Python reads it as the text pass would (capped); the next line too */
            keep = open = 1;
        } else if (holds_any(p + pos, len, skipped)) {
            keep = 0;
        } else {
            keep = open || holds_any(p + pos, len, wanted);
            open = holds_any(p + pos, len, follow);
        }
        if (keep) {
            PyObject *item = Py_BuildValue("(ny#)", index, p + pos, len);
            if (item == NULL || PyList_Append(out, item) < 0) {
                Py_XDECREF(item);
                goto end;
            }
            Py_DECREF(item);
        }
        if (nl == NULL)
            break;
        pos = e + 1;
    }
    result = Py_BuildValue("nOO", index + 1, out, open ? Py_True : Py_False);
end:
    Py_XDECREF(out);
    PyBuffer_Release(&data);
    return result;
}

/* ---------------------------------------------------------------- the steady-run tally

   tally() is logcolumns._windows + _tally for a run of rows that _steady_run has found to
   follow windows of their series: each sum added up in the windows' order, each key
   inserted in the order its first window comes, min / max the objects Python's min() and
   max() return, sums of the clock buckets and totals with Python's own number operations.
   It returns -1 with nothing changed when a window is not steady (logcolumns._windows'
   None): Python then tallies the rows one by one. */

typedef struct {
    PyObject **series, **run, **acc, **gen, **time;  /* borrowed, the windows' */
    double *r, *a, *g, *round;
    long long *bin, *key;
    Py_ssize_t n;
} Windows;

static void windows_free(Windows *w)
{
    PyMem_Free(w->series);
    PyMem_Free(w->r);
    PyMem_Free(w->bin);
    memset(w, 0, sizeof *w);
}

static int windows_alloc(Windows *w, Py_ssize_t n)
{
    memset(w, 0, sizeof *w);
    if (n > PY_SSIZE_T_MAX / (Py_ssize_t)(5 * sizeof(PyObject *)) - 1) {
        PyErr_NoMemory();
        return -1;
    }
    /* each entry is written before it is read (read_windows fills the first w->n) */
    w->series = PyMem_Malloc(((size_t)n * 5 + 1) * sizeof(PyObject *));
    w->r = PyMem_Malloc(((size_t)n * 4 + 1) * sizeof(double));
    w->bin = PyMem_Malloc(((size_t)n * 2 + 1) * sizeof(long long));
    if (w->series == NULL || w->r == NULL || w->bin == NULL) {
        windows_free(w);
        PyErr_NoMemory();
        return -1;
    }
    w->run = w->series + n;
    w->acc = w->run + n;
    w->gen = w->acc + n;
    w->time = w->gen + n;
    w->a = w->r + n;
    w->g = w->a + n;
    w->round = w->g + n;
    w->key = w->bin + n;
    return 0;
}

/* a number's value as a double, exactly (ints here are under 2**53: logvalues.checked);
   0 when it is not an int or a float (not steady: Python reads the run) */
static int number(PyObject *o, double *x)
{
    if (PyFloat_CheckExact(o)) {
        *x = PyFloat_AS_DOUBLE(o);
        return 1;
    }
    if (PyLong_CheckExact(o)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow || v > (1LL << 53) || v < -(1LL << 53))
            return 0;
        *x = (double)v;
        return 1;
    }
    return 0;
}

/* logcolumns._windows: the windows of the rows, checked steady; 1, 0 (not steady), -1 */
static int read_windows(Windows *w, PyObject *accept_on, PyObject *window, PyObject *series, PyObject *runs,
                        PyObject *accepts, PyObject *gens, PyObject *times, double bins_per_e, PyObject *bucket_s)
{
    Py_ssize_t n = PyList_GET_SIZE(window), nd = 0;
    if (accept_on == Py_None)
        return 0;
    int on = PyObject_IsTrue(accept_on);
    if (on < 0)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyList_GET_ITEM(window, i) != Py_True)
            continue;
        Py_ssize_t k = nd++;
        w->series[k] = PyTuple_GET_ITEM(series, i);
        w->run[k] = PyTuple_GET_ITEM(runs, i);
        w->acc[k] = PyTuple_GET_ITEM(accepts, i);
        w->gen[k] = PyTuple_GET_ITEM(gens, i);
        w->time[k] = PyTuple_GET_ITEM(times, i);
        if ((w->acc[k] != Py_None) != on || w->run[k] == Py_None)
            return 0;
        if (!number(w->gen[k], &w->g[k]) || !number(w->run[k], &w->r[k]))
            return 0;
        if (on) {
            if (!number(w->acc[k], &w->a[k]))
                return 0;
        } else {
            w->a[k] = 1.0;
        }
        if (!(w->g[k] > 0 && w->g[k] < INFINITY && w->r[k] > 0 && w->r[k] < 1e12 && w->a[k] > 0
              && w->a[k] < INFINITY))
            return 0;
        w->round[k] = w->a[k] * w->r[k] / w->g[k];  /* round_s; a * r is exact (both under 2**26) */
        if (!(w->round[k] > 0 && w->round[k] < 1e300))
            return 0;
        w->bin[k] = (long long)floor(log(w->round[k]) * bins_per_e);
        PyObject *q = PyNumber_FloorDivide(w->time[k], bucket_s);  /* int(time // BUCKET_S) */
        PyObject *key = q ? PyNumber_Long(q) : NULL;
        Py_XDECREF(q);
        if (key == NULL)
            return -1;
        int overflow = 0;
        w->key[k] = PyLong_AsLongLongAndOverflow(key, &overflow);
        Py_DECREF(key);
        if (overflow || (w->key[k] == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return 0;
        }
    }
    w->n = nd;
    return 1;
}

static int set_min_max(PyObject *list, Py_ssize_t at, PyObject *lo, PyObject *hi)
{
    /* `if lo < t[at]: t[at] = lo`, `if hi > t[at + 1]: t[at + 1] = hi` */
    int r = PyObject_RichCompareBool(lo, PyList_GET_ITEM(list, at), Py_LT);
    if (r < 0 || (r && PyList_SetItem(list, at, Py_NewRef(lo)) < 0))
        return -1;
    r = PyObject_RichCompareBool(hi, PyList_GET_ITEM(list, at + 1), Py_GT);
    if (r < 0 || (r && PyList_SetItem(list, at + 1, Py_NewRef(hi)) < 0))
        return -1;
    return 0;
}

static int add_to(PyObject *list, Py_ssize_t at, PyObject *v)
{
    PyObject *x = PyNumber_Add(PyList_GET_ITEM(list, at), v);
    return x == NULL ? -1 : PyList_SetItem(list, at, x);
}

static int add_count(PyObject *list, Py_ssize_t at, Py_ssize_t n)
{
    PyObject *k = PyLong_FromSsize_t(n);
    int r = k == NULL ? -1 : add_to(list, at, k);
    Py_XDECREF(k);
    return r;
}

/* logcolumns._fold: t[at] += count; t[at + 1] summed in order; min / max objects; idx the windows */
static int fold(PyObject *t, Py_ssize_t at, PyObject **obj, const double *x, const Py_ssize_t *idx, Py_ssize_t n)
{
    if (!PyList_Check(t) || PyList_GET_SIZE(t) < at + 4 || !PyFloat_Check(PyList_GET_ITEM(t, at + 1))) {
        PyErr_SetString(PyExc_TypeError, "_fastlog: not a tally list");
        return -1;
    }
    double sum = PyFloat_AS_DOUBLE(PyList_GET_ITEM(t, at + 1));
    Py_ssize_t lo = idx[0], hi = idx[0];
    for (Py_ssize_t j = 0; j < n; j++) {
        Py_ssize_t i = idx[j];
        sum += x[i];
        if (x[i] < x[lo])
            lo = i;
        if (x[i] > x[hi])
            hi = i;
    }
    PyObject *s = PyFloat_FromDouble(sum);
    if (s == NULL || PyList_SetItem(t, at + 1, s) < 0 || add_count(t, at, n) < 0)
        return -1;
    return set_min_max(t, at + 2, obj[lo], obj[hi]);
}

static PyObject *new_steady(void)
{
    return Py_BuildValue("[iddddddiddd]", 0, 0.0, INFINITY, -INFINITY, 0.0, INFINITY, -INFINITY, 0, 0.0, INFINITY,
                         -INFINITY);
}

/* logcolumns._steady: per round-time bin, in the order each bin's first window comes */
static int count_steady(PyObject *steady, const Windows *w, int on, Py_ssize_t *idx)
{
    Py_ssize_t n = w->n;
    char *done = PyMem_Calloc((size_t)n + 1, 1);
    if (done == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    int rc = -1;
    for (Py_ssize_t first = 0; first < n; first++) {
        if (done[first])
            continue;
        Py_ssize_t m = 0;
        for (Py_ssize_t i = first; i < n; i++)
            if (!done[i] && w->bin[i] == w->bin[first]) {
                done[i] = 1;
                idx[m++] = i;
            }
        PyObject *key = Py_BuildValue("(OL)", Py_False, w->bin[first]);
        if (key == NULL)
            goto end;
        PyObject *t = PyDict_GetItemWithError(steady, key);  /* borrowed */
        if (t == NULL && !PyErr_Occurred()) {
            PyObject *fresh = new_steady();
            if (fresh == NULL || PyDict_SetItem(steady, key, fresh) < 0) {
                Py_XDECREF(fresh);
                Py_DECREF(key);
                goto end;
            }
            t = fresh;
            Py_DECREF(fresh);  /* the dict holds it */
        }
        Py_DECREF(key);
        if (t == NULL || fold(t, 0, w->gen, w->g, idx, m) < 0)
            goto end;
        /* t[4] += each g / r in order; its min and max into t[5], t[6] */
        double sum = PyFloat_AS_DOUBLE(PyList_GET_ITEM(t, 4)), lo = 0, hi = 0;
        for (Py_ssize_t j = 0; j < m; j++) {
            double p = w->g[idx[j]] / w->r[idx[j]];
            sum += p;
            if (j == 0 || p < lo)
                lo = p;
            if (j == 0 || p > hi)
                hi = p;
        }
        PyObject *s = PyFloat_FromDouble(sum), *l = PyFloat_FromDouble(lo), *h = PyFloat_FromDouble(hi);
        int bad = s == NULL || l == NULL || h == NULL || PyList_SetItem(t, 4, Py_NewRef(s)) < 0
                  || set_min_max(t, 5, l, h) < 0;
        Py_XDECREF(s);
        Py_XDECREF(l);
        Py_XDECREF(h);
        if (bad || (on && fold(t, 7, w->acc, w->a, idx, m) < 0))
            goto end;
    }
    rc = 0;
end:
    PyMem_Free(done);
    return rc;
}

/* the series of windows idx[0..m) in the order they come, each with its windows (logcolumns._by_series):
   series' first windows in first[0..*k); each window's series number in which[] */
static int by_series(const Windows *w, const Py_ssize_t *idx, Py_ssize_t m, Py_ssize_t *first, Py_ssize_t *which,
                     Py_ssize_t *k)
{
    *k = 0;
    for (Py_ssize_t j = 0; j < m; j++) {
        Py_ssize_t s = 0;
        for (; s < *k; s++) {
            int eq = PyObject_RichCompareBool(w->series[idx[j]], w->series[first[s]], Py_EQ);
            if (eq < 0)
                return -1;
            if (eq)
                break;
        }
        if (s == *k)
            first[(*k)++] = idx[j];
        which[j] = s;
    }
    return 0;
}

/* gens of series s among windows idx[0..m), added up from `start` (NULL: from the first) in order */
static PyObject *sum_gens(const Windows *w, const Py_ssize_t *idx, const Py_ssize_t *which, Py_ssize_t m,
                          Py_ssize_t s, PyObject *start, Py_ssize_t *count)
{
    PyObject *acc = start ? Py_NewRef(start) : NULL;
    *count = 0;
    for (Py_ssize_t j = 0; j < m; j++) {
        if (which[j] != s)
            continue;
        ++*count;
        PyObject *g = w->gen[idx[j]];
        if (acc == NULL) {
            acc = Py_NewRef(g);
            continue;
        }
        Py_SETREF(acc, PyNumber_Add(acc, g));
        if (acc == NULL)
            return NULL;
    }
    return acc;
}

static long long max_bin(const Windows *w, const Py_ssize_t *idx, Py_ssize_t m)
{
    long long top = w->bin[idx[0]];
    for (Py_ssize_t j = 1; j < m; j++)
        if (w->bin[idx[j]] > top)
            top = w->bin[idx[j]];
    return top;
}

/* logcolumns._into_bucket of windows idx[0..m) (one clock key) */
static int into_bucket(PyObject *scan, PyObject *t, const Windows *w, const Py_ssize_t *idx, Py_ssize_t m,
                       Py_ssize_t *first, Py_ssize_t *which)
{
    PyObject *key = PyLong_FromLongLong(w->key[idx[0]]), *bucket = NULL;
    if (key == NULL)
        return -1;
    int rc = -1;
    bucket = PyObject_GetAttrString(t, "bucket");
    if (bucket == NULL)
        goto end;
    int other = bucket == Py_None;
    if (!other) {
        if (!PyList_Check(bucket) || PyList_GET_SIZE(bucket) < 4 || !PyDict_Check(PyList_GET_ITEM(bucket, 1))) {
            PyErr_SetString(PyExc_TypeError, "_fastlog: not a clock bucket");
            goto end;
        }
        other = PyObject_RichCompareBool(PyList_GET_ITEM(bucket, 0), key, Py_NE);
        if (other < 0)
            goto end;
    }
    if (other) {
        Py_SETREF(bucket, PyObject_CallMethod(scan, "open_bucket", "OO", t, key));
        if (bucket == NULL)
            goto end;
        if (!PyList_Check(bucket) || PyList_GET_SIZE(bucket) < 4 || !PyDict_Check(PyList_GET_ITEM(bucket, 1))) {
            PyErr_SetString(PyExc_TypeError, "_fastlog: not a clock bucket");
            goto end;
        }
    }
    PyObject *per_series = PyList_GET_ITEM(bucket, 1);
    Py_ssize_t k;
    if (by_series(w, idx, m, first, which, &k) < 0)
        goto end;
    for (Py_ssize_t s = 0; s < k; s++) {
        PyObject *name = w->series[first[s]];
        PyObject *per = PyDict_GetItemWithError(per_series, name);  /* borrowed */
        Py_ssize_t count;
        if (per == NULL) {
            if (PyErr_Occurred())
                goto end;
            PyObject *sum = sum_gens(w, idx, which, m, s, NULL, &count);
            PyObject *fresh = sum ? Py_BuildValue("[On]", sum, count) : NULL;
            Py_XDECREF(sum);
            int bad = fresh == NULL || PyDict_SetItem(per_series, name, fresh) < 0;
            Py_XDECREF(fresh);
            if (bad)
                goto end;
        } else {
            if (!PyList_Check(per) || PyList_GET_SIZE(per) < 2) {
                PyErr_SetString(PyExc_TypeError, "_fastlog: not a bucket's [sum, n]");
                goto end;
            }
            PyObject *sum = sum_gens(w, idx, which, m, s, PyList_GET_ITEM(per, 0), &count);
            if (sum == NULL || PyList_SetItem(per, 0, sum) < 0 || add_count(per, 1, count) < 0)
                goto end;
        }
    }
    PyObject *top = PyLong_FromLongLong(max_bin(w, idx, m));
    if (top == NULL)
        goto end;
    PyObject *old = PyList_GET_ITEM(bucket, 3);
    int higher = old == Py_None ? 1 : PyObject_RichCompareBool(top, old, Py_GT);
    if (higher < 0 || (higher && PyList_SetItem(bucket, 3, Py_NewRef(top)) < 0)) {
        Py_DECREF(top);
        goto end;
    }
    Py_DECREF(top);
    rc = 0;
end:
    Py_XDECREF(key);
    Py_XDECREF(bucket);
    return rc;
}

/* a bucket opened and closed inside the run: logsummary's close_bucket sum over series
   (logcolumns._total) into t.totals[(False, max bin, None, series)] (logtally.add4) */
static int total_bucket(PyObject *t, const Windows *w, const Py_ssize_t *idx, Py_ssize_t m, Py_ssize_t *first,
                        Py_ssize_t *which, PyObject *builtin_sum)
{
    Py_ssize_t k;
    if (by_series(w, idx, m, first, which, &k) < 0)
        return -1;
    PyObject *means = PyList_New(k), *total = NULL, *totals = NULL, *key = NULL, *t4 = NULL;
    int rc = -1;
    if (means == NULL)
        return -1;
    for (Py_ssize_t s = 0; s < k; s++) {
        Py_ssize_t count;
        PyObject *sum = sum_gens(w, idx, which, m, s, NULL, &count);
        PyObject *n = sum ? PyLong_FromSsize_t(count) : NULL;
        PyObject *mean = n ? PyNumber_TrueDivide(sum, n) : NULL;
        Py_XDECREF(sum);
        Py_XDECREF(n);
        if (mean == NULL)
            goto end;
        PyList_SET_ITEM(means, s, mean);
    }
    total = k == 1 ? Py_NewRef(PyList_GET_ITEM(means, 0)) : PyObject_CallOneArg(builtin_sum, means);
    totals = total ? PyObject_GetAttrString(t, "totals") : NULL;
    key = totals ? Py_BuildValue("(OLOn)", Py_False, max_bin(w, idx, m), Py_None, k) : NULL;
    if (key == NULL)
        goto end;
    if (!PyDict_Check(totals)) {
        PyErr_SetString(PyExc_TypeError, "_fastlog: totals not a dict");
        goto end;
    }
    t4 = PyDict_GetItemWithError(totals, key);
    if (t4 == NULL) {
        if (PyErr_Occurred())
            goto end;
        t4 = Py_BuildValue("[iddd]", 0, 0.0, INFINITY, -INFINITY);
        if (t4 == NULL || PyDict_SetItem(totals, key, t4) < 0)
            goto end;
    } else {
        Py_INCREF(t4);
    }
    if (!PyList_Check(t4) || PyList_GET_SIZE(t4) < 4) {
        PyErr_SetString(PyExc_TypeError, "_fastlog: not a 4-list");
        goto end;
    }
    if (add_count(t4, 0, 1) < 0 || add_to(t4, 1, total) < 0 || set_min_max(t4, 2, total, total) < 0)
        goto end;
    rc = 0;
end:
    Py_XDECREF(means);
    Py_XDECREF(total);
    Py_XDECREF(totals);
    Py_XDECREF(key);
    Py_XDECREF(t4);
    return rc;
}

static int add_attr(PyObject *o, const char *name, Py_ssize_t n)
{
    PyObject *v = PyObject_GetAttrString(o, name), *k = v ? PyLong_FromSsize_t(n) : NULL;
    PyObject *x = k ? PyNumber_Add(v, k) : NULL;
    int r = x == NULL ? -1 : PyObject_SetAttrString(o, name, x);
    Py_XDECREF(v);
    Py_XDECREF(k);
    Py_XDECREF(x);
    return r;
}

/* whether open_bucket keeps a head (logsummary.open_bucket's test): scan.tagger.continues,
   one tally, t.head None */
static int keeps_head(PyObject *scan, PyObject *t)
{
    PyObject *tagger = PyObject_GetAttrString(scan, "tagger"), *cont = NULL, *tallies = NULL, *head = NULL;
    int r = -1;
    if (tagger == NULL || (cont = PyObject_GetAttrString(tagger, "continues")) == NULL
        || (tallies = PyObject_GetAttrString(scan, "tallies")) == NULL || (head = PyObject_GetAttrString(t, "head")) == NULL)
        goto end;
    int c = PyObject_IsTrue(cont);
    Py_ssize_t n = PyObject_Length(tallies);
    if (c < 0 || n < 0)
        goto end;
    r = c && n == 1 && head == Py_None;
end:
    Py_XDECREF(tagger);
    Py_XDECREF(cont);
    Py_XDECREF(tallies);
    Py_XDECREF(head);
    return r;
}

/* logcolumns._tally's buckets: the windows grouped by clock key, in order */
static int tally_buckets(PyObject *scan, PyObject *t, const Windows *w, Py_ssize_t *idx, Py_ssize_t *first,
                         Py_ssize_t *which, PyObject *builtin_sum)
{
    Py_ssize_t n = w->n, groups = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (i == 0 || w->key[i] != w->key[i - 1])
            idx[groups++] = i;  /* where each group starts */
    idx[groups] = n;
    Py_ssize_t *members = PyMem_Malloc(((size_t)n + 1) * sizeof(Py_ssize_t));
    if (members == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        members[i] = i;
    int rc = -1, head = 0;
    for (Py_ssize_t q = 0; q < groups; q++) {
        Py_ssize_t a = idx[q], m = idx[q + 1] - a;
        if (q == 1) {
            head = keeps_head(scan, t);
            if (head < 0)
                goto end;
            if (!head) {
                PyObject *r = PyObject_CallMethod(scan, "close_bucket", "O", t);
                if (r == NULL)
                    goto end;
                Py_DECREF(r);
            }
        }
        if (q == 0 || q == groups - 1 || head) {
            if (into_bucket(scan, t, w, members + a, m, first, which) < 0)
                goto end;
        } else if (total_bucket(t, w, members + a, m, first, which, builtin_sum) < 0) {
            goto end;
        }
    }
    rc = 0;
end:
    PyMem_Free(members);
    return rc;
}

/* tally(scan, t, i, accept_on, window, series, runs, accepts, gens, times, codes, (bins per e, BUCKET_S, BIN0, sum))
   -> windows tallied, or -1: not steady, nothing changed */
static PyObject *tally(PyObject *self, PyObject *args)
{
    PyObject *scan, *t, *accept_on, *window, *series, *runs, *accepts, *gens, *times, *codes, *bucket_s, *builtin_sum;
    Py_ssize_t seg;
    double bins_per_e;
    long long bin0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOnOO!O!O!O!O!O!O(dOLO):tally", &scan, &t, &seg, &accept_on, &PyList_Type, &window,
                          &PyTuple_Type, &series, &PyTuple_Type, &runs, &PyTuple_Type, &accepts, &PyTuple_Type, &gens,
                          &PyTuple_Type, &times, &codes, &bins_per_e, &bucket_s, &bin0, &builtin_sum))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(window);
    if (PyTuple_GET_SIZE(series) != n || PyTuple_GET_SIZE(runs) != n || PyTuple_GET_SIZE(accepts) != n
        || PyTuple_GET_SIZE(gens) != n || PyTuple_GET_SIZE(times) != n) {
        PyErr_SetString(PyExc_ValueError, "tally: columns of different lengths");
        return NULL;
    }
    Windows w;
    if (windows_alloc(&w, n) < 0)
        return NULL;
    Py_ssize_t *idx = PyMem_Malloc(((size_t)n * 3 + 3) * sizeof(Py_ssize_t));  /* written before read */
    PyObject *result = NULL;
    if (idx == NULL) {
        PyErr_NoMemory();
        goto end;
    }
    int ok = read_windows(&w, accept_on, window, series, runs, accepts, gens, times, bins_per_e, bucket_s);
    if (ok <= 0) {
        result = ok < 0 ? NULL : PyLong_FromLong(-1);
        goto end;
    }
    Py_ssize_t nd = w.n;
    if (nd == 0) {
        result = PyLong_FromLong(0);
        goto end;
    }
    int on = accept_on != Py_None && PyObject_IsTrue(accept_on) == 1;
    PyObject *tagger = PyObject_GetAttrString(scan, "tagger");
    PyObject *last = tagger ? Py_BuildValue("(nOL)", seg, Py_False, w.bin[nd - 1]) : NULL;
    int bad = last == NULL || PyObject_SetAttrString(tagger, "_last", last) < 0;
    Py_XDECREF(tagger);
    Py_XDECREF(last);
    if (bad)
        goto end;
    for (Py_ssize_t i = 0; i < nd; i++)
        idx[i] = i;
    if (on) {
        PyObject *acc4 = PyObject_GetAttrString(t, "accept");
        bad = acc4 == NULL || fold(acc4, 0, w.acc, w.a, idx, nd) < 0;
        Py_XDECREF(acc4);
        if (bad)
            goto end;
    }
    if (add_attr(scan, "windows", nd) < 0 || add_attr(t, "windows", nd) < 0)
        goto end;
    PyObject *ranks = PyObject_GetAttrString(t, "ranks");
    if (ranks == NULL || !PySet_Check(ranks)) {
        if (ranks != NULL)
            PyErr_SetString(PyExc_TypeError, "_fastlog: ranks not a set");
        Py_XDECREF(ranks);
        goto end;
    }
    for (Py_ssize_t i = 0; i < nd; i++)
        if (PySet_Add(ranks, w.series[i]) < 0) {
            Py_DECREF(ranks);
            goto end;
        }
    Py_DECREF(ranks);
    PyObject *steady = PyObject_GetAttrString(t, "steady");
    bad = steady == NULL || !PyDict_Check(steady) || count_steady(steady, &w, on, idx) < 0;
    if (steady != NULL && !PyDict_Check(steady) && !PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "_fastlog: steady not a dict");
    Py_XDECREF(steady);
    if (bad || tally_buckets(scan, t, &w, idx, idx + nd + 1, idx + 2 * nd + 2, builtin_sum) < 0)
        goto end;
    if (codes != Py_None) {  /* tag_code((seg, False, bin)) of each window */
        PyObject *b = PyBytes_FromStringAndSize(NULL, nd * (Py_ssize_t)sizeof(long long));
        if (b == NULL)
            goto end;
        long long *c = (long long *)PyBytes_AS_STRING(b), base = ((long long)(2 * seg) << 22) + bin0;
        for (Py_ssize_t i = 0; i < nd; i++)
            c[i] = w.bin[i] + base;
        PyObject *r = PyObject_CallMethod(codes, "frombytes", "O", b);
        Py_DECREF(b);
        if (r == NULL)
            goto end;
        Py_DECREF(r);
    }
    result = PyLong_FromSsize_t(nd);
end:
    windows_free(&w);
    PyMem_Free(idx);
    return result;
}

/* ---------------------------------------------------------------- warm-up flags

   count(chunk, byte) -> how many times the byte occurs (bytes.count reads one byte at a
   time, memchr skips ahead); fill(chunk, marks) -> chunk with its i-th
   byte 0 replaced by marks[i] (logfused.copy_records' flags), in one pass. */

static PyObject *count(PyObject *self, PyObject *args)
{
    Py_buffer b;
    unsigned char c;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*b:count", &b, &c))
        return NULL;
    const char *p = b.buf, *end = p + b.len;
    Py_ssize_t n = 0;
    while (p < end && (p = memchr(p, c, (size_t)(end - p))) != NULL) {
        n++;
        p++;
    }
    PyBuffer_Release(&b);
    return PyLong_FromSsize_t(n);
}

static PyObject *fill(PyObject *self, PyObject *args)
{
    Py_buffer b;
    PyObject *marks, *out = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*O!:fill", &b, &PyList_Type, &marks))
        return NULL;
    Py_ssize_t k = PyList_GET_SIZE(marks), size = b.len;
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *m = PyList_GET_ITEM(marks, i);
        if (!PyBytes_Check(m)) {
            PyErr_SetString(PyExc_TypeError, "fill: marks must be bytes");
            goto end;
        }
        if (PyBytes_GET_SIZE(m) > PY_SSIZE_T_MAX - size) {
            PyErr_NoMemory();
            goto end;
        }
        size += PyBytes_GET_SIZE(m) - 1;
    }
    out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL)
        goto end;
    const char *p = b.buf, *end = p + b.len;
    char *q = PyBytes_AS_STRING(out), *qend = q + size;
    Py_ssize_t i = 0;
    for (;;) {
        const char *z = p < end ? memchr(p, 0, (size_t)(end - p)) : NULL;
        Py_ssize_t run = (z ? z : end) - p;
        if (z != NULL && i >= k) {
            PyErr_SetString(PyExc_ValueError, "fill: fewer marks than bytes 0");
            Py_CLEAR(out);
            goto end;
        }
        if (run > qend - q)
            break;
        memcpy(q, p, (size_t)run);
        q += run;
        if (z == NULL)
            break;
        PyObject *m = PyList_GET_ITEM(marks, i++);
        if (PyBytes_GET_SIZE(m) > qend - q)
            break;
        memcpy(q, PyBytes_AS_STRING(m), (size_t)PyBytes_GET_SIZE(m));
        q += PyBytes_GET_SIZE(m);
        p = z + 1;
    }
    if (q != qend || i != k) {
        PyErr_SetString(PyExc_ValueError, "fill: more marks than bytes 0");
        Py_CLEAR(out);
    }
end:
    PyBuffer_Release(&b);
    return out;
}

static PyMethodDef methods[] = {
    {"kept", kept, METH_VARARGS,
     "kept(data, skipped, wanted, follow, long, open) -> (lines, [(index, line)], open): the lines the settings "
     "pass reads"},
    {"count", count, METH_VARARGS, "count(chunk, byte) -> how many times the byte occurs in the chunk"},
    {"fill", fill, METH_VARARGS, "fill(chunk, marks) -> the chunk, its i-th byte 0 replaced by marks[i]"},
    {"tally", tally, METH_VARARGS, "the windows of a steady run into the scan's tally (logcolumns._steady_run)"},
    {"scan", scan, METH_VARARGS,
     "scan(data, pos, line_no, (decode spec, prefill spec), (minutes, tails, dumps, banner), rows, batch, "
     "offset) -> (pos, line_no, skipped, records, line or None)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastlog", "The quick path of an SGLang log in C.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__fastlog(void) { return PyModule_Create(&module); }
