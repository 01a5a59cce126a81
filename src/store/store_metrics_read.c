/*
 * store_metrics_read.c -- metrics read back: chunks decoded into points,
 * summaries, steps, parameters, metadata and counters (store_metrics.h;
 * the chunk format is note 2 of store_metrics.c).
 */
#include "store/store.h"
#include "store/store_int.h"
#include "store/store_metrics_int.h"
#include "core/xalloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double col_num(sqlite3_stmt *q, int i)
{
	return sqlite3_column_type(q, i) == SQLITE_NULL ? NAN : sqlite3_column_double(q, i);
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
	if ((rc = prep_stmt(st, &q, err, "SELECT s.metric, s.rank, c.data FROM metric_series s"
			    " JOIN metric_chunks c ON c.series_id = s.id"
			    " WHERE s.job_id = ?1 AND (?2 IS NULL OR s.metric = ?2)"
			    " AND (?3 < 0 OR s.rank = ?3) ORDER BY s.metric, s.rank, c.first",
			    "ssi", job, metric, (long long)rank)))
		return rc;
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

long long store_mpoint_x(const struct store_mpoint *p)
{
	return p->epoch < 0 && p->iter >= 0 ? p->iter : p->seq;
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
		struct store_mpoint pt = { .kind = flags & 3 };
		/* the wall time is skipped undecoded */
		if (!get_varint(&p, end, &pt.seq) || !get_varint(&p, end, &pt.epoch) ||
		    !get_varint(&p, end, &pt.iter) || !get_f64(&p, end, &pt.value) || end - p < 8)
			return false;
		p += 8;
		const char *step, *text = NULL;
		double value = pt.value;
		if (!get_str(&p, end, &step) || ((flags & 4) && !get_str(&p, end, &text)))
			return false;
		double x = (double)store_mpoint_x(&pt);
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
	if ((rc = prep_stmt(st, &q, err, "SELECT s.rank, c.data FROM metric_series s"
			    " JOIN metric_chunks c ON c.series_id = s.id"
			    " WHERE s.job_id = ?1 AND s.metric = ?2 AND (?3 < 0 OR s.rank = ?3)"
			    " ORDER BY s.rank, c.first",
			    "ssi", job, metric, (long long)rank)))
		return rc;
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

/* ---- summaries (note 4) ---- */

int store_metric_summaries(struct store *st, const char *job, struct store_msum **out,
			   size_t *nr, struct tc_err *err)
{
	sqlite3_stmt *q;
	size_t alloc = 0;
	int rc, r;
	*out = NULL;
	*nr = 0;
	if ((rc = prep_stmt(st, &q, err,
			    "SELECT s.metric, s.rank, (SELECT c.first + c.count FROM metric_chunks c"
			    " WHERE c.series_id = s.id ORDER BY c.first DESC LIMIT 1) AS stored, "
			    SUMMARY_COLS " FROM metric_series s LEFT JOIN metric_summary m"
			    " ON m.series_id = s.id WHERE s.job_id = ?1 AND stored IS NOT NULL"
			    " ORDER BY s.metric, s.rank, m.kind",
			    "s", job)))
		return rc;
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		const char *m = (const char *)sqlite3_column_text(q, 0);
		int rk = sqlite3_column_int(q, 1);
		struct store_msum *v = *nr ? &(*out)[*nr - 1] : NULL;
		if (!v || v->rank != rk || strcmp(v->metric, m ? m : "")) {
			XGROW(*out, *nr + 1, alloc);
			v = &(*out)[(*nr)++];
			memset(v, 0, sizeof(*v));
			v->metric = xstrdup(m ? m : "");
			v->rank = rk;
			v->stored = sqlite3_column_int64(q, 2);
		}
		if (sqlite3_column_type(q, 3) == SQLITE_NULL)
			continue; /* no summary row: stored before summaries existed */
		int kind = sqlite3_column_int(q, 3);
		if (kind < 0 || kind > 2)
			continue;
		struct store_msum_kind *k = &v->k[kind];
		k->points = sqlite3_column_int64(q, 4);
		k->n = sqlite3_column_int64(q, 5);
		k->n_finite = sqlite3_column_int64(q, 6);
		k->sum = sqlite3_column_double(q, 7);
		k->n_pos = sqlite3_column_int64(q, 8);
		k->sum_pos = sqlite3_column_double(q, 9);
		k->min = col_num(q, 10);
		k->min_step = col_dup(q, 11);
		k->max = col_num(q, 12);
		k->max_step = col_dup(q, 13);
		k->last = col_num(q, 14);
		k->last_step = col_dup(q, 15);
		k->last_index = sqlite3_column_int64(q, 16);
		k->last_text = col_dup(q, 17);
	}
	sqlite3_finalize(q);
	if (r != SQLITE_DONE) {
		store_msum_free(*out, *nr);
		*out = NULL;
		*nr = 0;
		return db_fail(st, err, "read metric summaries");
	}
	return 0;
}

void store_msum_free(struct store_msum *v, size_t nr)
{
	for (size_t i = 0; i < nr; i++) {
		free(v[i].metric);
		for (int k = 0; k < 3; k++) {
			free(v[i].k[k].min_step);
			free(v[i].k[k].max_step);
			free(v[i].k[k].last_step);
			free(v[i].k[k].last_text);
		}
	}
	free(v);
}

int store_metric_steps(struct store *st, const char *job, struct store_msteps **out, size_t *nr,
		       struct tc_err *err)
{
	sqlite3_stmt *q;
	size_t alloc = 0;
	int rc, r;
	*out = NULL;
	*nr = 0;
	if ((rc = prep_stmt(st, &q, err,
			    "SELECT rank, nseq, last_seq, last_t, ordered FROM metric_rank_steps"
			    " WHERE job_id = ? ORDER BY rank",
			    "s", job)))
		return rc;
	while ((r = sqlite3_step(q)) == SQLITE_ROW) {
		XGROW(*out, *nr + 1, alloc);
		(*out)[(*nr)++] = (struct store_msteps){
			.rank = sqlite3_column_int(q, 0), .nseq = sqlite3_column_int64(q, 1),
			.last_seq = sqlite3_column_int64(q, 2), .last_t = col_num(q, 3),
			.ordered = sqlite3_column_int(q, 4) != 0,
		};
	}
	sqlite3_finalize(q);
	if (r != SQLITE_DONE) {
		free(*out);
		*out = NULL;
		*nr = 0;
		return db_fail(st, err, "read metric steps");
	}
	return 0;
}

/* Hand the points of one blob to fn; -1 when the blob is damaged, else fn's first non-zero. */
int walk_chunk(const unsigned char *p, size_t len,
		      int (*fn)(void *arg, const struct store_mpoint *p), void *arg)
{
	const unsigned char *end = p + len;
	if (!p || !len || *p++ != CHUNK_VERSION)
		return -1;
	while (p < end) {
		struct store_mpoint pt = { 0 };
		unsigned char flags = *p++;
		pt.kind = flags & 3;
		if (!get_varint(&p, end, &pt.seq) || !get_varint(&p, end, &pt.epoch) ||
		    !get_varint(&p, end, &pt.iter) || !get_f64(&p, end, &pt.value) ||
		    !get_f64(&p, end, &pt.wall_time) || !get_str(&p, end, &pt.step) ||
		    ((flags & 4) && !get_str(&p, end, &pt.text)))
			return -1;
		int rc = fn(arg, &pt);
		if (rc)
			return rc;
	}
	return 0;
}

int store_metric_walk(struct store *st, const char *job, const char *metric, int rank,
		      int (*fn)(void *arg, const struct store_mpoint *p), void *arg,
		      struct tc_err *err)
{
	sqlite3_stmt *q;
	int rc, r = SQLITE_DONE, got = 0;
	if ((rc = prep_stmt(st, &q, err, "SELECT c.data FROM metric_series s JOIN metric_chunks c"
			    " ON c.series_id = s.id WHERE s.job_id = ? AND s.metric = ? AND s.rank = ?"
			    " ORDER BY c.first",
			    "ssi", job, metric, (long long)rank)))
		return rc;
	while (!got && (r = sqlite3_step(q)) == SQLITE_ROW)
		got = walk_chunk(sqlite3_column_blob(q, 0), (size_t)sqlite3_column_bytes(q, 0), fn,
				 arg);
	if (got < 0)
		rc = tc_error(err, TC_ESTORE, "database: damaged metrics chunk of '%s' rank %d",
			      metric, rank);
	else if (got)
		rc = got;
	else if (r != SQLITE_DONE)
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

static int read_kv(struct store *st, const char *sql, const char *job, bool meta,
		   struct store_mkv **out, size_t *nr, struct tc_err *err)
{
	sqlite3_stmt *q;
	size_t alloc = 0;
	int r, rc;
	*out = NULL;
	*nr = 0;
	if ((rc = prep_stmt(st, &q, err, sql,
			    "s", job)))
		return rc;
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
	if ((rc = prep_stmt(st, &q, err,
			    "SELECT rank, lines, records, malformed, last_error FROM metric_counters"
			    " WHERE job_id=? ORDER BY rank",
			    "s", job)))
		return rc;
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
