/*
 * store_metrics.c -- metrics tables: batched writing and reading back (see
 * the metrics section of store.h).
 *
 * NOTES ON THE DESIGN
 * (1) A point is not a row.  Each flush writes, per series that got points,
 *     one metric_chunks row (series_id, first, count, data): `first` is the
 *     index of its first point in the series, `data` the points packed as
 *     below.  A row per point costs ~2 us in SQLite; a chunk costs next to
 *     nothing per point, which is what lets the supervisor keep up with a
 *     worker printing as fast as it can.
 * (2) Chunk format, version 1: one byte 0x01, then per point
 *       u8 flags (kind in bits 0-1; bit 2: text follows)
 *       varint zigzag seq, epoch, iter
 *       f64 LE value, f64 LE wall_time
 *       step, NUL-terminated; text, NUL-terminated (when bit 2)
 *     Strings end in NUL so that the points read back can point into the
 *     blob.  Readers reject a blob that runs short or has another version.
 * (3) A batch keeps every series it has seen (a hash by rank and metric), so
 *     the series row is looked up once per job, and a failed write keeps the
 *     queued points for the next try: nothing is marked written before COMMIT.
 */
#include "store/store.h"
#include "store/store_int.h"
#include "core/enc.h"
#include "core/sbuf.h"
#include "core/xalloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_VERSION 1

struct series {
	char *metric;
	int rank;
	unsigned hash;
	long long id;       /* 0 until its row is known */
	long long stored;   /* points already in the database */
	long long new_id, new_stored; /* during a write, applied on COMMIT */
	struct sbuf chunk;  /* packed points not yet written */
	size_t n;
};

struct kv {
	int rank;
	char *name, *key, *value;
};

struct count {
	int rank;
	long long lines, records, malformed;
	char *last_error;
};

struct store_mbatch {
	char *job;
	struct series **tab; /* open addressing, cap a power of two */
	size_t cap, count;
	struct series **list; /* in order of first sight */
	size_t nlist, alist;
	struct series *last;  /* the series of the previous point */
	size_t pending, bytes;
	struct kv *params, *meta;
	size_t nparams, aparams, nmeta, ameta;
	struct count *counts;
	size_t ncounts, acounts;
};

static unsigned hash_key(int rank, const char *metric)
{
	unsigned h = 2166136261u ^ (unsigned)rank;
	for (const unsigned char *p = (const unsigned char *)metric; *p; p++)
		h = (h ^ *p) * 16777619u;
	return h;
}

struct store_mbatch *store_mbatch_new(const char *job_id)
{
	struct store_mbatch *b = xcalloc(1, sizeof(*b));
	b->job = xstrdup(job_id);
	b->cap = 64;
	b->tab = xcalloc(b->cap, sizeof(*b->tab));
	return b;
}

static void kv_clear(struct kv *v, size_t *n)
{
	for (size_t i = 0; i < *n; i++) {
		free(v[i].name);
		free(v[i].key);
		free(v[i].value);
	}
	*n = 0;
}

static void counts_clear(struct store_mbatch *b)
{
	for (size_t i = 0; i < b->ncounts; i++)
		free(b->counts[i].last_error);
	b->ncounts = 0;
}

void store_mbatch_free(struct store_mbatch *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->nlist; i++) {
		free(b->list[i]->metric);
		sbuf_release(&b->list[i]->chunk);
		free(b->list[i]);
	}
	kv_clear(b->params, &b->nparams);
	kv_clear(b->meta, &b->nmeta);
	counts_clear(b);
	free(b->params);
	free(b->meta);
	free(b->counts);
	free(b->list);
	free(b->tab);
	free(b->job);
	free(b);
}

static void tab_insert(struct series **tab, size_t cap, struct series *s)
{
	size_t i = s->hash & (cap - 1);
	while (tab[i])
		i = (i + 1) & (cap - 1);
	tab[i] = s;
}

static struct series *series_get(struct store_mbatch *b, int rank, const char *metric)
{
	if (b->last && b->last->rank == rank && !strcmp(b->last->metric, metric))
		return b->last;
	unsigned h = hash_key(rank, metric);
	size_t i = h & (b->cap - 1);
	for (struct series *s; (s = b->tab[i]); i = (i + 1) & (b->cap - 1))
		if (s->hash == h && s->rank == rank && !strcmp(s->metric, metric))
			return b->last = s;
	struct series *s = xcalloc(1, sizeof(*s));
	s->metric = xstrdup(metric);
	s->rank = rank;
	s->hash = h;
	sbuf_init(&s->chunk, 0);
	if ((b->count + 1) * 2 > b->cap) {
		size_t cap = b->cap * 2;
		struct series **tab = xcalloc(cap, sizeof(*tab));
		for (size_t k = 0; k < b->nlist; k++)
			tab_insert(tab, cap, b->list[k]);
		free(b->tab);
		b->tab = tab;
		b->cap = cap;
	}
	tab_insert(b->tab, b->cap, s);
	b->count++;
	XGROW(b->list, b->nlist + 1, b->alist);
	b->list[b->nlist++] = s;
	return b->last = s;
}

/* zigzag varint into out (VARINT_MAX bytes at most); returns the bytes written */
static size_t put_varint(unsigned char *out, long long v)
{
	return varint_put(out, ((unsigned long long)v << 1) ^ (unsigned long long)(v >> 63));
}

static size_t put_f64(unsigned char *out, double d)
{
	unsigned long long u;
	memcpy(&u, &d, sizeof(u));
	for (int i = 0; i < 8; i++)
		out[i] = (unsigned char)(u >> (8 * i));
	return 8;
}

void store_mbatch_point(struct store_mbatch *b, int rank, const char *metric,
			const struct store_mpoint *p)
{
	struct series *s = series_get(b, rank, metric);
	size_t before = s->chunk.len;
	/* the fixed part in one append: version, flags, 3 varints, 2 doubles */
	unsigned char fx[2 + 3 * 10 + 16];
	size_t n = 0;
	if (!s->chunk.len)
		fx[n++] = CHUNK_VERSION;
	fx[n++] = (unsigned char)((p->kind & 3) | (p->text ? 4 : 0));
	n += put_varint(fx + n, p->seq);
	n += put_varint(fx + n, p->epoch);
	n += put_varint(fx + n, p->iter);
	n += put_f64(fx + n, p->text ? NAN : p->value);
	n += put_f64(fx + n, p->wall_time);
	sbuf_add(&s->chunk, fx, n);
	sbuf_add(&s->chunk, p->step, strlen(p->step) + 1);
	if (p->text)
		sbuf_add(&s->chunk, p->text, strlen(p->text) + 1);
	s->n++;
	b->pending++;
	b->bytes += s->chunk.len - before;
}

static void kv_add(struct kv **v, size_t *n, size_t *alloc, int rank, const char *name,
		   const char *key, const char *value)
{
	/* a later value of the same key replaces the queued one */
	for (size_t i = 0; i < *n; i++)
		if ((*v)[i].rank == rank && !strcmp((*v)[i].name, name) &&
		    (!key || !strcmp((*v)[i].key, key))) {
			free((*v)[i].value);
			(*v)[i].value = value ? xstrdup(value) : NULL;
			return;
		}
	XGROW(*v, *n + 1, *alloc);
	(*v)[*n] = (struct kv){ rank, xstrdup(name), key ? xstrdup(key) : NULL,
				value ? xstrdup(value) : NULL };
	(*n)++;
}

void store_mbatch_param(struct store_mbatch *b, int rank, const char *name, const char *value)
{
	kv_add(&b->params, &b->nparams, &b->aparams, rank, name, NULL, value);
}

void store_mbatch_meta(struct store_mbatch *b, const char *metric, const char *key,
		       const char *value)
{
	kv_add(&b->meta, &b->nmeta, &b->ameta, -1, metric, key, value);
}

void store_mbatch_counters(struct store_mbatch *b, int rank, long long lines, long long records,
			   long long malformed, const char *last_error)
{
	struct count *c = NULL;
	for (size_t i = 0; i < b->ncounts; i++)
		if (b->counts[i].rank == rank)
			c = &b->counts[i];
	if (!c) {
		XGROW(b->counts, b->ncounts + 1, b->acounts);
		c = &b->counts[b->ncounts++];
		memset(c, 0, sizeof(*c));
		c->rank = rank;
	}
	c->lines = lines;
	c->records = records;
	c->malformed = malformed;
	free(c->last_error);
	c->last_error = last_error ? xstrdup(last_error) : NULL;
}

size_t store_mbatch_pending(const struct store_mbatch *b)
{
	return b->pending;
}

size_t store_mbatch_bytes(const struct store_mbatch *b)
{
	return b->bytes;
}

void store_mbatch_drop(struct store_mbatch *b)
{
	for (size_t i = 0; i < b->nlist; i++) {
		sbuf_reset(&b->list[i]->chunk);
		b->list[i]->n = 0;
	}
	kv_clear(b->params, &b->nparams);
	kv_clear(b->meta, &b->nmeta);
	counts_clear(b);
	b->pending = b->bytes = 0;
}

/* ---- writing ---- */

static int prep(struct store *st, const char *sql, sqlite3_stmt **q, struct tc_err *err)
{
	if (sqlite3_prepare_v2(st->db, sql, -1, q, NULL) != SQLITE_OK)
		return db_fail(st, err, "prepare");
	return 0;
}

static int step_done(struct store *st, sqlite3_stmt *q, struct tc_err *err)
{
	int r = sqlite3_step(q);
	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	if (r != SQLITE_DONE && r != SQLITE_ROW)
		return db_fail(st, err, "write metrics");
	return 0;
}

static void bind_text(sqlite3_stmt *q, int i, const char *s)
{
	if (s)
		sqlite3_bind_text(q, i, s, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(q, i);
}

/* The id and point count of a series the database may already hold. */
static int series_row(struct store *st, struct store_mbatch *b, struct series *s,
		      sqlite3_stmt *ins, sqlite3_stmt *sel, struct tc_err *err)
{
	int rc;
	bind_text(ins, 1, b->job);
	bind_text(ins, 2, s->metric);
	sqlite3_bind_int(ins, 3, s->rank);
	if ((rc = step_done(st, ins, err)))
		return rc;
	bind_text(sel, 1, b->job);
	bind_text(sel, 2, s->metric);
	sqlite3_bind_int(sel, 3, s->rank);
	int r = sqlite3_step(sel);
	if (r == SQLITE_ROW) {
		s->new_id = sqlite3_column_int64(sel, 0);
		s->new_stored = sqlite3_column_int64(sel, 1);
	}
	sqlite3_reset(sel);
	sqlite3_clear_bindings(sel);
	if (r != SQLITE_ROW)
		return db_fail(st, err, "find metric series");
	return 0;
}

int store_mbatch_write(struct store *st, struct store_mbatch *b, struct tc_err *err)
{
	sqlite3_stmt *ins_s = NULL, *sel_s = NULL, *ins_c = NULL, *ins_p = NULL, *ins_m = NULL,
		     *ins_n = NULL;
	int rc;
	if (!b->pending && !b->nparams && !b->nmeta && !b->ncounts)
		return 0;
	if (sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return db_fail(st, err, "begin");
	if ((rc = prep(st, "INSERT OR IGNORE INTO metric_series (job_id, metric, rank) VALUES (?,?,?)",
		       &ins_s, err)) ||
	    (rc = prep(st, "SELECT s.id, COALESCE((SELECT MAX(first + count) FROM metric_chunks"
			   " WHERE series_id = s.id), 0) FROM metric_series s"
			   " WHERE job_id=? AND metric=? AND rank=?", &sel_s, err)) ||
	    (rc = prep(st, "INSERT INTO metric_chunks (series_id, first, count, data) VALUES (?,?,?,?)",
		       &ins_c, err)) ||
	    (rc = prep(st, "INSERT OR REPLACE INTO metric_params (job_id, rank, name, value)"
			   " VALUES (?,?,?,?)", &ins_p, err)) ||
	    (rc = prep(st, "INSERT OR REPLACE INTO metric_meta (job_id, metric, key, value)"
			   " VALUES (?,?,?,?)", &ins_m, err)) ||
	    (rc = prep(st, "INSERT OR REPLACE INTO metric_counters (job_id, rank, lines, records,"
			   " malformed, last_error) VALUES (?,?,?,?,?,?)", &ins_n, err)))
		goto out;
	for (size_t i = 0; i < b->nlist; i++) {
		struct series *s = b->list[i];
		if (!s->n)
			continue;
		s->new_id = s->id;
		s->new_stored = s->stored;
		if (!s->id && (rc = series_row(st, b, s, ins_s, sel_s, err)))
			goto out;
		sqlite3_bind_int64(ins_c, 1, s->new_id);
		sqlite3_bind_int64(ins_c, 2, s->new_stored);
		sqlite3_bind_int64(ins_c, 3, (long long)s->n);
		sqlite3_bind_blob(ins_c, 4, s->chunk.buf, (int)s->chunk.len, SQLITE_STATIC);
		if ((rc = step_done(st, ins_c, err)))
			goto out;
	}
	for (size_t i = 0; i < b->nparams; i++) {
		bind_text(ins_p, 1, b->job);
		sqlite3_bind_int(ins_p, 2, b->params[i].rank);
		bind_text(ins_p, 3, b->params[i].name);
		bind_text(ins_p, 4, b->params[i].value);
		if ((rc = step_done(st, ins_p, err)))
			goto out;
	}
	for (size_t i = 0; i < b->nmeta; i++) {
		bind_text(ins_m, 1, b->job);
		bind_text(ins_m, 2, b->meta[i].name);
		bind_text(ins_m, 3, b->meta[i].key);
		bind_text(ins_m, 4, b->meta[i].value);
		if ((rc = step_done(st, ins_m, err)))
			goto out;
	}
	for (size_t i = 0; i < b->ncounts; i++) {
		struct count *c = &b->counts[i];
		bind_text(ins_n, 1, b->job);
		sqlite3_bind_int(ins_n, 2, c->rank);
		sqlite3_bind_int64(ins_n, 3, c->lines);
		sqlite3_bind_int64(ins_n, 4, c->records);
		sqlite3_bind_int64(ins_n, 5, c->malformed);
		bind_text(ins_n, 6, c->last_error);
		if ((rc = step_done(st, ins_n, err)))
			goto out;
	}
	if (sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		rc = db_fail(st, err, "commit metrics");
		goto out;
	}
	/* written: only now does the batch forget it */
	for (size_t i = 0; i < b->nlist; i++) {
		struct series *s = b->list[i];
		if (!s->n)
			continue;
		s->id = s->new_id;
		s->stored = s->new_stored + (long long)s->n;
		s->n = 0;
		/* keep the buffer: regrowing it page by page costs more than it holds */
		sbuf_reset(&s->chunk);
		if (s->chunk.alloc > (16u << 20))
			sbuf_release(&s->chunk);
	}
	kv_clear(b->params, &b->nparams);
	kv_clear(b->meta, &b->nmeta);
	counts_clear(b);
	b->pending = b->bytes = 0;
out:
	if (rc)
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_finalize(ins_s);
	sqlite3_finalize(sel_s);
	sqlite3_finalize(ins_c);
	sqlite3_finalize(ins_p);
	sqlite3_finalize(ins_m);
	sqlite3_finalize(ins_n);
	return rc;
}

/* ---- reading ---- */

static bool get_varint(const unsigned char **p, const unsigned char *end, long long *out)
{
	unsigned long long u = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (*p >= end)
			return false;
		unsigned char c = *(*p)++;
		u |= (unsigned long long)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*out = (long long)(u >> 1) ^ -(long long)(u & 1);
			return true;
		}
	}
	return false;
}

static bool get_f64(const unsigned char **p, const unsigned char *end, double *out)
{
	if (end - *p < 8)
		return false;
	unsigned long long u = 0;
	for (int i = 0; i < 8; i++)
		u |= (unsigned long long)(*p)[i] << (8 * i);
	memcpy(out, &u, sizeof(*out));
	*p += 8;
	return true;
}

static bool get_str(const unsigned char **p, const unsigned char *end, const char **out)
{
	const unsigned char *nul = memchr(*p, 0, (size_t)(end - *p));
	if (!nul)
		return false;
	*out = (const char *)*p;
	*p = nul + 1;
	return true;
}

/* Append the points of one chunk to s; the blob becomes the series'. */
static bool decode_chunk(struct store_mseries *s, size_t *alloc, char *blob, size_t len,
			 size_t *ablobs)
{
	const unsigned char *p = (const unsigned char *)blob, *end = p + len;
	XGROW(s->blobs, s->nblobs + 1, *ablobs);
	s->blobs[s->nblobs++] = blob;
	if (p >= end || *p++ != CHUNK_VERSION)
		return false;
	while (p < end) {
		struct store_mpoint pt = { 0 };
		unsigned char flags = *p++;
		pt.kind = flags & 3;
		if (!get_varint(&p, end, &pt.seq) || !get_varint(&p, end, &pt.epoch) ||
		    !get_varint(&p, end, &pt.iter) || !get_f64(&p, end, &pt.value) ||
		    !get_f64(&p, end, &pt.wall_time) || !get_str(&p, end, &pt.step) ||
		    ((flags & 4) && !get_str(&p, end, &pt.text)))
			return false;
		XGROW(s->v, s->n + 1, *alloc);
		s->v[s->n++] = pt;
	}
	return true;
}

int store_metric_series(struct store *st, const char *job, const char *metric, int rank,
			struct store_mseries **out, size_t *nr, struct tc_err *err)
{
	sqlite3_stmt *q;
	size_t alloc = 0, palloc = 0, balloc = 0;
	int rc = 0, r;
	*out = NULL;
	*nr = 0;
	if ((rc = prep(st, "SELECT s.metric, s.rank, c.data FROM metric_series s"
			   " JOIN metric_chunks c ON c.series_id = s.id"
			   " WHERE s.job_id = ?1 AND (?2 IS NULL OR s.metric = ?2)"
			   " AND (?3 < 0 OR s.rank = ?3) ORDER BY s.metric, s.rank, c.first",
		       &q, err)))
		return rc;
	bind_text(q, 1, job);
	bind_text(q, 2, metric);
	sqlite3_bind_int(q, 3, rank);
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		const char *m = (const char *)sqlite3_column_text(q, 0);
		int rk = sqlite3_column_int(q, 1);
		struct store_mseries *s = *nr ? &(*out)[*nr - 1] : NULL;
		if (!s || s->rank != rk || strcmp(s->metric, m ? m : "")) {
			XGROW(*out, *nr + 1, alloc);
			s = &(*out)[(*nr)++];
			memset(s, 0, sizeof(*s));
			s->metric = xstrdup(m ? m : "");
			s->rank = rk;
			palloc = balloc = 0;
		}
		size_t len = (size_t)sqlite3_column_bytes(q, 2);
		char *blob = xmalloc(len + 1);
		if (len)
			memcpy(blob, sqlite3_column_blob(q, 2), len);
		if (!decode_chunk(s, &palloc, blob, len, &balloc)) {
			rc = tc_error(err, TC_ESTORE, "database: damaged metrics chunk of '%s' rank %d",
				      s->metric, s->rank);
			break;
		}
	}
	if (!rc && r != SQLITE_DONE)
		rc = db_fail(st, err, "read metrics");
	sqlite3_finalize(q);
	if (rc) {
		store_mseries_free(*out, *nr);
		*out = NULL;
		*nr = 0;
	}
	return rc;
}

static bool skip_varint(const unsigned char **p, const unsigned char *end)
{
	for (int i = 0; i < 10 && *p < end; i++)
		if (!(*(*p)++ & 0x80))
			return true;
	return false;
}

/* Hand the points of one chunk that store_metric_xy keeps to the sink. */
static bool decode_xy(const struct store_xy_sink *sink, const unsigned char *p, size_t len,
		      double xmin, double xmax)
{
	if (!p || !len)
		return false;
	const unsigned char *end = p + len;
	if (*p++ != CHUNK_VERSION)
		return false;
	while (p < end) {
		unsigned char flags = *p++;
		long long seq;
		double value;
		const char *step, *text = NULL;
		/* epoch and iter are skipped undecoded, the wall time too */
		if (!get_varint(&p, end, &seq) || !skip_varint(&p, end) || !skip_varint(&p, end) ||
		    !get_f64(&p, end, &value) || end - p < 8)
			return false;
		p += 8;
		if (!get_str(&p, end, &step) || ((flags & 4) && !get_str(&p, end, &text)))
			return false;
		double x = (double)seq;
		if ((flags & 3) == STORE_MPOINT && !text && isfinite(value) && x >= xmin && x <= xmax)
			sink->add(sink->arg, x, value);
	}
	return true;
}

int store_metric_xy(struct store *st, const char *job, const char *metric, int rank, double xmin,
		    double xmax, const struct store_xy_sink *sink, struct tc_err *err)
{
	sqlite3_stmt *q;
	int rc = 0, r, cur = -1;
	bool any = false;
	if ((rc = prep(st, "SELECT s.rank, c.data FROM metric_series s"
			   " JOIN metric_chunks c ON c.series_id = s.id"
			   " WHERE s.job_id = ?1 AND s.metric = ?2 AND (?3 < 0 OR s.rank = ?3)"
			   " ORDER BY s.rank, c.first",
		       &q, err)))
		return rc;
	bind_text(q, 1, job);
	bind_text(q, 2, metric);
	sqlite3_bind_int(q, 3, rank);
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		int rk = sqlite3_column_int(q, 0);
		if (!any || rk != cur) {
			sink->begin(sink->arg, rk);
			cur = rk;
			any = true;
		}
		/* the blob is read in place: it stays valid until the next step */
		const unsigned char *blob = sqlite3_column_blob(q, 1);
		size_t len = (size_t)sqlite3_column_bytes(q, 1);
		if (!decode_xy(sink, blob, len, xmin, xmax)) {
			rc = tc_error(err, TC_ESTORE, "database: damaged metrics chunk of '%s' rank %d",
				      metric, rk);
			break;
		}
	}
	if (!rc && r != SQLITE_DONE)
		rc = db_fail(st, err, "read metrics");
	sqlite3_finalize(q);
	return rc;
}

void store_mseries_free(struct store_mseries *v, size_t nr)
{
	for (size_t i = 0; i < nr; i++) {
		free(v[i].metric);
		free(v[i].v);
		for (size_t k = 0; k < v[i].nblobs; k++)
			free(v[i].blobs[k]);
		free(v[i].blobs);
	}
	free(v);
}

static char *col_dup(sqlite3_stmt *q, int i)
{
	const unsigned char *t = sqlite3_column_text(q, i);
	return t ? xstrdup((const char *)t) : NULL;
}

static int read_kv(struct store *st, const char *sql, const char *job, bool meta,
		   struct store_mkv **out, size_t *nr, struct tc_err *err)
{
	sqlite3_stmt *q;
	size_t alloc = 0;
	int r, rc;
	*out = NULL;
	*nr = 0;
	if ((rc = prep(st, sql, &q, err)))
		return rc;
	bind_text(q, 1, job);
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		XGROW(*out, *nr + 1, alloc);
		struct store_mkv *v = &(*out)[(*nr)++];
		v->rank = meta ? -1 : sqlite3_column_int(q, 0);
		v->name = col_dup(q, 1);
		v->key = meta ? col_dup(q, 0) : NULL;
		v->value = col_dup(q, 2);
	}
	sqlite3_finalize(q);
	if (r != SQLITE_DONE) {
		store_mkv_free(*out, *nr);
		*out = NULL;
		*nr = 0;
		return db_fail(st, err, "read metrics");
	}
	return 0;
}

int store_metric_params(struct store *st, const char *job, struct store_mkv **out, size_t *nr,
			struct tc_err *err)
{
	return read_kv(st, "SELECT rank, name, value FROM metric_params WHERE job_id=?"
		       " ORDER BY rank, name", job, false, out, nr, err);
}

int store_metric_meta(struct store *st, const char *job, struct store_mkv **out, size_t *nr,
		      struct tc_err *err)
{
	return read_kv(st, "SELECT key, metric, value FROM metric_meta WHERE job_id=?"
		       " ORDER BY metric, key", job, true, out, nr, err);
}

void store_mkv_free(struct store_mkv *v, size_t nr)
{
	for (size_t i = 0; i < nr; i++) {
		free(v[i].name);
		free(v[i].key);
		free(v[i].value);
	}
	free(v);
}

int store_metric_counters(struct store *st, const char *job, struct store_mcount **out,
			  size_t *nr, struct tc_err *err)
{
	sqlite3_stmt *q;
	size_t alloc = 0;
	int r, rc;
	*out = NULL;
	*nr = 0;
	if ((rc = prep(st, "SELECT rank, lines, records, malformed, last_error FROM metric_counters"
			   " WHERE job_id=? ORDER BY rank", &q, err)))
		return rc;
	bind_text(q, 1, job);
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		XGROW(*out, *nr + 1, alloc);
		struct store_mcount *c = &(*out)[(*nr)++];
		c->rank = sqlite3_column_int(q, 0);
		c->lines = sqlite3_column_int64(q, 1);
		c->records = sqlite3_column_int64(q, 2);
		c->malformed = sqlite3_column_int64(q, 3);
		c->last_error = col_dup(q, 4);
	}
	sqlite3_finalize(q);
	if (r != SQLITE_DONE) {
		store_mcount_free(*out, *nr);
		*out = NULL;
		*nr = 0;
		return db_fail(st, err, "read metrics");
	}
	return 0;
}

void store_mcount_free(struct store_mcount *v, size_t nr)
{
	for (size_t i = 0; i < nr; i++)
		free(v[i].last_error);
	free(v);
}
