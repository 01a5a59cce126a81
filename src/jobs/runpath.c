/* runpath.c -- the names of a run folder (runpath.h). */
#include "jobs/runpath.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <stdlib.h>
#include <string.h>

/* what's folder inside the run folder ("" for the run folder itself), and its leaf */
static const char *folder_of(enum run_what what)
{
	switch (what) {
	case RUN_RANK_LOG:
	case RUN_RANK_TIMES:
	case RUN_RANK_CUT:
	case RUN_RANK_ERROR:
	case RUN_SUPERVISOR_LOG:
		return "logs/";
	default:
		return "";
	}
}

void run_leaf(struct sbuf *out, enum run_what what, int rank)
{
	switch (what) {
	case RUN_DIR: break;
	case RUN_SPEC: sbuf_adds(out, "job.yaml"); break;
	case RUN_LOGS: sbuf_adds(out, "logs"); break;
	case RUN_RANK_LOG: sbuf_addf(out, "rank-%d.log", rank); break;
	case RUN_RANK_TIMES: sbuf_addf(out, "rank-%d.times", rank); break;
	case RUN_RANK_CUT: sbuf_addf(out, "rank-%d.cut", rank); break;
	case RUN_RANK_ERROR: sbuf_addf(out, "error-rank-%d.json", rank); break;
	case RUN_SUPERVISOR_LOG: sbuf_adds(out, "supervisor.log"); break;
	case RUN_OUTPUT: sbuf_adds(out, "output"); break;
	case RUN_DATA: sbuf_adds(out, "data"); break;
	case RUN_REPORT: sbuf_adds(out, "report.json"); break;
	case RUN_TELEMETRY: sbuf_adds(out, "telemetry.json"); break;
	case RUN_DIAGNOSTICS: sbuf_adds(out, "diagnostics.json"); break;
	case RUN_CONTAINER_ENV: sbuf_addf(out, "container-rank-%d.env", rank); break;
	case RUN_OUTCOME: sbuf_adds(out, "outcome.json"); break;
	}
}

void run_runs(struct sbuf *out, const char *state)
{
	sbuf_addf(out, "%s/runs", state);
}

void run_path(struct sbuf *out, const char *base, const char *job, enum run_what what, int rank)
{
	if (job) {
		run_runs(out, base);
		sbuf_addf(out, "/%s", job);
	} else {
		sbuf_adds(out, base);
	}
	if (what == RUN_DIR)
		return;
	sbuf_addch(out, '/');
	run_rel(out, what, rank);
}

void run_rel(struct sbuf *out, enum run_what what, int rank)
{
	if (what == RUN_DIR)
		return;
	sbuf_adds(out, folder_of(what));
	run_leaf(out, what, rank);
}

bool run_is_rank_log(const char *name, int *rank)
{
	size_t len = strlen(name);
	long r;
	if (strncmp(name, "rank-", 5) || len < 10 || strcmp(name + len - 4, ".log"))
		return false;
	char *num = xstrndup(name + 5, len - 9);
	bool ok = parse_long(num, 0, 1 << 20, &r);
	free(num);
	if (ok)
		*rank = (int)r;
	return ok;
}
