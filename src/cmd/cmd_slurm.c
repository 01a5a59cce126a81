/*
 * cmd_slurm.c -- the hidden subcommands of backend: slurm (backend.h):
 * `trainctl slurm-batch JOB` is the body of job.sbatch, and
 * `trainctl supervise-node JOB --attempt N --master ADDR:PORT [--resume P]`
 * is what srun starts on every node, `trainctl supervise-spare JOB
 * --devices TYPE:IDS --interval S` on each spare while it waits; `trainctl hub JOB [--flush]` is a
 * job's hub once its terminal is gone, and (--flush) what that hub runs on
 * the job's nodes to take the journals they left.  None is typed by users.
 */
#include "backend/backend.h"
#include "backend/slurm_spare.h"
#include "cmd/cmd.h"
#include "core/util.h"
#include "hub/hub.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

int cmd_slurm_batch(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	if (argc != 2)
		return tc_error(err, TC_EUSAGE, "usage: trainctl slurm-batch JOB (job.sbatch runs it)");
	return slurm_batch_main(ctx->home, argv[1], &ctx->exit_status, err);
}

int cmd_hub(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	if (argc == 3 && !strcmp(argv[2], "--flush")) {
		/* on a node, run by a hub that came back after the job (slurm_hub.c) */
		int left = 0;
		int rc = hub_flush_main(ctx->home, argv[1], &left, err);
		if (!rc)
			printf("hub --flush: job %s: %d journal%s left\n", argv[1], left,
			       left == 1 ? "" : "s");
		ctx->exit_status = !rc && left ? 1 : ctx->exit_status;
		return rc;
	}
	if (argc != 2)
		return tc_error(err, TC_EUSAGE, "usage: trainctl hub JOB (ps, show and logs start it)");
	return slurm_hub_main(ctx->home, argv[1], err);
}

int cmd_supervise_node(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		{ "attempt", required_argument, NULL, 'a' },
		{ "master", required_argument, NULL, 'm' },
		{ "resume", required_argument, NULL, 'r' },
		CMD_OPT_END,
	};
	struct slurm_node_args a = { .home = ctx->home };
	long v;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'a':
			if (!parse_long(optarg, 0, 1 << 20, &v))
				return tc_error(err, TC_EUSAGE, "supervise-node: --attempt must be a number");
			a.attempt = (int)v;
			break;
		case 'm': a.master = optarg; break;
		case 'r': a.resume_from = optarg; break;
		default:
			return tc_error(err, TC_EUSAGE,
					"usage: trainctl supervise-node JOB --attempt N --master ADDR:PORT [--resume PATH]");
		}
	}
	if (optind + 1 != argc || !a.master)
		return tc_error(err, TC_EUSAGE,
				"usage: trainctl supervise-node JOB --attempt N --master ADDR:PORT [--resume PATH]");
	a.job_id = argv[optind];
	return slurm_node_main(&a, &ctx->exit_status, err);
}

/* A spare's line for the driver: srun carries our stdout to it. */
static bool tell_stdout(void *ctx, const char *line)
{
	(void)ctx;
	return fputs(line, stdout) >= 0 && fflush(stdout) == 0;
}

int cmd_supervise_spare(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const char usage[] =
		"usage: trainctl supervise-spare JOB --devices TYPE:ID,... [--interval SECONDS]";
	static const struct option opts[] = {
		{ "devices", required_argument, NULL, 'd' },
		{ "interval", required_argument, NULL, 'i' },
		CMD_OPT_END,
	};
	struct slurm_spare_args a = { .interval = 30, .tell = tell_stdout };
	long v;
	int c;
	(void)ctx;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd': a.devices = optarg; break;
		case 'i':
			if (!parse_long(optarg, 1, 86400, &v))
				return tc_error(err, TC_EUSAGE, "supervise-spare: --interval takes seconds, "
						"1 to 86400");
			a.interval = (int)v;
			break;
		default: return tc_error(err, TC_EUSAGE, "%s", usage);
		}
	}
	if (optind + 1 != argc || !a.devices)
		return tc_error(err, TC_EUSAGE, "%s", usage);
	a.job_id = argv[optind];
	return slurm_spare_main(&a, err);
}
