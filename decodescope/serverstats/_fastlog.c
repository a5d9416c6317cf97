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
    memcpy(b->p + b->len, s, (size_t)n);
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
    if (n < 1 || n > MAX_PIECES || PyTuple_GET_SIZE(types) != n) {
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
} Stamp;

static void stamp_clear(Stamp *st)
{
    Py_CLEAR(st->time_s);
    Py_CLEAR(st->series);
    Py_CLEAR(st->time_j);
    Py_CLEAR(st->rank_j);
    st->len = 0;
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
    PyObject *key = text_of(p, s, 18), *base = NULL, *tail = NULL, *t = NULL, *j = NULL;
    if (key == NULL)
        return -1;
    base = PyObject_GetItem(minutes, key);
    Py_DECREF(key);
    if (base == NULL)
        return -1;
    key = text_of(p, s + 20, body - s - 20);
    if (key == NULL)
        goto fail;
    tail = PyObject_GetItem(tails, key);
    Py_DECREF(key);
    if (tail == NULL)
        goto fail;
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
    char num[32];
    int n = snprintf(num, sizeof num, "%lld", line_no);
    Py_ssize_t rl;
    const char *rank = PyUnicode_AsUTF8AndSize(st->rank_j, &rl);
    Py_ssize_t fl;
    const char *flag = PyUnicode_AsUTF8AndSize(sp->flag, &fl);
    if (rank == NULL || flag == NULL || n < 0 || n >= (int)sizeof num)
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
    Spec *specs = PyMem_Calloc(2, sizeof(Spec));
    Span *g = PyMem_Calloc(MAX_PIECES, sizeof(Span));
    Buf out = {NULL, 0, 0};
    Stamp st = {0, 0, NULL, NULL, NULL, NULL};
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
    stamp_clear(&st);
    PyMem_Free(out.p);
    PyMem_Free(specs);
    PyMem_Free(g);
    PyBuffer_Release(&data);
    return result;
}

/* kept(data, needles, long) -> (lines, [(index, line bytes)]): the lines of `data` (split
   at "\n") holding none of the needles, and every line of `long` bytes or more, with their
   index (0: the first line); `lines` how many lines `data` holds. */
static PyObject *kept(PyObject *self, PyObject *args)
{
    Py_buffer data;
    PyObject *needles;
    Py_ssize_t long_line;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*O!n:kept", &data, &PyTuple_Type, &needles, &long_line))
        return NULL;
    PyObject *out = PyList_New(0), *result = NULL;
    Py_ssize_t k = PyTuple_GET_SIZE(needles), index = 0;
    for (Py_ssize_t i = 0; i < k; i++)
        if (!PyBytes_Check(PyTuple_GET_ITEM(needles, i))) {
            PyErr_SetString(PyExc_TypeError, "kept: needles must be bytes");
            goto end;
        }
    if (out == NULL)
        goto end;
    const char *p = data.buf;
    Py_ssize_t n = data.len, pos = 0;
    for (;; index++) {
        const char *nl = pos < n ? memchr(p + pos, '\n', (size_t)(n - pos)) : NULL;
        Py_ssize_t e = nl ? nl - p : n, len = e - pos;
        int keep = len >= long_line;
        for (Py_ssize_t i = 0; !keep && i < k; i++) {
            PyObject *nd = PyTuple_GET_ITEM(needles, i);
            if (holds(p + pos, len, PyBytes_AS_STRING(nd), PyBytes_GET_SIZE(nd)))
                break;
            if (i == k - 1)
                keep = 1;
        }
        if (keep || k == 0) {
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
    result = Py_BuildValue("nO", index + 1, out);
end:
    Py_XDECREF(out);
    PyBuffer_Release(&data);
    return result;
}

static PyMethodDef methods[] = {
    {"kept", kept, METH_VARARGS,
     "kept(data, needles, long) -> (lines, [(index, line)]): the lines holding none of the needles or long"},
    {"scan", scan, METH_VARARGS,
     "scan(data, pos, line_no, (decode spec, prefill spec), (minutes, tails, dumps, banner), rows, batch, "
     "offset) -> (pos, line_no, skipped, records, line or None)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastlog", "The quick path of an SGLang log in C.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__fastlog(void) { return PyModule_Create(&module); }
