/*
 * record.c -- a job's records from its supervisor (supervisor_int.h): its
 * row (created, taken over from the server, or the driver's), the workers
 * each attempt started, and the metrics reader, all through the sink
 * (hub/sink.h); what starts once the first workers run (sup_workers_up).
 */
#include "launch/supervisor_int.h"
#include "launch/console_int.h"
#include "launch/jobio_int.h"
#include "core/proc.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "devices/devices.h"
#include "jobs/jobs.h"
#include "metrics/ingest.h"
#include "report/report.h"
#include "storage/storage.h"

#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- metrics: never a reason to fail the job (metrics/ingest.h) ---- */

static void metrics_warn(void *ctx, const char *msg)
{
	sup_say(ctx, "warning: metrics: %s", msg);
}

static int metrics_write(void *ctx, struct store_mbatch *b, struct tc_err *err)
{
	struct sup *sp = ctx;
	return sink_metrics(sp->sink, b, err);
}

static void metrics_took(void *ctx, int rank, const char *line, const struct metric_rec *recs,
			 size_t n)
{
	struct sup *sp = ctx;
	console_took(sp->con, rank, line, recs, n);
}

void sup_metrics_start(struct sup *sp)
{
	const char *fmt = sp->s->metrics_format;
	if (sp->mi || sp->o->no_metrics || (fmt && !strcmp(fmt, "none")))
		return;
	struct strvec files = STRVEC_INIT, tbd = STRVEC_INIT;
	for (size_t i = 0; i < sp->s->metrics_files.nr; i++)
		strvec_push_nodup(&files, path_absolute(sp->s->metrics_files.v[i], sp->s->workdir));
	/* the event files the job writes: its TensorBoard folder's and the spec's (ingest.h note 6) */
	strvec_push(&tbd, sp->tb_dir);
	for (size_t i = 0; i < sp->s->metrics_tb_dirs.nr; i++)
		strvec_push_nodup(&tbd, path_absolute(sp->s->metrics_tb_dirs.v[i], sp->s->workdir));
	double since = 0; /* the first worker's start: an event file older than that is not the job's */
	int *ranks = sp->o->node && sp->w ? xcalloc((size_t)sp->n + 1, sizeof(*ranks)) : NULL;
	for (int i = 0; sp->w && i < sp->n; i++) {
		if (sp->w[i].started > 0 && (!since || sp->w[i].started < since))
			since = sp->w[i].started;
		if (ranks)
			ranks[i] = sp->w[i].rank;
	}
	/* a node of a multi-node job or a server's job has no terminal of its own */
	if (!sp->o->node && !sp->o->job_id)
		sp->con = console_new(STDOUT_FILENO, sp->o->raw, sp->o->quiet, sp->s->metrics_accuracy);
	char *channel = env_metrics_channel(sp->log_dir, "{rank}");
	struct metrics_ingest_opts mo = {
		.channel = channel, .first_rank = sp->w[0].rank,
		.job_id = sp->job_id, .format = fmt, .tb_dir = sp->tb_dir,
		.files = (const char *const *)files.v, .nfiles = files.nr, .nranks = sp->n,
		.tb_dirs = (const char *const *)tbd.v, .ntb_dirs = tbd.nr, .since = since,
		.node_ranks = ranks, .nnode_ranks = ranks ? (size_t)sp->n : 0,
		.patterns = sp->s->metrics_patterns, .npatterns = sp->s->metrics_npatterns,
		.warn = metrics_warn, .warn_ctx = sp, .write = metrics_write, .write_ctx = sp,
		.world = sp->o->node ? sp->o->node->nnodes * sp->n : 0,
		.step = sp->watch ? sup_watch_step : NULL, .step_ctx = sp,
		.took = sp->con ? metrics_took : NULL, .took_ctx = sp,
	};
	sp->mi = metrics_ingest_new(&mo);
	strvec_clear(&files);
	strvec_clear(&tbd);
	free(ranks);
	free(channel);
}

void sup_metrics_end(struct sup *sp)
{
	if (!sp->mi)
		return;
	metrics_ingest_finish(sp->mi);
	console_free(sp->con); /* the last progress stays on the screen */
	sp->con = NULL;
	long long lines, records, malformed;
	metrics_ingest_counts(sp->mi, &lines, &records, &malformed);
	if (lines || malformed)
		sup_say(sp, "metrics: %lld line%s, %lld record%s, %lld malformed line%s (trainctl show %s)",
		    lines, plural_s(lines), records, plural_s(records), malformed, plural_s(malformed),
		    sp->job_id);
	else if (metrics_ingest_hint(sp->mi))
		sup_say(sp, "metrics: %s", metrics_ingest_hint(sp->mi));
	metrics_ingest_free(sp->mi);
	sp->mi = NULL;
}

/* ---- the job's row and its workers ---- */

/* The job's record: created here, taken over from the server, or the driver's (a node). */
int sup_record_job(struct sup *sp, struct tc_err *err)
{
	const struct launch_opts *o = sp->o;
	int rc;
	if (o->node) {
		/* one node of a multi-node job: its driver records the job */
		return o->job_id ? 0 : tc_error(err, TC_EUSAGE, "a node supervisor needs a job id");
	}
	if (o->job_id) {
		/* the server created the job; this supervisor takes it over */
		struct sbuf why = SBUF_INIT;
		sbuf_addf(&why, "supervisor started (pid %ld)", (long)getpid());
		rc = sink_supervisor(sp->sink, sp->job_id, getpid(), proc_start_ticks(getpid()), err);
		if (!rc)
			rc = sink_mark(sp->sink, sp->job_id, JOB_STARTING, why.buf, err);
		sbuf_release(&why);
		return rc;
	}
	/* who ran it on what: ps and the server show them (cpu slots are not held) */
	struct passwd *pw = getpwuid(getuid());
	struct job_row *row = xcalloc(1, sizeof(*row));
	*row = (struct job_row){
		.id = xstrdup(sp->job_id), .name = xstrdup(sp->s->name), .state = JOB_STARTING,
		.run_dir = xstrdup(sp->run_dir), .spec_json = spec_to_json(sp->s),
		.created = now_wall(), .world_size = sp->n, .sup_pid = getpid(),
		.sup_ticks = proc_start_ticks(getpid()),
		.user = pw && pw->pw_name ? xstrdup(pw->pw_name) : NULL,
		.device_type = xstrdup(sp->s->device_type), .device_count = sp->n,
		.devices = sp->leased ? device_ids_text(sp->s->device_ids, sp->n) : NULL,
	};
	sp->late = row;
	/*
	 * Written with the first workers (sup_record_started), unless
	 * something slow comes first: staging inputs or fetching a remote
	 * checkpoint, during which `ps` must show the job starting.
	 */
	const struct spec *s = sp->s;
	bool slow = s->ninputs || (s->resume == RESUME_PATH && s->resume_path &&
				   storage_is_remote(s->resume_path));
	return slow ? sup_record_late(sp, err) : 0;
}

int sup_record_late(struct sup *sp, struct tc_err *err)
{
	if (!sp->late)
		return 0;
	int rc = sink_create(sp->sink, sp->late, err);
	if (!rc) {
		job_row_release(sp->late);
		free(sp->late);
		sp->late = NULL;
	}
	return rc;
}

int sup_record_started(struct sup *sp, const char *why, struct tc_err *err)
{
	struct worker_row *rows = xcalloc((size_t)sp->n, sizeof(*rows));
	size_t n = 0;
	for (int i = 0; i < sp->n; i++)
		if (!sp->w[i].reaped)
			rows[n++] = (struct worker_row){ .attempt = sp->attempt, .rank = sp->w[i].rank,
							 .local_rank = sp->w[i].local_rank,
							 .pid = sp->w[i].pid, .started = sp->w[i].started };
	struct store_start st = { .create = sp->late, .job_id = sp->job_id, .attempt = sp->attempt,
				  .workers = rows, .nworkers = n, .why = why };
	int rc = sink_started(sp->sink, &st, err);
	free(rows);
	if (!rc && sp->late) {
		job_row_release(sp->late);
		free(sp->late);
		sp->late = NULL;
	}
	return rc;
}

/*
 * What only matters once workers run starts after the first ones do, so
 * that it costs their start nothing: the metrics reader, the device
 * sampler and the checkpoint and upload thread.  Once per job.
 */
int sup_workers_up(struct sup *sp, struct tc_err *err)
{
	if (sp->up)
		return 0;
	sp->up = true;
	sup_metrics_start(sp);
	/* device telemetry for report.json (report/report.h); a node's, for its hang report */
	if (!sp->o->node || sp->s->watchdog.on)
		sp->rsamp = report_sampler_start(sp->s->device_type, sp->s->device_ids, sp->n, 0);
	return sp->io ? jobio_start(sp->io, err) : 0;
}
