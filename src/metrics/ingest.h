/*
 * ingest.h -- the metrics of jobs: live ingestion by the supervisor (lines
 * in, batches to the caller's writer, TensorBoard files out) and the TensorBoard
 * export of a stored job.  The line parsers and the math are metrics.h;
 * this is where they meet the database and the disk.  The summaries and
 * queries of stored metrics are query.h.
 *
 * NOTES ON THE DESIGN
 * (1) Ingestion never fails the job.  Every function of the ingest object
 *     returns nothing or a hint; problems (database busy or broken, disk
 *     full for event files, a followed file gone) are reported once each
 *     through the warn callback, and what could not be written is kept and
 *     tried again 5 s later (not at once: each try may wait out the
 *     database's busy timeout), or dropped once more than 256 MiB waits.
 * (2) seq: each rank counts its step lines (POINT records); a new count
 *     starts when the step text differs from the rank's previous step line.
 *     Epoch and summary records carry the current count.  seq keeps growing
 *     across restarts of the group; it is the x of charts and the step of
 *     TensorBoard scalars where the job logged no single step number
 *     (store_mpoint_x).
 * (3) Records without a rank of their own get the rank of the worker that
 *     printed them (or of the followed file: rank 0, or the rank in its
 *     name when the path holds "{rank}").  A line naming a rank beyond the
 *     job's world size (the world option, at least nranks and every
 *     worker rank fed in) and beyond 1024 (a worker may start ranks of its
 *     own, torchrun under one trainctl worker) is malformed: counted, its
 *     reason kept, nothing allocated for that rank.
 * (4) TensorBoard: one folder per rank (tb_dir/rank-<r>/); a point record
 *     is tag NAME at step store_mpoint_x() (the logged step), an epoch
 *     record tag "epoch/NAME" at step epoch, a summary record tag
 *     "summary/NAME" at step seq; text values are left out.  metrics_export_tb() writes the same from the store.
 * (5) The job's own patterns (metrics.patterns:, metrics_matcher) see only
 *     the lines no built-in format took, whatever metrics.format says (none
 *     starts no ingestion at all).  A rank that printed lines gets a
 *     counters row even when none was a metrics line, so that `show` can
 *     say why it has no metrics.
 * (6) TensorBoard event files the job writes (tfread.h): every file whose
 *     name holds ".tfevents." below a folder of tb_dirs (8 levels deep at
 *     most, no symlinks, 1024 files at most) is followed like a file of
 *     `files`, found within 0.5 s of its creation.  Its rank: the last
 *     folder below the followed one named rank-N, rank_N or rankN, else 0.
 *     A node of a multi-node job (node_ranks) reads only the files of its
 *     own ranks: a folder the nodes share is then read once, not per node.
 *     Each Event with scalars counts as one line, its scalars as POINT
 *     records of step "<step>" (iter = step) at the Event's wall time,
 *     exactly as a DLLL line {"step": step, "timestamp": wall} with the
 *     same data would.  Corrupt or truncated records are malformed lines
 *     of that rank.  trainctl's own files (marked, tfevents.h) are never
 *     read, and these scalars are not written to trainctl's event files
 *     again (they are in event files already).  A file that last changed
 *     before `since` (the job's start) was there before the job: records
 *     that start below its size then are not the job's.
 * (7) The in-job helper's channel (channel: one file per rank of this
 *     node, docs/python.md) is followed like a file of `files`, but its
 *     lines are kept whatever metrics.format says.
 */
#ifndef TC_METRICS_INGEST_H
#define TC_METRICS_INGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "metrics/metrics.h"
#include "store/store.h"

/* ---- live ingestion (ingest.c) ---------------------------------------- */

struct metrics_ingest_opts {
	/*
	 * Where batches go, the one road (the supervisor's sink_metrics,
	 * hub/sink.h; called from the caller's thread): 0 or a negative TC_E*.
	 */
	int (*write)(void *ctx, struct store_mbatch *b, struct tc_err *err);
	void *write_ctx;
	int world;                 /* the job's ranks when known (> 0; note 3) */
	const char *job_id;
	const char *format;        /* auto | dllogger | tcap | mindformers (NULL = auto) */
	const struct metrics_pattern *patterns; /* metrics.patterns:, compiled once here */
	size_t npatterns;
	const char *tb_dir;        /* NULL: no event files */
	const char *const *files;  /* absolute paths to follow ("{rank}" allowed) */
	size_t nfiles;
	const char *const *tb_dirs; /* absolute folders whose event files to follow (note 6) */
	size_t ntb_dirs;
	double since;              /* wall time the job's workers started (note 6); 0: now */
	/* this node's worker ranks when others run elsewhere (note 6); NULL: every rank */
	const int *node_ranks;
	size_t nnode_ranks;
	int nranks;                /* "{rank}" expands to 0 .. nranks-1; the world is at least this */
	/*
	 * The in-job helper's channel (launch.h: env_metrics_channel): a path
	 * with "{rank}", followed like files for ranks first_rank ..
	 * first_rank+nranks-1 (this node's), its lines kept whatever format
	 * says (note 7); NULL: none.
	 */
	const char *channel;
	int first_rank;
	int flush_ms;              /* 0: 500 */
	void (*warn)(void *ctx, const char *msg);
	void *warn_ctx;
	/*
	 * NULL, or called for every new step record (a rank's seq grows, note
	 * 2): the rank, the record's epoch and iteration (-1: none), the step
	 * time it reports itself (a "step_time" metric in seconds, or
	 * MindFormers' "per_step_time" in ms; NaN: none) and its wall time.
	 * The progress watchdog (launch/watch.c) lives on this.
	 */
	void (*step)(void *ctx, int rank, long long epoch, long long iter, double own, double wall);
	void *step_ctx;
	/*
	 * NULL, or called for every line a reader took (its records queued,
	 * perhaps none): the rank they went to, the line as it was fed in (a
	 * pointer into the data of metrics_ingest_lines) and its records,
	 * valid for the call.  The console's progress lines live on this.
	 */
	void (*took)(void *ctx, int rank, const char *line, const struct metric_rec *recs,
		     size_t n);
	void *took_ctx;
};

struct metrics_ingest;

struct metrics_ingest *metrics_ingest_new(const struct metrics_ingest_opts *o);
/*
 * Feed complete lines ('\n'-terminated; one or many) printed by worker
 * `rank`.  Never blocks on the database: at most it flushes a full batch.
 */
void metrics_ingest_lines(struct metrics_ingest *mi, int rank, const char *data, size_t len);
/*
 * Flush when due and read what followed files gained.  now_ms is the
 * monotonic clock (now_mono_ms()).  Returns how many ms until it wants to be
 * called again (>= 0).
 */
int metrics_ingest_tick(struct metrics_ingest *mi, int64_t now_ms);
/*
 * A new attempt of the workers: the next point record of every rank goes
 * to the step callback even when it repeats the step of the rank's last
 * line (a restart resuming there), seq unchanged (note 2).
 */
void metrics_ingest_mark_attempt(struct metrics_ingest *mi);
/* Read followed files to their end, flush, close event files. */
void metrics_ingest_finish(struct metrics_ingest *mi);
/* Lines, records and malformed lines seen so far (all ranks). */
void metrics_ingest_counts(const struct metrics_ingest *mi, long long *lines, long long *records,
			   long long *malformed);
/*
 * At the end: metrics_none_hint when the workers printed lines and none
 * gave a metric record, else NULL.
 */
const char *metrics_ingest_hint(const struct metrics_ingest *mi);
void metrics_ingest_free(struct metrics_ingest *mi);

/* ---- export (ingest.c: the same event files as live ingestion) --------- */

/* Write TensorBoard files for a stored job under dir/rank-<r>/ (note 4). */
int metrics_export_tb(struct store *st, const char *job_id, const char *dir, size_t *nfiles,
		      size_t *npoints, struct tc_err *err);
/* The same from series already read (a job source's, source/source.h). */
int metrics_export_tb_series(const struct store_mseries *v, size_t nv, const char *dir,
			     size_t *nfiles, size_t *npoints, struct tc_err *err);

#endif
