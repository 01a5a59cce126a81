/*
 * main.c -- the subcommand table (git.c's habit).  Shared set-up happens
 * here, then the command runs, then stdout is checked so that a full disk is
 * an error and not silence.  Only this file prints errors and exits.
 */
#include "cmd/cmd.h"
#include "core/util.h"
#include "core/version.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct command {
	const char *name;
	cmd_fn fn;
	const char *help;
} commands[] = {
	{ "run", cmd_run, "run a job in the foreground (spec file or -- command)" },
	{ "ps", cmd_ps, "list jobs on this machine, newest first" },
	{ "show", cmd_show, "show a job: spec, states, workers, root cause" },
	{ "logs", cmd_logs, "print or follow a job's logs" },
	{ "endpoints", cmd_endpoints, "list a job's endpoints (Jupyter, TensorBoard, ...) and their URLs" },
	{ "devices", cmd_devices, "list the accelerators and CPUs of this machine" },
	{ "doctor", cmd_doctor, "check the state folder (database, permissions, jobs, leases) and repair" },
	{ "plan", cmd_plan, "search parallel strategies and pipeline partitions" },
	{ "metrics", cmd_metrics, "list a job's metrics points (table, csv, json)" },
	{ "export", cmd_export, "write a job's metrics as TensorBoard event files" },
	{ "sync", cmd_sync, "copy what differs between folders, s3:// and obs://" },
	{ "ckpt", cmd_ckpt, "list, inspect and transform checkpoints" },
	{ "compare", cmd_compare, "align jobs' metrics step by step (two: precision check; more, or a sweep)" },
	{ "sweep", cmd_sweep, "run a grid or random search of a spec's keys; show its trials" },
	{ "report", cmd_report, "write a job's benchmark report (report.json, Ais-Bench files)" },
	{ "zoo", cmd_zoo, "ModelZoo: check a model folder, run model.yaml tests, new skeleton" },
	{ "server", cmd_server, "run the platform: queue, scheduler, HTTP API and web UI" },
	{ "team", cmd_team, "the server's teams: ls, show TEAM (guarantees, in use, borrowed)" },
	{ "queue", cmd_queue, "the server's waiting jobs in start order, and why each waits" },
	{ "submit", cmd_submit, "queue a job on the server (--server URL or TRAINCTL_SERVER)" },
	{ "stop", cmd_stop, "stop a job (through the server, or its supervisor directly)" },
	{ "pause", cmd_pause, "stop a job with a checkpoint and hold it (server)" },
	{ "resume", cmd_resume, "put a paused job back in the queue (server)" },
	{ "clone", cmd_clone, "submit a copy of a job (server)" },
	{ "delete", cmd_delete, "delete a finished job and its run folder (server)" },
	{ "exec", cmd_exec, "run a command inside a running job's environment (as kubectl exec)" },
	{ "ssh", cmd_ssh, "log in to a running job through its ssh endpoint" },
	{ "token", cmd_token, "create a bearer token for the server's API" },
	{ "usage", cmd_usage, "device-hours, jobs and queue waits per user or team over a period" },
	{ "gc", cmd_gc, "remove finished jobs (rows and run folders) older than a period" },
	{ "secret", cmd_secret, "set, list or remove the secrets a spec's env: names" },
	{ "completion", cmd_completion, "print the bash or zsh completion script" },
	{ "supervise", cmd_supervise, NULL }, /* started by the server, not typed */
	{ "slurm-batch", cmd_slurm_batch, NULL },       /* job.sbatch runs it (backend: slurm) */
	{ "supervise-node", cmd_supervise_node, NULL }, /* srun starts it on every node */
	{ "supervise-spare", cmd_supervise_spare, NULL }, /* and on each spare while it waits */
	{ "hub", cmd_hub, NULL },
	{ "rdzv-sim", cmd_rdzv_sim, NULL }, /* bench/rdzv_bench.sh, tests/e2e/test_rdzv.py */
	{ "ssh-serve", cmd_ssh_serve, NULL },     /* an ssh endpoint's sidecar (endpoint/ssh.h) */
	{ "ssh-session", cmd_ssh_session, NULL }, /* its sshd's ForceCommand */                       /* a Slurm job's hub, after run's terminal closed */
};

void cmd_each(void (*fn)(void *arg, const char *name, const char *help), void *arg)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (commands[i].help)
			fn(arg, commands[i].name, commands[i].help);
}

static void usage(FILE *out)
{
	fprintf(out, "usage: trainctl <command> [options]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (commands[i].help)
			fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].help);
	fprintf(out, "\n'trainctl <command> --help' describes one command.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *name = argv[1];
	if (!strcmp(name, "--help") || !strcmp(name, "-h") || !strcmp(name, "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(name, "--version") || !strcmp(name, "version")) {
		printf("trainctl %s\n", TRAINCTL_VERSION);
		return 0;
	}
	const struct command *cmd = NULL;
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(commands[i].name, name))
			cmd = &commands[i];
	if (!cmd) {
		const char *names[sizeof(commands) / sizeof(commands[0])];
		for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
			names[i] = commands[i].help ? commands[i].name : NULL; /* hidden ones: no */
		const char *best = cmd_nearest(name, names, sizeof(names) / sizeof(names[0]));
		if (best) {
			fprintf(stderr, "trainctl: '%s' is not a command (did you mean '%s'?)\n", name, best);
			return 2;
		}
		fprintf(stderr, "trainctl: '%s' is not a command\n", name);
		usage(stderr);
		return 2;
	}
	opterr = 0; /* the commands name a refused flag themselves (cmd_bad_option) */

	char *home = trainctl_home();
	if (!home) {
		fprintf(stderr, "trainctl: no state folder: set TRAINCTL_HOME or HOME\n");
		return 2;
	}
	struct cmd_ctx ctx = { home, 0 };
	struct tc_err err = TC_ERR_INIT;
	int rc = cmd->fn(argc - 1, argv + 1, &ctx, &err);
	int status = rc ? tc_exit_status(rc) : ctx.exit_status;
	if (rc)
		fprintf(stderr, "trainctl: %s\n", err.msg ? err.msg : tc_code_name(rc));
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "trainctl: cannot write to standard output: %s\n", strerror(errno));
		if (!status)
			status = 3;
	}
	tc_err_release(&err);
	free(home);
	return status;
}
