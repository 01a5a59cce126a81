/*
 * slurm_spare.h -- a Slurm job's hot spares (docs/slurm.md, "Spares"):
 * while an attempt runs on the members, the batch driver runs a second
 * srun step on the spare hosts, `trainctl supervise-spare JOB` on each
 * (one task, one CPU), which checks the job's devices at its start and
 * every LAUNCH_SPARE_INTERVAL seconds and prints each result as a line
 * (launch/spare.h).  The driver keeps each spare's newest result; the
 * members' logic (multinode.c) passes over a spare whose newest check
 * failed (slurm_spares_usable, through launch_backend_ops).
 *
 * THE DRIVER'S STEPS, per attempt (slurm_batch.c: srun_attempt)
 *  1. slurm_spares_release(sp, members) before the members' srun: a spare
 *     called to be a member has its step ended (srun signalled and waited
 *     for), so that its CPUs are free for the members' step.
 *  2. slurm_spares_watch(sp, members, exclude) once the members' srun has
 *     started: a step on the allocation's hosts that are neither members
 *     nor left out, unless one runs on exactly those already.
 *  3. slurm_spares_free(sp) when the job is done: the step ended.
 *
 * A reader thread takes the step's lines; a spare whose check fails gives
 * the job one `unhealthy` event (again only after it passed in between),
 * through a sink of that thread's own (sink_thread_open).
 *
 * Ownership: slurm_spares_new copies its strings; sink is borrowed and
 * must outlive the struct.
 */
#ifndef TC_BACKEND_SLURM_SPARE_H
#define TC_BACKEND_SLURM_SPARE_H

#include <stdbool.h>

#include "core/err.h"
#include "core/sbuf.h"
#include "core/strvec.h"
#include "hub/sink.h"
#include "spec/spec.h"

/* ---- on a spare: `trainctl supervise-spare JOB --devices TYPE:IDS --interval S` ---- */

struct slurm_spare_args {
	const char *job_id;
	const char *devices; /* "gpu:0,1", "cpu:0" */
	int interval;        /* seconds */
	bool (*tell)(void *ctx, const char *line); /* a line for the driver (its stdout) */
	void *tell_ctx;
};
/* Watch this node ($SLURMD_NODENAME) until SIGTERM, SIGINT or SIGHUP. */
int slurm_spare_main(const struct slurm_spare_args *a, struct tc_err *err);

/* ---- in the batch driver ---- */

struct slurm_spares;
/* alloc(NULL, out): the allocation's hosts (slurm_batch.c's); NULL spares nothing. */
struct slurm_spares *slurm_spares_new(const char *exe, const char *home, const char *job_id,
				      const struct spec *s, struct sink *sink,
				      int (*alloc)(void *ctx, struct strvec *out));
void slurm_spares_release(struct slurm_spares *sp, const char *members);
void slurm_spares_watch(struct slurm_spares *sp, const char *members, const char *exclude);
/*
 * End the spares' step now (the next slurm_spares_watch starts it again):
 * before Slurm shrinks the job, whose resize leaves the cores of a step
 * that ends after it counted as used (Slurm 22.05: "unable to update job's
 * core use information due to job resizing"), so that no step could start
 * on that spare again.
 */
void slurm_spares_end(struct slurm_spares *sp);
/*
 * launch_backend_ops.spare_usable: false when host's newest check failed,
 * with its reason in *why; true when it passed or nothing is known yet.
 */
bool slurm_spares_usable(void *sp, const char *host, struct sbuf *why);
/* End the step and free; NULL is a no-op. */
void slurm_spares_free(struct slurm_spares *sp);

#endif
