/* Reading one SGLang statistics line: its shape's spec, the stamp, the values (part of
   _fastlog.c, which includes it: one translation unit) */

/* the s->n literals and their value types (T_INT .. T_FALSE) of a spec; counts the groups */
static int read_pieces(PyObject *lits, PyObject *types, Spec *s)
{
    s->n_groups = 0;
    for (Py_ssize_t i = 0; i < s->n; i++) {
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
    return 0;
}

/* the record template's pieces (their count checked by the caller) */
static int read_template(PyObject *tpl, Spec *s)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tpl); i++) {
        PyObject *t = PyTuple_GET_ITEM(tpl, i);
        if (!PyBytes_Check(t)) {
            PyErr_SetString(PyExc_TypeError, "spec: template piece not bytes");
            return -1;
        }
        s->tpl[i] = PyBytes_AS_STRING(t);
        s->tpl_len[i] = PyBytes_GET_SIZE(t);
    }
    return 0;
}

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
    if (read_pieces(lits, types, s) < 0)
        return -1;
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
    if (read_template(tpl, s) < 0)
        return -1;
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
