/*
 * slurm_release.h -- a node the batch driver leaves out (launch.h:
 * launch_backend_ops.release and .usable): given back to Slurm by
 * shrinking the running job, and asked whether one left out is usable
 * again.  Run inside the allocation (SLURM_JOB_ID).
 */
#ifndef TC_BACKEND_SLURM_RELEASE_H
#define TC_BACKEND_SLURM_RELEASE_H

#include "core/err.h"
#include "core/sbuf.h"

#include <stdbool.h>

/*
 * `scontrol update JobId=$SLURM_JOB_ID NodeList=<the job's nodes less
 * host>`: Slurm shrinks the running job and the node is free for others.
 * The batch step's SLURM_* variables then say the old size: Slurm's
 * slurm_job_<id>_resize.sh, written where scontrol runs (a folder of our
 * own, removed after), is applied to this process's environment (the
 * SLURM_* names it has), so that the next srun sees the job as it is.  ctx is unused.  TC_EBACKEND with
 * Slurm's words when it refuses.
 */
int slurm_release_node(void *ctx, const char *host, struct tc_err *err);
/*
 * Is host usable again: `scontrol show node` names no DOWN, DRAIN, FAIL,
 * NOT_RESPONDING, POWER or REBOOT state, and a one-task srun of `true` on it
 * (inside the job's allocation) ends 0 within 20 s.  why: what was seen.
 */
bool slurm_node_usable(void *ctx, const char *host, struct sbuf *why);

#endif
