/* cmd_exec.c -- `trainctl exec JOB [--rank R] [--server URL] -- CMD...` (jobs/exec.h) */
#include "cmd/cmd.h"
#include "core/enc.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "jobs/exec.h"
#include "jobs/jobs.h"
#include "server/server.h"
#include "cmd/client.h"
#include "store/store.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char exec_usage[] =
	"usage: trainctl exec JOB [--rank R] [--server URL] -- CMD [ARG...]\n"
	"\n"
	"Run CMD inside a running job's environment: the rank's worker environment,\n"
	"working folder and account, with this terminal's stdin, stdout and stderr.\n"
	"The exit status is CMD's.  Works on the job's host only.\n"
	"\n"
	"  -r, --rank R      the rank to enter (default 0)\n"
	"      --server URL  find the job on this server ($TRAINCTL_SERVER)\n";

/* The job's JSON form: from the server when one is configured, else the local store. */
int cmd_job_json(int argc, char **argv, const char *server, const char *home, const char *ref,
		 json_t **out, struct tc_err *err)
{
	*out = NULL;
	if (!client_configured(argc, argv)) {
		struct store *st = NULL;
		int rc = store_open(home, &st, err);
		if (!rc)
			rc = jobs_show(st, ref, true, out, err);
		store_close(st);
		return rc;
	}
	struct sbuf path = SBUF_INIT, resp = SBUF_INIT;
	sbuf_adds(&path, "/api/v1/jobs/");
	url_encode(&path, ref, false);
	struct client *cl = NULL;
	int rc = client_open(server, &cl, err);
	if (!rc)
		rc = client_json(cl, "GET", path.buf, NULL, &resp, err);
	if (!rc && !(*out = json_loadb(resp.buf, resp.len, 0, NULL)))
		rc = tc_error(err, TC_EBACKEND, "the server's answer is not JSON");
	client_close(cl);
	sbuf_release(&path);
	sbuf_release(&resp);
	return rc;
}

int cmd_exec(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		{ "rank", required_argument, NULL, 'r' },
		CMD_OPT_SERVER,
		CMD_OPT_HELP,
		CMD_OPT_END,
	};
	const char *server = NULL;
	long rank = 0;
	int c;
	int dashdash = cmd_dashdash(argc, argv);
	optind = 1;
	while ((c = getopt_long(dashdash, argv, "r:h", opts, NULL)) != -1) {
		if (cmd_common_flag(c, NULL, &server))
			continue;
		switch (c) {
		case 'r':
			if (!parse_long(optarg, 0, 1 << 20, &rank))
				return tc_error(err, TC_EUSAGE, "exec: --rank must be a rank number, not '%s'", optarg);
			break;
		case 'h': fputs(exec_usage, stdout); return 0;
		default: return cmd_bad_option("exec", "r:h", argc, argv, opts, err);
		}
	}
	if (optind + 1 != dashdash)
		return tc_error(err, TC_EUSAGE, "exec: give one job, then -- and the command");
	if (dashdash + 1 >= argc)
		return tc_error(err, TC_EUSAGE, "exec: give the command after --");
	const char *ref = argv[optind];
	json_t *job = NULL;
	struct exec_target t = EXEC_TARGET_INIT;
	pid_t pid = -1;
	int rc = cmd_job_json(argc, argv, server, ctx->home, ref, &job, err);
	if (rc)
		goto out;
	char *const *cmd = argv + dashdash + 1;
	const char *id = json_string_value(json_object_get(job, "id"));
	if ((rc = exec_pick_worker(job, rank, &pid, NULL, err)))
		goto out;
	if (json_object_get(json_object_get(job, "spec"), "image")) {
		/* a job in an image: the runtime's exec into the rank's container */
		struct strvec full = STRVEC_INIT;
		rc = exec_container_client(pid, id, (int)rank, isatty(STDIN_FILENO) && isatty(STDOUT_FILENO),
					   &t, &full, err);
		strvec_pushv(&full, (const char *const *)cmd);
		if (!rc)
			rc = exec_run(&t, full.v, NULL, &ctx->exit_status, err);
		strvec_clear(&full);
	} else if (!(rc = exec_target_read(pid, id, (int)rank, &t, err))) {
		rc = exec_run(&t, cmd, NULL, &ctx->exit_status, err);
	}
out:
	exec_target_release(&t);
	json_decref(job);
	return rc;
}
