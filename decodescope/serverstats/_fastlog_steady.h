/* The steady-run tally, first part: the windows and their sums per round-time bin (part of
   _fastlog.c, which includes it: one translation unit) */

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

/* steady[(False, bin)], made [0, 0.0, inf, -inf, ...] when missing (borrowed; NULL on an error) */
static PyObject *steady_list(PyObject *steady, long long bin)
{
    PyObject *key = Py_BuildValue("(OL)", Py_False, bin);
    if (key == NULL)
        return NULL;
    PyObject *t = PyDict_GetItemWithError(steady, key);  /* borrowed */
    if (t == NULL && !PyErr_Occurred()) {
        PyObject *fresh = new_steady();
        if (fresh != NULL && PyDict_SetItem(steady, key, fresh) == 0)
            t = fresh;  /* the dict holds it */
        Py_XDECREF(fresh);
    }
    Py_DECREF(key);
    if (t != NULL && !(PyList_Check(t) && PyList_GET_SIZE(t) == 11 && PyFloat_Check(PyList_GET_ITEM(t, 4)))) {
        PyErr_SetString(PyExc_TypeError, "_fastlog: not a steady tally list");
        return NULL;
    }
    return t;
}

/* t[4] += each g / r of windows idx[0..m) in order; their min and max into t[5], t[6] */
static int fold_per_req(PyObject *t, const Windows *w, const Py_ssize_t *idx, Py_ssize_t m)
{
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
    int bad = s == NULL || l == NULL || h == NULL || PyList_SetItem(t, 4, Py_NewRef(s)) < 0 || set_min_max(t, 5, l, h) < 0;
    Py_XDECREF(s);
    Py_XDECREF(l);
    Py_XDECREF(h);
    return bad ? -1 : 0;
}

/* logcolumns._steady: per round-time bin, in the order each bin's first window comes, its
   windows in order (idx: room for w->n) */
static int count_steady(PyObject *steady, const Windows *w, int on, Py_ssize_t *idx)
{
    char *done = PyMem_Calloc((size_t)w->n + 1, 1);
    if (done == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    int rc = 0;
    for (Py_ssize_t first = 0; rc == 0 && first < w->n; first++) {
        if (done[first])
            continue;
        Py_ssize_t m = 0;
        for (Py_ssize_t i = first; i < w->n; i++)
            if (!done[i] && w->bin[i] == w->bin[first]) {
                done[i] = 1;
                idx[m++] = i;
            }
        PyObject *t = steady_list(steady, w->bin[first]);
        if (t == NULL || fold(t, 0, w->gen, w->g, idx, m) < 0 || fold_per_req(t, w, idx, m) < 0
            || (on && fold(t, 7, w->acc, w->a, idx, m) < 0))
            rc = -1;
    }
    PyMem_Free(done);
    return rc;
}

/* the series of windows idx[0..m) in the order they come, each with its windows (logcolumns._by_series):
   series' first windows in first[0..*k); each window's series number in which[] */
