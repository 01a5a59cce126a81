/*
 * runpath.h -- the one owner of a run folder's layout (git's path.c): the
 * names inside STATE/runs/JOB/ are spelled here, and readers and writers
 * ask for them by what they hold.
 *
 *   STATE/runs/               every run folder's parent      run_runs()
 *   STATE/runs/JOB/           a job's run folder             RUN_DIR
 *     job.yaml                the spec as it was submitted   RUN_SPEC
 *     logs/                   what the job printed           RUN_LOGS
 *       rank-R.log            a worker's output              RUN_RANK_LOG
 *       rank-R.times          where its lines begin, when    RUN_RANK_TIMES
 *       rank-R.cut            where its log was last cut     RUN_RANK_CUT
 *                             (logs.max_bytes)
 *       error-rank-R.json     a worker's error file          RUN_RANK_ERROR
 *       supervisor.log        the supervisor's own log       RUN_SUPERVISOR_LOG
 *     output/, data/          the job's own folders          RUN_OUTPUT, RUN_DATA
 *     report.json             its benchmark report           RUN_REPORT
 *     telemetry.json          device samples for the report  RUN_TELEMETRY
 *     diagnostics.json        the watchdog's last look       RUN_DIAGNOSTICS
 *     container-rank-R.env    a container worker's env       RUN_CONTAINER_ENV
 *     outcome.json            the end a full disk kept out   RUN_OUTCOME
 *                             of the database (reliability.md)
 */
#ifndef TC_JOBS_RUNPATH_H
#define TC_JOBS_RUNPATH_H

#include <stdbool.h>

#include "core/sbuf.h"

enum run_what {
	RUN_DIR,
	RUN_SPEC,
	RUN_LOGS,
	RUN_RANK_LOG,
	RUN_RANK_TIMES,
	RUN_RANK_CUT,
	RUN_RANK_ERROR,
	RUN_SUPERVISOR_LOG,
	RUN_OUTPUT,
	RUN_DATA,
	RUN_REPORT,
	RUN_TELEMETRY,
	RUN_DIAGNOSTICS,
	RUN_CONTAINER_ENV,
	RUN_OUTCOME,
};

/* STATE/runs, appended to out. */
void run_runs(struct sbuf *out, const char *state);
/*
 * The path of what, appended to out: in the run folder of job under the
 * state folder base when job is non-NULL, else in the run folder base.
 * rank is read by RUN_RANK_LOG, RUN_RANK_TIMES, RUN_RANK_CUT, RUN_RANK_ERROR and
 * RUN_CONTAINER_ENV only.
 */
void run_path(struct sbuf *out, const char *base, const char *job, enum run_what what, int rank);
/*
 * The path of what relative to its run folder ("logs/rank-3.log"), appended
 * to out: for what is shipped or named from the run folder.  RUN_DIR: nothing.
 */
void run_rel(struct sbuf *out, enum run_what what, int rank);
/*
 * The last component of what ("logs", "rank-3.log"), appended to out: for
 * opening it from its folder's descriptor (core/upath.h).  RUN_DIR: nothing.
 */
void run_leaf(struct sbuf *out, enum run_what what, int rank);
/* Is name a worker log of RUN_LOGS ("rank-R.log", R from 0)?  *rank gets R. */
bool run_is_rank_log(const char *name, int *rank);

#endif
