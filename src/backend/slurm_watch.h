/*
 * slurm_watch.h -- the batch driver acts on the hub's verdict (docs/slurm.md,
 * "A node cut off"): while an attempt's srun runs, a thread asks the hub's
 * status route (hub/hub.h: hub_job_status_json) for the job's rendezvous
 * round (hub/rdzv.h) every few seconds.  When the hub ends the attempt's
 * round because a member went silent (a host cut off or hung), the
 * thread ends the srun step (scancel of the job's running steps, then
 * SIGKILL of srun if a node that cannot be reached keeps it waiting), and
 * the attempt fails as a lost node with the hub's reason
 * (slurm_batch.c: srun_attempt, node_lost_write).
 */
#ifndef TC_BACKEND_SLURM_WATCH_H
#define TC_BACKEND_SLURM_WATCH_H

#include "core/sbuf.h"

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

/*
 * One round as the driver sees it through the status route: the members
 * it saw while the round was closed, and once it ended, the hub's verdict.
 */
struct watch_round {
	long long round;
	json_t *seen;       /* the closed round's members, [{node, rank}, ...] */
	bool ended;         /* the hub ended the round (a later one is current) */
	struct sbuf why;    /* the hub's reason, as it said it */
	struct sbuf cause;  /* a lost member's cause ("no heartbeat for 15 s") */
	int *lost;          /* the node ranks of the members lost (seen, not survivors) */
	size_t nlost;
};
void watch_round_init(struct watch_round *w, long long round);
void watch_round_release(struct watch_round *w);
/* rdzv: the status route's "rdzv" (or NULL); true when it has just found the round ended. */
bool watch_round_update(struct watch_round *w, const json_t *rdzv);

struct slurm_watch;
/*
 * Watch round (the attempt) of job at the hub of the environment while
 * srun (its pid) runs; slurm_job: $SLURM_JOB_ID, whose steps are ended
 * on a verdict (NULL: srun alone is signalled).  NULL when the thread
 * could not start: the attempt runs as without one.
 */
struct slurm_watch *slurm_watch_start(const char *job, int round, pid_t srun,
				      const char *slurm_job);
/* Stop asking (srun's output has ended, its pid not yet waited for). */
void slurm_watch_stop(struct slurm_watch *w);
void slurm_watch_free(struct slurm_watch *w);
/* Did the hub end the round while the attempt ran?  (NULL: no.) */
bool slurm_watch_ended(const struct slurm_watch *w);
/*
 * Is node n of the attempt lost?  On a verdict that names members: those;
 * otherwise missing (the node left no outcome: slurm_batch.c's own rule).
 */
bool slurm_watch_lost(const struct slurm_watch *w, int n, bool missing);
/* The hub's cause for node n, when it named it lost; else NULL. */
const char *slurm_watch_cause(const struct slurm_watch *w, int n);

#endif
