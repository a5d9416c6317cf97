/* The steady-run tally, second part: the clock buckets, and tally() itself (part of
   _fastlog.c, which includes it: one translation unit) */

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

/* a clock bucket: [key, {series: [sum, n]}, idle, max bin, ...] (logtally.new_bucket) */
static int is_bucket(PyObject *b)
{
    if (PyList_Check(b) && PyList_GET_SIZE(b) >= 4 && PyDict_Check(PyList_GET_ITEM(b, 1)))
        return 1;
    PyErr_SetString(PyExc_TypeError, "_fastlog: not a clock bucket");
    return 0;
}

/* t.bucket when its clock key is `key`, else scan.open_bucket(t, key); a new reference, NULL on an error */
static PyObject *bucket_for(PyObject *scan, PyObject *t, PyObject *key)
{
    PyObject *bucket = PyObject_GetAttrString(t, "bucket");
    if (bucket == NULL)
        return NULL;
    int other = bucket == Py_None;
    if (!other) {
        other = is_bucket(bucket) ? PyObject_RichCompareBool(PyList_GET_ITEM(bucket, 0), key, Py_NE) : -1;
        if (other < 0)
            Py_CLEAR(bucket);
    }
    if (other > 0) {
        Py_SETREF(bucket, PyObject_CallMethod(scan, "open_bucket", "OO", t, key));
        if (bucket != NULL && !is_bucket(bucket))
            Py_CLEAR(bucket);
    }
    return bucket;
}

/* bucket[1][series s] = [sum of its gens, n], or its gens added to the sum there */
static int add_series(PyObject *per_series, const Windows *w, const Py_ssize_t *idx, const Py_ssize_t *which,
                      Py_ssize_t m, Py_ssize_t s, PyObject *name)
{
    PyObject *per = PyDict_GetItemWithError(per_series, name);  /* borrowed */
    Py_ssize_t count;
    if (per == NULL) {
        if (PyErr_Occurred())
            return -1;
        PyObject *sum = sum_gens(w, idx, which, m, s, NULL, &count);
        PyObject *fresh = sum ? Py_BuildValue("[On]", sum, count) : NULL;
        Py_XDECREF(sum);
        int r = fresh == NULL ? -1 : PyDict_SetItem(per_series, name, fresh);
        Py_XDECREF(fresh);
        return r;
    }
    if (!PyList_Check(per) || PyList_GET_SIZE(per) < 2) {
        PyErr_SetString(PyExc_TypeError, "_fastlog: not a bucket's [sum, n]");
        return -1;
    }
    PyObject *sum = sum_gens(w, idx, which, m, s, PyList_GET_ITEM(per, 0), &count);
    if (sum == NULL || PyList_SetItem(per, 0, sum) < 0)
        return -1;
    return add_count(per, 1, count);
}

/* logcolumns._into_bucket of windows idx[0..m) (one clock key) */
static int into_bucket(PyObject *scan, PyObject *t, const Windows *w, const Py_ssize_t *idx, Py_ssize_t m,
                       Py_ssize_t *first, Py_ssize_t *which)
{
    PyObject *key = PyLong_FromLongLong(w->key[idx[0]]);
    PyObject *bucket = key ? bucket_for(scan, t, key) : NULL, *top = NULL;
    Py_ssize_t k;
    int rc = -1;
    if (bucket == NULL || by_series(w, idx, m, first, which, &k) < 0)
        goto end;
    for (Py_ssize_t s = 0; s < k; s++)
        if (add_series(PyList_GET_ITEM(bucket, 1), w, idx, which, m, s, w->series[first[s]]) < 0)
            goto end;
    if ((top = PyLong_FromLongLong(max_bin(w, idx, m))) == NULL)
        goto end;
    PyObject *old = PyList_GET_ITEM(bucket, 3);  /* `if bucket[3] is None or top > bucket[3]: bucket[3] = top` */
    int higher = old == Py_None ? 1 : PyObject_RichCompareBool(top, old, Py_GT);
    if (higher >= 0 && (!higher || PyList_SetItem(bucket, 3, Py_NewRef(top)) == 0))
        rc = 0;
end:
    Py_XDECREF(key);
    Py_XDECREF(bucket);
    Py_XDECREF(top);
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

/* scan.tagger._last = (seg, False, the last window's bin) */
static int set_last(PyObject *scan, Py_ssize_t seg, long long bin)
{
    PyObject *tagger = PyObject_GetAttrString(scan, "tagger");
    PyObject *last = tagger ? Py_BuildValue("(nOL)", seg, Py_False, bin) : NULL;
    int r = last == NULL ? -1 : PyObject_SetAttrString(tagger, "_last", last);
    Py_XDECREF(tagger);
    Py_XDECREF(last);
    return r;
}

/* t.ranks.update(the windows' series) */
static int add_ranks(PyObject *t, const Windows *w)
{
    PyObject *ranks = PyObject_GetAttrString(t, "ranks");
    int r = ranks == NULL ? -1 : 0;
    if (ranks != NULL && !PySet_Check(ranks)) {
        PyErr_SetString(PyExc_TypeError, "_fastlog: ranks not a set");
        r = -1;
    }
    for (Py_ssize_t i = 0; r == 0 && i < w->n; i++)
        r = PySet_Add(ranks, w->series[i]);
    Py_XDECREF(ranks);
    return r;
}

/* logcolumns._steady into t.steady */
static int add_steady(PyObject *t, const Windows *w, int on, Py_ssize_t *idx)
{
    PyObject *steady = PyObject_GetAttrString(t, "steady");
    if (steady != NULL && !PyDict_Check(steady)) {
        PyErr_SetString(PyExc_TypeError, "_fastlog: steady not a dict");
        Py_CLEAR(steady);
    }
    int r = steady == NULL ? -1 : count_steady(steady, w, on, idx);
    Py_XDECREF(steady);
    return r;
}

/* codes.extend(tag_code((seg, False, bin)) of each window) */
static int add_codes(PyObject *codes, const Windows *w, Py_ssize_t seg, long long bin0)
{
    PyObject *b = PyBytes_FromStringAndSize(NULL, w->n * (Py_ssize_t)sizeof(long long));
    if (b == NULL)
        return -1;
    long long *c = (long long *)PyBytes_AS_STRING(b), base = ((long long)(2 * seg) << 22) + bin0;
    for (Py_ssize_t i = 0; i < w->n; i++)
        c[i] = w->bin[i] + base;
    PyObject *r = PyObject_CallMethod(codes, "frombytes", "O", b);
    Py_DECREF(b);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* logcolumns._tally of the windows w (at least one), in its order of updates */
static int tally_windows(PyObject *scan, PyObject *t, Py_ssize_t seg, int on, const Windows *w, Py_ssize_t *idx,
                         PyObject *codes, long long bin0, PyObject *builtin_sum)
{
    Py_ssize_t nd = w->n;
    if (set_last(scan, seg, w->bin[nd - 1]) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < nd; i++)
        idx[i] = i;
    if (on) {
        PyObject *acc4 = PyObject_GetAttrString(t, "accept");
        int bad = acc4 == NULL || fold(acc4, 0, w->acc, w->a, idx, nd) < 0;
        Py_XDECREF(acc4);
        if (bad)
            return -1;
    }
    if (add_attr(scan, "windows", nd) < 0 || add_attr(t, "windows", nd) < 0 || add_ranks(t, w) < 0
        || add_steady(t, w, on, idx) < 0 || tally_buckets(scan, t, w, idx, idx + nd + 1, idx + 2 * nd + 2, builtin_sum) < 0)
        return -1;
    return codes == Py_None ? 0 : add_codes(codes, w, seg, bin0);
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
    int ok = idx == NULL ? -1 : read_windows(&w, accept_on, window, series, runs, accepts, gens, times, bins_per_e,
                                             bucket_s);
    if (idx == NULL)
        PyErr_NoMemory();
    else if (ok == 0)
        result = PyLong_FromLong(-1);
    else if (ok > 0 && (w.n == 0 || tally_windows(scan, t, seg, accept_on != Py_None && PyObject_IsTrue(accept_on) == 1,
                                                   &w, idx, codes, bin0, builtin_sum) == 0))
        result = PyLong_FromSsize_t(w.n);
    windows_free(&w);
    PyMem_Free(idx);
    return result;
}
