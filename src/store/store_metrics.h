/*
 * store_metrics.h -- metric series, points and summaries (store_metrics.c);
 * store.h includes it.
 */
#ifndef TC_STORE_METRICS_H
#define TC_STORE_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/err.h"
#include "core/sbuf.h"

struct store;

/* ---- metrics (store_metrics.c) ----------------------------------------
 *
 * Tables: metric_series (one per job, metric and rank; unique index on
 * (job_id, metric, rank)), metric_chunks (the points of a series, a packed
 * blob per flush: keeps ingestion near a million lines a second, where a
 * row per point tops out near 300,000), metric_params (PARAMETER records,
 * values as text), metric_meta (DLLogger METADATA: unit, GOAL, STAGE,
 * format), metric_counters (lines, records and malformed lines per rank).
 *
 * Writing goes through a batch (struct store_mbatch): the supervisor adds
 * records as it parses them and store_mbatch_write() stores everything
 * pending in one transaction.  A batch remembers its series, so a series
 * row is created once.  Reading decodes the chunks back into points.
 */

enum store_mkind { STORE_MPOINT = 0, STORE_MEPOCH = 1, STORE_MSUMMARY = 2 };

struct store_mpoint {
	int kind;          /* enum store_mkind */
	long long seq;     /* the rank's step counter (x of charts, TensorBoard step) */
	long long epoch;   /* -1 when none */
	long long iter;    /* -1 when none */
	const char *step;  /* the step as written; never NULL */
	double value;      /* NaN/Inf kept; NaN when text is set */
	const char *text;  /* non-numeric value, or NULL */
	double wall_time;
};

/*
 * The x of a point in charts, `metrics`, `export tb` and the API: the step
 * the job logged when it is one number (`step 10`, DLLogger `"step": 10`,
 * `Iteration: 10`: iter), so that runs resumed from checkpoints line up;
 * otherwise seq: for an (epoch, iteration) pair, whose iteration often
 * starts again each epoch, and for a line without a step.
 */
long long store_mpoint_x(const struct store_mpoint *p);

struct store_mbatch;

struct store_mbatch *store_mbatch_new(const char *job_id);
void store_mbatch_free(struct store_mbatch *b);
/* Queue one point of (rank, metric); strings are copied. */
void store_mbatch_point(struct store_mbatch *b, int rank, const char *metric,
			const struct store_mpoint *p);
void store_mbatch_param(struct store_mbatch *b, int rank, const char *name, const char *value);
void store_mbatch_meta(struct store_mbatch *b, const char *metric, const char *key,
		       const char *value);
void store_mbatch_counters(struct store_mbatch *b, int rank, long long lines, long long records,
			   long long malformed, const char *last_error);
/* Points queued and not yet written; bytes they take. */
size_t store_mbatch_pending(const struct store_mbatch *b);
size_t store_mbatch_bytes(const struct store_mbatch *b);
/* The job whose records b holds. */
const char *store_mbatch_job(const struct store_mbatch *b);
/* Write everything queued in one transaction; on failure it stays queued. */
int store_mbatch_write(struct store *st, struct store_mbatch *b, struct tc_err *err);
/* Forget what is queued (after repeated failures). */
void store_mbatch_drop(struct store_mbatch *b);
/*
 * The batch's pending records as bytes (appended to out), for a hub in
 * another process; they leave b as a write's would.  store_mbatch_unpack
 * queues them into another batch (TC_EUSAGE for damaged bytes, after which
 * that batch holds a part of them: free it).
 */
void store_mbatch_pack(struct store_mbatch *b, struct sbuf *out);
int store_mbatch_unpack(struct store_mbatch *b, const void *data, size_t len,
			struct tc_err *err);

/* One series read back: its points in the order they were logged. */
struct store_mseries {
	char *metric;
	int rank;
	size_t n;
	struct store_mpoint *v; /* strings point into blobs owned by the series */
	char **blobs;
	size_t nblobs;
};

/* Series of a job, by metric then rank; metric NULL = all, rank -1 = all. */
int store_metric_series(struct store *st, const char *job, const char *metric, int rank,
			struct store_mseries **out, size_t *nr, struct tc_err *err);
void store_mseries_free(struct store_mseries *v, size_t nr);

/*
 * The lean read for charts: the (x, value) of a metric's plain numeric
 * points (x: store_mpoint_x) with a finite value and xmin <= x <= xmax, rank by rank (rank -1
 * = all), in logged order, handed to add() straight from the chunks (no
 * strings, nothing kept): several times faster than store_metric_series
 * on a long series.  begin() is called before each rank's points.
 */
struct store_xy_sink {
	void (*begin)(void *arg, int rank);
	void (*add)(void *arg, double x, double y);
	void *arg;
};
int store_metric_xy(struct store *st, const char *job, const char *metric, int rank, double xmin,
		    double xmax, const struct store_xy_sink *sink, struct tc_err *err);

/*
 * The summaries kept as points are written (store_metrics.c, note 4): per
 * series and kind, and per rank the distinct seq values of its point
 * records.  A reader must check them: a series whose kinds' points do not
 * add up to stored has to be read point by point.
 */
struct store_msum_kind {
	long long points;        /* points of this kind, text ones too; 0: no row */
	long long n, n_finite, n_pos;
	double sum, sum_pos;     /* of the finite values, of the positive ones */
	double min, max;         /* NaN when no finite value */
	double last;             /* the last number (NaN when none, or NaN) */
	long long last_index;    /* its index in the series */
	char *min_step, *max_step, *last_step; /* first step of min and max; NULL when none */
	char *last_text;         /* the last text value, or NULL */
};
struct store_msum {
	char *metric;
	int rank;
	long long stored;           /* points the series' chunks hold */
	struct store_msum_kind k[3]; /* by enum store_mkind */
};
/* The series of a job that hold points, by metric then rank. */
int store_metric_summaries(struct store *st, const char *job, struct store_msum **out,
			   size_t *nr, struct tc_err *err);
void store_msum_free(struct store_msum *v, size_t nr);

struct store_msteps {
	int rank;
	long long nseq;   /* distinct seq values of the rank's point records */
	long long last_seq;
	double last_t;    /* the latest wall time of the records of last_seq */
	bool ordered;     /* seq never went back: the counts above hold */
};
int store_metric_steps(struct store *st, const char *job, struct store_msteps **out, size_t *nr,
		       struct tc_err *err);
/*
 * The points of one series in logged order from its first, handed to fn
 * one at a time (valid for the call only) until fn returns non-zero, which
 * is returned: a series' beginning read without the rest.
 */
int store_metric_walk(struct store *st, const char *job, const char *metric, int rank,
		      int (*fn)(void *arg, const struct store_mpoint *p), void *arg,
		      struct tc_err *err);

struct store_mkv {
	int rank;     /* params: the rank; meta: -1 */
	char *name;   /* param name, or metric of a meta row */
	char *key;    /* meta: "unit", "GOAL", ...; params: NULL */
	char *value;
};
int store_metric_params(struct store *st, const char *job, struct store_mkv **out, size_t *nr,
			struct tc_err *err);
int store_metric_meta(struct store *st, const char *job, struct store_mkv **out, size_t *nr,
		      struct tc_err *err);
void store_mkv_free(struct store_mkv *v, size_t nr);

struct store_mcount {
	int rank;
	long long lines, records, malformed;
	char *last_error;
};
int store_metric_counters(struct store *st, const char *job, struct store_mcount **out,
			  size_t *nr, struct tc_err *err);
void store_mcount_free(struct store_mcount *v, size_t nr);

#endif
