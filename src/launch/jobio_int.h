/*
 * jobio_int.h -- private to src/launch/: a job's data in and results out,
 * as the supervisor uses them (jobio.c).
 *
 *   jobio_begin   stage every input into the run folder (before any worker
 *                 starts);
 *   jobio_start   once the first workers run, start the background thread
 *                 that watches the checkpoint folder (records each complete
 *                 checkpoint with its checksum, rotates by checkpoint.keep)
 *                 and uploads the outputs every every_seconds / every_steps;
 *   jobio_resume  what TRAINCTL_RESUME_FROM is for the next attempt;
 *   jobio_final_upload  on success, the last upload, whose failure fails the job;
 *   jobio_end     stop the thread, record what is left, upload once more.
 *
 * Every record goes through c.sink (a direct one's thread has its own); the
 * thread never blocks the supervisor's poll loop; jobio_resume and the
 * thread share one lock.
 */
#ifndef TC_LAUNCH_JOBIO_INT_H
#define TC_LAUNCH_JOBIO_INT_H

#include <stdbool.h>

#include "core/err.h"
#include "core/sbuf.h"
#include "core/strvec.h"
#include "hub/sink.h"
#include "spec/spec.h"
#include "store/store.h"

struct jobio_ctx {
	const struct spec *s;
	const char *home, *job_id, *run_dir, *data_dir, *output_dir, *ckpt_dir;
	int world;
	void (*say)(void *arg, const char *msg); /* thread-safe: one write per line */
	void *say_arg;
	/* the checkpoint a restart resumes from, and why (say_arg too); NULL: say */
	void (*event)(void *arg, const char *msg);
	/*
	 * Where the job's records go (borrowed, never NULL): the only road.  A
	 * remote sink is used from the thread too (it is thread-safe); a direct
	 * one from the caller's thread only, the thread writing through a
	 * direct sink of its own (sink_direct_open over home).
	 */
	struct sink *sink;
	/*
	 * Other nodes keep the job's checkpoints on disks of their own (a
	 * multi-node job's driver, whose disk is node 0's): checkpoint.keep
	 * keeps the newest step they all have too, as each node does
	 * (nodeckpt.c), and node 0's records of what it removes say so.
	 */
	bool node_disks;
};

struct jobio;

/* Stage inputs (TC_ESTORAGE naming the input on failure). */
int jobio_begin(const struct jobio_ctx *c, struct jobio **out, struct tc_err *err);
/* Open the thread's sink when direct and start it (a second call does nothing). */
int jobio_start(struct jobio *io, struct tc_err *err);
/* Heap path for TRAINCTL_RESUME_FROM, or NULL; first = before the first attempt. */
char *jobio_resume(struct jobio *io, bool first, struct tc_err *err);
/*
 * The next jobio_resume picks only among these checkpoint names (the ones
 * every node has, when nodes have disks of their own); NULL: any.  Copied.
 */
void jobio_restrict(struct jobio *io, const struct strvec *names);
/*
 * A checkpoint an earlier supervisor of the job recorded (copied), for a
 * remote sink's jobio, which keeps its rows itself: jobio_resume chooses
 * among them too.  Nothing for a store's.
 */
void jobio_known(struct jobio *io, const struct store_ckpt *c);
/*
 * The final checkpoint scan and upload, before a success is recorded: a
 * failed upload is the job's failure ("upload to s3://... failed: ...",
 * appended to failed, and nonzero returned).  Done once: jobio_end then
 * uploads nothing more.
 */
int jobio_final_upload(struct jobio *io, struct sbuf *failed);
/* Final checkpoint scan and upload (unless done); frees io (NULL is a no-op). */
void jobio_end(struct jobio *io);

/*
 * The resume rule over a job's recorded rows (oldest first): index of the
 * newest that verifies, or -1; what was skipped and why goes to report (one
 * line each), and failed rows are marked damaged.
 */
int launch_choose_checkpoint(struct store *st, const char *job_id, const struct store_ckpt *rows,
			     size_t n, struct sbuf *report);

#endif
