/*
 * source.h -- the one road for reading a job (git's transport.h): a table
 * of operations with two implementations.  The local one (source_local.c)
 * reads the store and the run folder; the remote one (the CLI's
 * cmd/source_remote.c, HTTP through its client: the library never needs
 * it) asks a server's API.  A reader -- a CLI verb, compare/, a server
 * handler -- picks a source once and asks it, never the store itself, so a
 * verb behaves the same with and without a server.
 *
 * Every operation returns 0 or a TC_E* code with err filled; what it hands
 * back is the caller's to release.
 */
#ifndef TC_SOURCE_H
#define TC_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "core/err.h"
#include "core/sbuf.h"
#include "store/store.h"

/* A job as a reader needs it. */
struct source_job {
	char *id, *name, *state; /* name: NULL when it has none */
	int world_size;  /* 0: not known */
	bool started;    /* a worker has started */
	bool ended;      /* its state is terminal */
	char *run_dir;   /* local sources only; NULL through a server */
};
void source_job_release(struct source_job *j);

/* What `logs` prints (the same flags both ways). */
struct source_logs {
	long rank;       /* -1: every rank */
	long tail;       /* -1: everything */
	bool follow, timestamps, merge;
};

/* Which jobs `ps` lists. */
struct source_query {
	bool all;        /* every job, else the newest 50 */
	unsigned states; /* a bit per enum job_state; 0: any */
	const char *user; /* NULL: any the caller may see */
};

struct job_source;

struct source_ops {
	const char *name; /* "local", "remote" */
	/* ref: an id or a name */
	int (*job)(struct job_source *s, const char *ref, struct source_job *out,
		   struct tc_err *err);
	/* the jobs q selects as job_to_json's brief objects, newest first (a JSON array) */
	int (*list)(struct job_source *s, const struct source_query *q, json_t **out,
		    struct tc_err *err);
	/* the detail `show` prints (jobs_show's JSON) */
	int (*job_json)(struct job_source *s, const char *ref, json_t **out, struct tc_err *err);
	/*
	 * The worker logs of j to out.  *none is set, and nothing printed,
	 * when it has no worker log yet (j->state and j->ended brought up to
	 * date): the caller says why.
	 */
	int (*logs)(struct job_source *s, struct source_job *j, const struct source_logs *o,
		    FILE *out, bool *none, struct tc_err *err);
	/* logs/supervisor.log; TC_EUSAGE where the source cannot reach it */
	int (*supervisor_log)(struct job_source *s, const struct source_job *j, struct sbuf *out,
			      struct tc_err *err);
	/* {"series": [{"metric", "rank"}, ...]}: store_metric_names_json's text */
	int (*metric_names)(struct job_source *s, const char *id, struct sbuf *out,
			    struct tc_err *err);
	/* store_metric_series: metric NULL = all, rank -1 = all */
	int (*metric_series)(struct job_source *s, const char *id, const char *metric, int rank,
			     struct store_mseries **out, size_t *nr, struct tc_err *err);
	/* every checkpoint row of the job, oldest step first (store_ckpt_list, all) */
	int (*checkpoints)(struct job_source *s, const char *id, struct store_ckpt **out,
			   size_t *nr, struct tc_err *err);
	/* sweep_show_json of a sweep */
	int (*sweep_json)(struct job_source *s, const char *ref, json_t **out, struct tc_err *err);
	/*
	 * The chart read (store_metric_xy): the (x, value) of a metric's plain
	 * finite points with xmin <= x <= xmax, rank by rank (rank -1 = all).
	 */
	int (*metric_xy)(struct job_source *s, const char *id, const char *metric, int rank,
			 double xmin, double xmax, const struct store_xy_sink *sink,
			 struct tc_err *err);
	/* one series from its first point (store_metric_walk): fn's non-zero stops and is returned */
	int (*metric_walk)(struct job_source *s, const char *id, const char *metric, int rank,
			   int (*fn)(void *arg, const struct store_mpoint *p), void *arg,
			   struct tc_err *err);
	/*
	 * {"job": ID, "endpoints": [endpoint_list_json's objects]}, each url one
	 * to open from here: the local address (Jupyter's token with it, which
	 * only the job's own store holds), or the server's proxy; through a
	 * server also "origin", where a browser lands (docs/endpoints.md).
	 */
	int (*endpoints)(struct job_source *s, const char *ref, json_t **out, struct tc_err *err);
	void (*close)(struct job_source *s);
};

struct job_source {
	const struct source_ops *ops;
};

/*
 * The local source of the state folder home (its own store connection), or
 * over a store the caller keeps open (st stays the caller's).
 */
int source_local_open(const char *home, struct job_source **out, struct tc_err *err);
struct job_source *source_local_wrap(struct store *st);
/*
 * Where the local source s says, once, what it read past: a job whose state
 * it could not bring up to date because the file system refused the write
 * (a full disk).  Without it, nowhere.
 */
void source_local_on_warning(struct job_source *s, void (*say)(void *ctx, const char *line),
			    void *ctx);
void source_close(struct job_source *s);

static inline int source_job(struct job_source *s, const char *ref, struct source_job *out,
			     struct tc_err *err)
{
	return s->ops->job(s, ref, out, err);
}

/*
 * The wire forms the API answers and the remote source reads back, kept
 * here so both ends are one piece of code.  Series: {"series": [{"metric",
 * "rank", "points": [[kind, seq, epoch, iter, step, value, text, time],
 * ...]}, ...]} (a value that is not finite as "NaN", "Infinity" or
 * "-Infinity"; text null when none).  Checkpoints: {"checkpoints": [{name,
 * dir, step, epoch, layout, files, bytes, crc32c, created, state}, ...]}.
 */
void source_series_json(const struct store_mseries *v, size_t n, struct sbuf *out);
int source_series_parse(const char *text, size_t len, struct store_mseries **out, size_t *nr,
			struct tc_err *err);
/*
 * Series read back from the wire handed to a chart's sink as
 * store_metric_xy hands the store's: each series' rank, then its plain
 * finite points with xmin <= x <= xmax (x: store_mpoint_x).
 */
void source_series_xy(const struct store_mseries *v, size_t n, double xmin, double xmax,
		      const struct store_xy_sink *sink);
void source_ckpt_json(const struct store_ckpt *v, size_t n, struct sbuf *out);
int source_ckpt_parse(const char *text, size_t len, struct store_ckpt **out, size_t *nr,
		      struct tc_err *err);

#endif
