/*
 * query.h -- job-level reads of stored metrics: the summary that `show`
 * and the API print (last / best per metric, throughput per rank and job,
 * duration, accuracy, malformed lines) and the points `trainctl metrics`
 * and the charts list, downsampled on request.  The rules are in
 * docs/metrics.md; what writes the points is ingest.h.
 */
#ifndef TC_METRICS_QUERY_H
#define TC_METRICS_QUERY_H

#include <jansson.h>
#include <stddef.h>

#include "core/err.h"
#include "core/sbuf.h"
#include "metrics/metrics.h"
#include "store/store.h"

/* Settings of a stored job, from its spec JSON (defaults when absent). */
struct metrics_settings {
	int warmup_steps;
	int batch_size;      /* 0: unknown */
	char *accuracy;      /* NULL: none named */
};
void metrics_settings_from_spec(const char *spec_json, struct metrics_settings *out);
void metrics_settings_release(struct metrics_settings *s);

struct metrics_metric_sum {
	char *name;
	int rank;
	const char *kind;    /* the finest kind the metric has: point, epoch or summary */
	enum metrics_goal goal;
	size_t n;            /* values of that kind */
	double last, best, min, max, mean;
	char *last_step, *best_step;
	char *unit;          /* from METADATA, or NULL */
	char *text;          /* last text value when the metric is not numeric */
};

struct metrics_rank_sum {
	int rank;
	double throughput;   /* samples/s, NaN when unknown */
	const char *method;  /* "ips:NAME", "step_time", "step_times" or NULL */
	char *source;        /* the metric used, or NULL */
	long long lines, records, malformed;
	char *last_error;
};

struct metrics_job_summary {
	struct metrics_metric_sum *metrics; /* by name, then rank */
	size_t nmetrics;
	struct metrics_rank_sum *ranks;
	size_t nranks;
	double throughput;   /* sum over ranks, NaN when none */
	double duration;     /* seconds from start to end (or now) */
	double accuracy;     /* last value of settings.accuracy, NaN when none */
	long long malformed;
	struct metrics_settings settings;
	struct store_mkv *params;
	size_t nparams;
};

int metrics_job_summary(struct store *st, const struct job_row *job,
			struct metrics_job_summary *out, struct tc_err *err);
void metrics_job_summary_release(struct metrics_job_summary *s);
/* For show: a JSON object (non-finite numbers as null), and the text block of that JSON. */
json_t *metrics_job_summary_json(const struct metrics_job_summary *s);
void metrics_job_summary_text(json_t *summary, struct sbuf *out);

/* One stored point, for listing. */
struct metrics_point {
	const char *metric;
	int rank;
	const char *kind;    /* "point", "epoch", "summary" */
	const struct store_mpoint *p;
};
typedef void (*metrics_point_fn)(void *ctx, const struct metrics_point *pt);

/*
 * Call fn for the points of a job, by metric, rank, then log order.
 * name NULL and rank -1 select all.  max_points > 0 downsamples each
 * (metric, rank, kind) series of numbers to at most that many points
 * (metrics_downsample with max_points / 4 buckets, x = the point's position
 * in the series, so the first, last, lowest and highest of each slice stay);
 * text values are kept, non-finite values are left out.  *count gets the number of points passed to fn.
 */
int metrics_job_points(struct store *st, const char *job_id, const char *name, int rank,
		       size_t max_points, metrics_point_fn fn, void *ctx, size_t *count,
		       struct tc_err *err);
/* The same over series already read (a job source's, source/source.h). */
void metrics_series_points(const struct store_mseries *v, size_t nv, size_t max_points,
			   metrics_point_fn fn, void *ctx, size_t *count);

#endif
