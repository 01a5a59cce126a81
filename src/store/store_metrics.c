/*
 * store_metrics.c -- metrics tables: batched writing, and a batch packed for
 * the hub (store_metrics.h); reading back is store_metrics_read.c.
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
 * (4) Summaries are kept as points are queued and written in the same
 *     transaction as their chunks, so that a job's summary (query.h) reads a
 *     few rows however long its series are:
 *       metric_summary      per series and kind: points (text ones too),
 *                           numbers, finite ones and their sum, positive
 *                           ones and their sum, min and max with the step
 *                           of their first occurrence, the last number with
 *                           its step and index in the series, the last text;
 *       metric_rank_steps   per rank: distinct seq values of its point
 *                           records, the newest seq and the latest wall time
 *                           of its records, and whether seq never went back.
 *     A reader checks a summary against the chunks (the points it counts
 *     must be the points stored) and reads the points themselves when it
 *     does not hold: jobs stored before summaries existed, or points a
 *     batch dropped.  A batch that finds a series already stored (another
 *     supervisor of the same job) adds to its summary row; a rank already
 *     stored is marked unordered (its seq counts start again).
 */
#include "store/store.h"
#include "store/store_int.h"
#include "store/store_metrics_int.h"
#include "core/enc.h"
#include "core/sbuf.h"
#include "core/xalloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * The running summary of one kind of a series (note 4).  A step or text
 * is either in the pending chunk (*_at >= 0, an offset into it) or a heap
 * copy (*_at < 0; NULL when none).
 */
struct ksum {
	long long points, n, n_finite, n_pos, last_index;
	double sum, sum_pos, min, max, last;
	long long min_at, max_at, last_at, text_at;
	char *min_step, *max_step, *last_step, *last_text;
};

struct series {
	char *metric;
	int rank;
	unsigned hash;
	long long id;       /* 0 until its row is known */
	long long stored;   /* points already in the database */
	long long new_id, new_stored; /* during a write, applied on COMMIT */
	struct sbuf chunk;  /* packed points not yet written */
	size_t n;
	struct ksum k[3];   /* by kind (enum store_mkind) */
	bool merged;        /* what the database held before this batch is in k[] */
};

/* Per rank, the distinct seq values of its point records (note 4). */
struct rsteps {
	int rank;
	bool any, ordered, merged, dirty;
	long long nseq, last_seq;
	double last_t;
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
	struct rsteps *steps;
	size_t nsteps, asteps;
	struct rsteps *last_steps; /* the rank of the previous point */
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

static void ksum_release(struct ksum *k)
{
	free(k->min_step);
	free(k->max_step);
	free(k->last_step);
	free(k->last_text);
}

void store_mbatch_free(struct store_mbatch *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->nlist; i++) {
		free(b->list[i]->metric);
		sbuf_release(&b->list[i]->chunk);
		for (int k = 0; k < 3; k++)
			ksum_release(&b->list[i]->k[k]);
		free(b->list[i]);
	}
	free(b->steps);
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
	for (int k = 0; k < 3; k++) {
		s->k[k].min = s->k[k].max = s->k[k].last = NAN;
		s->k[k].min_at = s->k[k].max_at = s->k[k].last_at = s->k[k].text_at = -1;
	}
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

static struct rsteps *steps_get(struct store_mbatch *b, int rank)
{
	if (b->last_steps && b->last_steps->rank == rank)
		return b->last_steps;
	for (size_t i = 0; i < b->nsteps; i++)
		if (b->steps[i].rank == rank)
			return b->last_steps = &b->steps[i];
	XGROW(b->steps, b->nsteps + 1, b->asteps);
	struct rsteps *r = &b->steps[b->nsteps++];
	*r = (struct rsteps){ .rank = rank, .ordered = true };
	return b->last_steps = r;
}

/* Count p (its step at offset step_at of the chunk, its text at text_at) in s's summary. */
static void summarize(struct store_mbatch *b, struct series *s, const struct store_mpoint *p,
		      long long step_at, long long text_at)
{
	struct ksum *k = &s->k[p->kind >= 0 && p->kind < 3 ? p->kind : STORE_MPOINT];
	k->points++;
	if (p->kind == STORE_MPOINT) {
		struct rsteps *r = steps_get(b, s->rank);
		r->dirty = true;
		if (!r->any || p->seq > r->last_seq) {
			r->nseq++;
			r->last_seq = p->seq;
			r->last_t = p->wall_time;
			r->any = true;
		} else if (p->seq == r->last_seq) {
			if (p->wall_time > r->last_t)
				r->last_t = p->wall_time;
		} else {
			r->ordered = false;
		}
	}
	if (p->text) {
		k->text_at = text_at;
		return;
	}
	double v = p->value;
	k->n++;
	k->last = v;
	k->last_at = step_at;
	k->last_index = s->stored + (long long)s->n;
	if (!isfinite(v))
		return;
	/* strict: the first of equal values keeps its step, as metrics_stat_add's best */
	if (!k->n_finite++ || v < k->min) {
		k->min = v;
		k->min_at = step_at;
	}
	if (k->n_finite == 1 || v > k->max) {
		k->max = v;
		k->max_at = step_at;
	}
	k->sum += v;
	if (v > 0) {
		k->n_pos++;
		k->sum_pos += v;
	}
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
	long long step_at = (long long)s->chunk.len, text_at = -1;
	sbuf_add(&s->chunk, p->step, strlen(p->step) + 1);
	if (p->text) {
		text_at = (long long)s->chunk.len;
		sbuf_add(&s->chunk, p->text, strlen(p->text) + 1);
	}
	summarize(b, s, p, step_at, text_at);
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

const char *store_mbatch_job(const struct store_mbatch *b)
{
	return b->job;
}

/* Where a step or text of the summary is: the pending chunk, or its own copy. */
static const char *at_str(const struct series *s, long long at, const char *copy)
{
	return at >= 0 ? s->chunk.buf + at : copy;
}

static void settle_one(const struct series *s, long long *at, char **copy)
{
	if (*at < 0)
		return;
	free(*copy);
	*copy = xstrdup(s->chunk.buf + *at);
	*at = -1;
}

/* The pending chunk is about to go: the summary keeps copies of what it points at. */
static void settle(struct series *s)
{
	for (int i = 0; i < 3; i++) {
		struct ksum *k = &s->k[i];
		settle_one(s, &k->min_at, &k->min_step);
		settle_one(s, &k->max_at, &k->max_step);
		settle_one(s, &k->last_at, &k->last_step);
		settle_one(s, &k->text_at, &k->last_text);
	}
}

void store_mbatch_drop(struct store_mbatch *b)
{
	for (size_t i = 0; i < b->nlist; i++) {
		/* the summary still counts them: readers see it disagree with the chunks */
		settle(b->list[i]);
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

static void bind_num(sqlite3_stmt *q, int i, double v)
{
	if (isnan(v))
		sqlite3_bind_null(q, i);
	else
		sqlite3_bind_double(q, i, v);
}

/* Fold in the summary rows of a series the database held before this batch (note 4). */
static int merge_stored(struct store *st, struct series *s, struct tc_err *err)
{
	sqlite3_stmt *q;
	if (s->merged)
		return 0;
	if (!s->new_stored) {
		s->merged = true; /* what later writes find is this batch's own */
		return 0;
	}
	int r = prep_stmt(st, &q, err, "SELECT " SUMMARY_COLS " FROM metric_summary WHERE series_id = ?",
			  "i", s->new_id);
	if (r)
		return r;
	for (int i = 0; i < 3; i++)
		if (s->k[i].n)
			s->k[i].last_index += s->new_stored; /* counted from this batch's start */
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		int kind = sqlite3_column_int(q, 0);
		if (kind < 0 || kind > 2)
			continue;
		struct ksum *k = &s->k[kind];
		long long dn_finite = sqlite3_column_int64(q, 3);
		double dmin = col_num(q, 7), dmax = col_num(q, 9);
		k->points += sqlite3_column_int64(q, 1);
		if (dn_finite && (!k->n_finite || dmin <= k->min)) {
			k->min = dmin;
			k->min_at = -1;
			free(k->min_step);
			k->min_step = col_dup(q, 8);
		}
		if (dn_finite && (!k->n_finite || dmax >= k->max)) {
			k->max = dmax;
			k->max_at = -1;
			free(k->max_step);
			k->max_step = col_dup(q, 10);
		}
		if (!k->n && sqlite3_column_int64(q, 2)) {
			k->last = col_num(q, 11);
			k->last_at = -1;
			free(k->last_step);
			k->last_step = col_dup(q, 12);
			k->last_index = sqlite3_column_int64(q, 13);
		}
		if (k->text_at < 0 && !k->last_text)
			k->last_text = col_dup(q, 14);
		k->n += sqlite3_column_int64(q, 2);
		k->n_finite += dn_finite;
		k->sum += sqlite3_column_double(q, 4);
		k->n_pos += sqlite3_column_int64(q, 5);
		k->sum_pos += sqlite3_column_double(q, 6);
	}
	sqlite3_finalize(q);
	if (r != SQLITE_DONE)
		return db_fail(st, err, "read metric summary");
	s->merged = true;
	return 0;
}

static int write_summary(struct store *st, struct series *s, sqlite3_stmt *q, struct tc_err *err)
{
	for (int i = 0; i < 3; i++) {
		const struct ksum *k = &s->k[i];
		if (!k->points)
			continue;
		sqlite3_bind_int64(q, 1, s->new_id);
		sqlite3_bind_int(q, 2, i);
		sqlite3_bind_int64(q, 3, k->points);
		sqlite3_bind_int64(q, 4, k->n);
		sqlite3_bind_int64(q, 5, k->n_finite);
		sqlite3_bind_double(q, 6, k->sum);
		sqlite3_bind_int64(q, 7, k->n_pos);
		sqlite3_bind_double(q, 8, k->sum_pos);
		bind_num(q, 9, k->n_finite ? k->min : NAN);
		bind_text(q, 10, at_str(s, k->min_at, k->min_step));
		bind_num(q, 11, k->n_finite ? k->max : NAN);
		bind_text(q, 12, at_str(s, k->max_at, k->max_step));
		bind_num(q, 13, k->n ? k->last : NAN);
		bind_text(q, 14, at_str(s, k->last_at, k->last_step));
		sqlite3_bind_int64(q, 15, k->last_index);
		bind_text(q, 16, at_str(s, k->text_at, k->last_text));
		int rc = step_done(st, q, err);
		if (rc)
			return rc;
	}
	return 0;
}

/* A rank's steps row; one the database held before this batch makes it unordered. */
static int write_steps(struct store *st, struct store_mbatch *b, struct rsteps *r,
		       sqlite3_stmt *sel, sqlite3_stmt *ins, struct tc_err *err)
{
	if (!r->merged) {
		bind_text(sel, 1, b->job);
		sqlite3_bind_int(sel, 2, r->rank);
		int x = sqlite3_step(sel);
		sqlite3_reset(sel);
		sqlite3_clear_bindings(sel);
		if (x != SQLITE_ROW && x != SQLITE_DONE)
			return db_fail(st, err, "read metric steps");
		if (x == SQLITE_ROW)
			r->ordered = false;
		r->merged = true;
	}
	bind_text(ins, 1, b->job);
	sqlite3_bind_int(ins, 2, r->rank);
	sqlite3_bind_int64(ins, 3, r->nseq);
	sqlite3_bind_int64(ins, 4, r->last_seq);
	bind_num(ins, 5, r->last_t);
	sqlite3_bind_int(ins, 6, r->ordered);
	return step_done(st, ins, err);
}

/* What was written (or packed for the hub) leaves the batch; the summaries stay. */
static void forget_written(struct store_mbatch *b)
{
	for (size_t i = 0; i < b->nlist; i++) {
		struct series *s = b->list[i];
		if (!s->n)
			continue;
		s->id = s->new_id;
		s->stored = s->new_stored + (long long)s->n;
		s->n = 0;
		settle(s);
		/* keep the buffer: regrowing it page by page costs more than it holds */
		sbuf_reset(&s->chunk);
		if (s->chunk.alloc > (16u << 20))
			sbuf_release(&s->chunk);
	}
	kv_clear(b->params, &b->nparams);
	kv_clear(b->meta, &b->nmeta);
	counts_clear(b);
	for (size_t i = 0; i < b->nsteps; i++)
		b->steps[i].dirty = false;
	b->pending = b->bytes = 0;
}

int store_mbatch_write(struct store *st, struct store_mbatch *b, struct tc_err *err)
{
	sqlite3_stmt *ins_s = NULL, *sel_s = NULL, *ins_c = NULL, *ins_p = NULL, *ins_m = NULL,
		     *ins_n = NULL, *ins_sum = NULL, *sel_r = NULL, *ins_r = NULL;
	int rc;
	if (!b->pending && !b->nparams && !b->nmeta && !b->ncounts)
		return 0;
	/* inside a caller's transaction (the hub: events and their ack) it joins it */
	bool own = sqlite3_get_autocommit(st->db) != 0;
	if (own && sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
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
			   " malformed, last_error) VALUES (?,?,?,?,?,?)", &ins_n, err)) ||
	    (rc = prep(st, "INSERT OR REPLACE INTO metric_summary (series_id, " SUMMARY_COLS ")"
			   " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", &ins_sum, err)) ||
	    (rc = prep(st, "SELECT 1 FROM metric_rank_steps WHERE job_id=? AND rank=?", &sel_r,
		       err)) ||
	    (rc = prep(st, "INSERT OR REPLACE INTO metric_rank_steps (job_id, rank, nseq, last_seq,"
			   " last_t, ordered) VALUES (?,?,?,?,?,?)", &ins_r, err)))
		goto out;
	for (size_t i = 0; i < b->nlist; i++) {
		struct series *s = b->list[i];
		if (!s->n)
			continue;
		s->new_id = s->id;
		s->new_stored = s->stored;
		if (!s->id && (rc = series_row(st, b, s, ins_s, sel_s, err)))
			goto out;
		if ((rc = merge_stored(st, s, err)))
			goto out;
		sqlite3_bind_int64(ins_c, 1, s->new_id);
		sqlite3_bind_int64(ins_c, 2, s->new_stored);
		sqlite3_bind_int64(ins_c, 3, (long long)s->n);
		sqlite3_bind_blob(ins_c, 4, s->chunk.buf, (int)s->chunk.len, SQLITE_STATIC);
		if ((rc = step_done(st, ins_c, err)) || (rc = write_summary(st, s, ins_sum, err)))
			goto out;
	}
	for (size_t i = 0; i < b->nsteps; i++)
		if (b->steps[i].dirty && (rc = write_steps(st, b, &b->steps[i], sel_r, ins_r, err)))
			goto out;
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
	if (own && sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		rc = db_fail(st, err, "commit metrics");
		goto out;
	}
	/* written: only now does the batch forget it */
	forget_written(b);
out:
	if (rc && own)
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_finalize(ins_s);
	sqlite3_finalize(sel_s);
	sqlite3_finalize(ins_c);
	sqlite3_finalize(ins_p);
	sqlite3_finalize(ins_m);
	sqlite3_finalize(ins_n);
	sqlite3_finalize(ins_sum);
	sqlite3_finalize(sel_r);
	sqlite3_finalize(ins_r);
	return rc;
}

/* ---- a batch packed for the hub (hub/event.c) ---- */

#define PACK_VERSION 1

static void pack_str(struct sbuf *out, const char *s)
{
	unsigned char v[VARINT_MAX];
	size_t n = s ? strlen(s) : 0;
	/* 0: NULL, else length + 1 */
	sbuf_add(out, v, put_varint(v, s ? (long long)n + 1 : 0));
	if (s)
		sbuf_add(out, s, n);
}

static void pack_num(struct sbuf *out, long long x)
{
	unsigned char v[VARINT_MAX];
	sbuf_add(out, v, put_varint(v, x));
}

void store_mbatch_pack(struct store_mbatch *b, struct sbuf *out)
{
	sbuf_addch(out, PACK_VERSION);
	size_t nser = 0;
	for (size_t i = 0; i < b->nlist; i++)
		nser += b->list[i]->n != 0;
	pack_num(out, (long long)nser);
	for (size_t i = 0; i < b->nlist; i++) {
		struct series *s = b->list[i];
		if (!s->n)
			continue;
		pack_str(out, s->metric);
		pack_num(out, s->rank);
		pack_num(out, (long long)s->chunk.len);
		sbuf_add(out, s->chunk.buf, s->chunk.len);
	}
	pack_num(out, (long long)b->nparams);
	for (size_t i = 0; i < b->nparams; i++) {
		pack_num(out, b->params[i].rank);
		pack_str(out, b->params[i].name);
		pack_str(out, b->params[i].value);
	}
	pack_num(out, (long long)b->nmeta);
	for (size_t i = 0; i < b->nmeta; i++) {
		pack_str(out, b->meta[i].name);
		pack_str(out, b->meta[i].key);
		pack_str(out, b->meta[i].value);
	}
	pack_num(out, (long long)b->ncounts);
	for (size_t i = 0; i < b->ncounts; i++) {
		const struct count *c = &b->counts[i];
		pack_num(out, c->rank);
		pack_num(out, c->lines);
		pack_num(out, c->records);
		pack_num(out, c->malformed);
		pack_str(out, c->last_error);
	}
	forget_written(b);
}

/* A packed string: *out points into a heap copy kept in *tmp (NULL for NULL). */
static bool unpack_str(const unsigned char **p, const unsigned char *end, struct sbuf *tmp,
		       const char **out)
{
	long long n;
	if (!get_varint(p, end, &n) || n < 0 || n - 1 > end - *p)
		return false;
	*out = NULL;
	if (!n)
		return true;
	sbuf_reset(tmp);
	sbuf_add(tmp, *p, (size_t)(n - 1));
	*p += n - 1;
	*out = tmp->buf;
	return true;
}

struct unpack_arg {
	struct store_mbatch *b;
	const char *metric;
	int rank;
};

static int unpack_point(void *arg, const struct store_mpoint *p)
{
	struct unpack_arg *a = arg;
	store_mbatch_point(a->b, a->rank, a->metric, p);
	return 0;
}

static bool get_count(const unsigned char **p, const unsigned char *end, long long *n)
{
	/* a count can never exceed the bytes left: each item takes one at least */
	return get_varint(p, end, n) && *n >= 0 && *n <= end - *p;
}

int store_mbatch_unpack(struct store_mbatch *b, const void *data, size_t len,
			struct tc_err *err)
{
	const unsigned char *p = data, *end = p + len;
	struct sbuf t1 = SBUF_INIT, t2 = SBUF_INIT, t3 = SBUF_INIT;
	long long n, rank, clen, x[3];
	const char *s1, *s2, *s3;
	bool ok = len > 0 && *p++ == PACK_VERSION && get_count(&p, end, &n);
	for (long long i = 0; ok && i < n; i++) {
		ok = unpack_str(&p, end, &t1, &s1) && s1 && get_varint(&p, end, &rank) &&
		     rank >= INT32_MIN && rank <= INT32_MAX && get_count(&p, end, &clen);
		if (ok) {
			struct unpack_arg a = { b, s1, (int)rank };
			ok = walk_chunk(p, (size_t)clen, unpack_point, &a) == 0;
			p += clen;
		}
	}
	ok = ok && get_count(&p, end, &n);
	for (long long i = 0; ok && i < n; i++) {
		ok = get_varint(&p, end, &rank) && rank >= INT32_MIN && rank <= INT32_MAX &&
		     unpack_str(&p, end, &t1, &s1) && s1 && unpack_str(&p, end, &t2, &s2);
		if (ok)
			store_mbatch_param(b, (int)rank, s1, s2);
	}
	ok = ok && get_count(&p, end, &n);
	for (long long i = 0; ok && i < n; i++) {
		ok = unpack_str(&p, end, &t1, &s1) && s1 && unpack_str(&p, end, &t2, &s2) && s2 &&
		     unpack_str(&p, end, &t3, &s3);
		if (ok)
			store_mbatch_meta(b, s1, s2, s3);
	}
	ok = ok && get_count(&p, end, &n);
	for (long long i = 0; ok && i < n; i++) {
		ok = get_varint(&p, end, &rank) && rank >= INT32_MIN && rank <= INT32_MAX &&
		     get_varint(&p, end, &x[0]) && get_varint(&p, end, &x[1]) &&
		     get_varint(&p, end, &x[2]) && unpack_str(&p, end, &t1, &s1);
		if (ok)
			store_mbatch_counters(b, (int)rank, x[0], x[1], x[2], s1);
	}
	sbuf_release(&t1);
	sbuf_release(&t2);
	sbuf_release(&t3);
	if (!ok || p != end)
		return tc_error(err, TC_EUSAGE, "a damaged metrics batch (%zu bytes)", len);
	return 0;
}
