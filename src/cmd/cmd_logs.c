/* cmd_logs.c -- `trainctl logs JOB [--rank R] [--tail N] [-f] [--timestamps] [--merge]` */
#include "backend/backend.h"
#include "cmd/cmd.h"
#include "server/server.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "logs/logs.h"
#include "store/store.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

const char logs_usage[] =
	"usage: trainctl logs JOB [-r R] [-n N] [-f] [--timestamps] [--merge] [--supervisor] [--server URL]\n"
	"\n"
	"  -r, --rank R      only rank R (default: every rank, lines prefixed [r])\n"
	"  -n, --tail N      the last N lines of each rank (as tail -n)\n"
	"  -f, --follow      keep printing while the job runs\n"
	"      --timestamps  each line after the time it was written (UTC, ms)\n"
	"      --merge       every rank's lines in one stream, ordered by time\n"
	"      --supervisor  the supervisor's own log (not through a server)\n"
	"      --server URL  the job of this server ($TRAINCTL_SERVER)\n";

int logs_check_rank(const char *id, long rank, long world, struct tc_err *err)
{
	if (rank < 0 || world <= 0 || rank < world)
		return 0;
	if (world == 1)
		return tc_error(err, TC_EUSAGE, "logs: job %s has one rank, 0 (not %ld)", id, rank);
	return tc_error(err, TC_EUSAGE, "logs: job %s has ranks 0-%ld (not %ld)", id, world - 1, rank);
}

int logs_explain_none(const char *id, const char *state, bool ended, struct tc_err *err)
{
	if (ended)
		return tc_error(err, TC_EJOB, "logs: job %s: %s before any worker started: see `trainctl show %s`",
				id, state, id);
	fprintf(stderr, "trainctl: logs: job %s is %s: no logs yet\n", id, state);
	return 0;
}

int logs_check_timed(bool follow, bool timestamps, bool merge, struct tc_err *err)
{
	if (follow && (timestamps || merge))
		return tc_error(err, TC_EUSAGE, "logs: %s reads the logs written so far: not with -f",
				merge ? "--merge" : "--timestamps");
	return 0;
}

struct follow_ctx {
	struct store *st;
	const char *id;
};

static bool job_alive(void *data)
{
	struct follow_ctx *f = data;
	struct job_row j = { 0 };
	struct tc_err err = TC_ERR_INIT;
	bool alive = false;
	if (store_job_get(f->st, f->id, &j, &err) == 0 &&
	    backend_reconcile(f->st, &j, &err) == 0)
		alive = !job_state_terminal(j.state);
	job_row_release(&j);
	tc_err_release(&err);
	return alive;
}

int cmd_logs(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	if (client_configured(argc, argv))
		return remote_logs(argc, argv, ctx, err);
	static const struct option opts[] = {
		{ "rank", required_argument, NULL, 'r' },
		{ "tail", required_argument, NULL, 'n' },
		{ "follow", no_argument, NULL, 'f' },
		{ "supervisor", no_argument, NULL, 's' },
		{ "timestamps", no_argument, NULL, 'T' },
		{ "merge", no_argument, NULL, 'M' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	long rank = -1, tail = -1;
	bool follow = false, supervisor = false, timestamps = false, merge = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "r:n:fh", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			if (!parse_long(optarg, 0, 1 << 20, &rank))
				return tc_error(err, TC_EUSAGE, "logs: --rank must be a rank number, not '%s'", optarg);
			break;
		case 'n':
			if (!parse_long(optarg, 0, 1L << 40, &tail))
				return tc_error(err, TC_EUSAGE, "logs: --tail must be a number of lines, not '%s'", optarg);
			break;
		case 'f': follow = true; break;
		case 's': supervisor = true; break;
		case 'T': timestamps = true; break;
		case 'M': merge = true; break;
		case 'h': fputs(logs_usage, stdout); return 0;
		default: return cmd_bad_option("logs", "r:n:fh", argc, argv, opts, err);
		}
	}
	if (optind + 1 != argc)
		return tc_error(err, TC_EUSAGE, "logs: give one job");
	int rc = logs_check_timed(follow, timestamps, merge, err);
	if (rc)
		return rc;
	struct store *st = NULL;
	struct job_row j = { 0 };
	rc = store_open(ctx->home, &st, err);
	if (!rc)
		rc = store_job_get(st, argv[optind], &j, err);
	if (rc)
		goto out;
	if (supervisor) {
		/* through logs/ of the run folder, never a link the account put there (logs.h) */
		struct sbuf text = SBUF_INIT;
		rc = logs_read_supervisor(j.run_dir, &text, err);
		if (!rc)
			fwrite(text.buf, 1, text.len, stdout);
		sbuf_release(&text);
		goto out;
	}
	if ((rc = backend_reconcile(st, &j, err)) || (rc = logs_check_rank(j.id, rank, j.world_size, err)))
		goto out;
	bool ended = job_state_terminal(j.state);
	int have = ended || !follow ? logs_has_worker_log(j.run_dir, rank, err) : 1;
	if (have <= 0) {
		rc = have < 0 ? have : logs_explain_none(j.id, job_state_name(j.state), ended, err);
		goto out;
	}
	struct follow_ctx fc = { st, j.id };
	struct logs_opts lo = { j.run_dir, (int)rank, tail, follow, rank < 0 && j.world_size != 1,
				job_alive, &fc, timestamps, merge };
	rc = logs_print(&lo, stdout, err);
out:
	job_row_release(&j);
	store_close(st);
	return rc;
}
