/*
 * cmd_ssh.c -- `trainctl ssh JOB [--rank R] [--name NAME] [-- SSH_ARGS]`,
 * and the ssh endpoint's two helpers that nobody types (endpoint/ssh.h):
 * `ssh-serve` (the sidecar: files, then sshd) and `ssh-session` (sshd's
 * ForceCommand: the session in the rank's worker environment).
 */
#include "cmd/cmd.h"
#include "core/proc.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "endpoint/ssh.h"
#include "jobs/exec.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char ssh_usage[] =
	"usage: trainctl ssh JOB [--rank R] [--name NAME] [--server URL] [-- SSH_ARGS]\n"
	"\n"
	"Log in to a running job through its ssh endpoint (endpoints: [{kind: ssh}]):\n"
	"a shell, or the command in SSH_ARGS, in the rank's worker environment.\n"
	"The job's own host key is checked.  Works on the job's host only.\n"
	"\n"
	"  -r, --rank R      the rank whose environment the session gets (default 0)\n"
	"      --name NAME   the endpoint's name (default: the job's first ssh endpoint)\n"
	"      --server URL  find the job on this server ($TRAINCTL_SERVER)\n"
	"  SSH_ARGS          ssh's options (-i KEY, -t, ...), then a remote command\n";

/* The name of job's first ssh endpoint in its spec, or "ssh". */
static const char *ssh_endpoint_name(json_t *job)
{
	json_t *eps = json_object_get(json_object_get(job, "spec"), "endpoints"), *e;
	size_t i;
	json_array_foreach(eps, i, e) {
		if (json_is_string(e) && !strcmp(json_string_value(e), "ssh"))
			return "ssh";
		const char *kind = json_string_value(json_object_get(e, "kind"));
		const char *name = json_string_value(json_object_get(e, "name"));
		if (kind && !strcmp(kind, "ssh"))
			return name ? name : "ssh";
	}
	return "ssh";
}

/* Run argv with our environment and terminal; *status: its exit status (128 + signal). */
static int run_ours(const struct strvec *argv, int *status, struct tc_err *err)
{
	struct proc p = PROC_INIT;
	strvec_pushv(&p.args, (const char *const *)argv->v);
	proc_env_inherit(&p.env);
	p.default_sigs = PROC_SIG(SIGINT) | PROC_SIG(SIGQUIT) | PROC_SIG(SIGPIPE);
	struct sigaction ign = { .sa_handler = SIG_IGN }, old_int, old_quit;
	sigemptyset(&ign.sa_mask);
	/* the terminal's ^C is the child's to act on (ssh passes it on) */
	sigaction(SIGINT, &ign, &old_int);
	sigaction(SIGQUIT, &ign, &old_quit);
	int ws = 0, rc = proc_start(&p, err);
	if (!rc)
		rc = proc_wait(&p, &ws, err);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGQUIT, &old_quit, NULL);
	if (!rc) {
		struct proc_exit x = proc_exit_of(ws);
		*status = x.exited ? x.code : 128 + x.sig;
	}
	proc_clear(&p);
	return rc;
}

int cmd_ssh(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		{ "rank", required_argument, NULL, 'r' },
		{ "name", required_argument, NULL, 'N' },
		CMD_OPT_SERVER,
		CMD_OPT_HELP,
		CMD_OPT_END,
	};
	const char *server = NULL, *name = NULL;
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
				return tc_error(err, TC_EUSAGE, "ssh: --rank must be a rank number, not '%s'", optarg);
			break;
		case 'N': name = optarg; break;
		case 'h': fputs(ssh_usage, stdout); return 0;
		default: return cmd_bad_option("ssh", "r:h", argc, argv, opts, err);
		}
	}
	if (optind + 1 != dashdash)
		return tc_error(err, TC_EUSAGE, "ssh: give one job (ssh's own arguments after --)");
	json_t *job = NULL;
	struct ssh_where w = { 0 };
	struct sbuf dir = SBUF_INIT;
	struct strvec args = STRVEC_INIT;
	pid_t pid;
	int rc = cmd_job_json(argc, argv, server, ctx->home, argv[optind], &job, err);
	if (rc || (rc = exec_pick_worker(job, rank, &pid, NULL, err)))
		goto out;
	const char *id = json_string_value(json_object_get(job, "id"));
	const char *run_dir = json_string_value(json_object_get(job, "run_dir"));
	if (!name)
		name = ssh_endpoint_name(job);
	if (!run_dir) {
		rc = tc_error(err, TC_EBACKEND, "ssh: the job's record has no run folder");
		goto out;
	}
	sbuf_addf(&dir, "%s/endpoints/%s", run_dir, name);
	struct tc_err e2 = TC_ERR_INIT;
	if (ssh_where_read(dir.buf, &w, &e2)) {
		rc = tc_error(err, TC_EUSAGE,
			      "ssh: job %s has no ssh endpoint '%s' running on this host (%s); give the job "
			      "endpoints: [{kind: ssh}], and run trainctl ssh on the job's host",
			      id, name, e2.msg);
		tc_err_release(&e2);
		goto out;
	}
	/* the job's account wrote ssh.json: its host, user and port are checked, not trusted */
	if ((rc = ssh_where_check(&w, id, json_string_value(json_object_get(job, "user")), err)))
		goto out;
	int first = dashdash < argc ? dashdash + 1 : argc;
	ssh_client_argv(dir.buf, &w, (int)rank, argv + first, argc - first, &args);
	rc = run_ours(&args, &ctx->exit_status, err);
out:
	strvec_clear(&args);
	ssh_where_release(&w);
	sbuf_release(&dir);
	json_decref(job);
	return rc;
}

/* "PID:TICKS" of --supervisor. */
static bool parse_supervisor(const char *s, pid_t *pid, unsigned long long *ticks)
{
	const char *colon = strchr(s, ':');
	long p;
	char *end;
	if (!colon)
		return false;
	char head[32];
	size_t n = (size_t)(colon - s);
	if (n == 0 || n >= sizeof(head))
		return false;
	memcpy(head, s, n);
	head[n] = '\0';
	if (!parse_long(head, 1, INT_MAX, &p))
		return false;
	errno = 0;
	*ticks = strtoull(colon + 1, &end, 10);
	*pid = (pid_t)p;
	return !errno && end != colon + 1 && !*end;
}

/* `trainctl ssh-serve --dir D --port P --job ID --supervisor PID:TICKS [--listen A] [--public-key K]` */
int cmd_ssh_serve(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "port", required_argument, NULL, 'p' },
		{ "listen", required_argument, NULL, 'l' },
		{ "job", required_argument, NULL, 'j' },
		{ "supervisor", required_argument, NULL, 's' },
		{ "public-key", required_argument, NULL, 'k' },
		CMD_OPT_END,
	};
	struct ssh_serve o = { .listen = "127.0.0.1" };
	long port = 0;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd': o.dir = optarg; break;
		case 'p':
			if (!parse_long(optarg, 1, 65535, &port))
				return tc_error(err, TC_EUSAGE, "ssh-serve: --port must be a port, not '%s'", optarg);
			break;
		case 'l': o.listen = optarg; break;
		case 'j': o.job_id = optarg; break;
		case 's':
			if (!parse_supervisor(optarg, &o.sup_pid, &o.sup_ticks))
				return tc_error(err, TC_EUSAGE, "ssh-serve: --supervisor takes PID:TICKS");
			break;
		case 'k': o.public_key = optarg; break;
		default: return cmd_bad_option("ssh-serve", "", argc, argv, opts, err);
		}
	}
	if (!o.dir || !port || !o.job_id || !o.sup_pid || optind != argc)
		return tc_error(err, TC_EUSAGE, "ssh-serve: give --dir, --port, --job and --supervisor");
	o.port = (int)port;
	char *self = path_self_exe();
	if (!self)
		return tc_error_errno(err, TC_ESYS, "ssh-serve: cannot find this program");
	o.self_exe = self;
	struct proc p = PROC_INIT;
	int rc = ssh_serve_prepare(&o, &p.args, err);
	if (!rc) {
		proc_env_inherit(&p.env);
		p.death_sig = SIGTERM; /* sshd goes with us: the job's stop reaches both */
		p.wait_exec = true;
		int ws = 0;
		rc = proc_start(&p, err);
		if (!rc)
			rc = proc_wait(&p, &ws, err);
		if (!rc) {
			struct proc_exit x = proc_exit_of(ws);
			ctx->exit_status = x.exited ? x.code : 128 + x.sig;
		}
	}
	proc_clear(&p);
	free(self);
	return rc;
}

/* `trainctl ssh-session --job ID --supervisor PID:TICKS`: sshd's ForceCommand */
int cmd_ssh_session(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		{ "job", required_argument, NULL, 'j' },
		{ "supervisor", required_argument, NULL, 's' },
		CMD_OPT_END,
	};
	const char *job = NULL;
	pid_t sup = 0;
	unsigned long long ticks = 0;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'j': job = optarg; break;
		case 's':
			if (!parse_supervisor(optarg, &sup, &ticks))
				return tc_error(err, TC_EUSAGE, "ssh-session: --supervisor takes PID:TICKS");
			break;
		default: return cmd_bad_option("ssh-session", "", argc, argv, opts, err);
		}
	}
	if (!job || !sup || optind != argc)
		return tc_error(err, TC_EUSAGE, "ssh-session: give --job and --supervisor");
	long rank = 0;
	const char *r = getenv(SSH_RANK_ENV);
	if (r && *r && !parse_long(r, 0, 1 << 20, &rank))
		return tc_error(err, TC_EUSAGE, "ssh: %s must be a rank number, not '%s'", SSH_RANK_ENV, r);
	if (!proc_alive(sup, ticks))
		return tc_error(err, TC_EUSAGE, "ssh: job %s has ended", job);
	struct exec_target t = EXEC_TARGET_INIT;
	struct strvec cmd = STRVEC_INIT, extra = STRVEC_INIT;
	pid_t pid;
	struct strvec runtime = STRVEC_INIT; /* a job in an image: the runtime's exec first */
	struct tc_err e2 = TC_ERR_INIT;
	int rc = exec_find_child(sup, job, (int)rank, &pid, err);
	if (!rc) {
		rc = exec_target_read(pid, job, (int)rank, &t, err);
	} else if (!exec_find_container_child(sup, job, (int)rank, &pid, &e2)) {
		rc = exec_container_client(pid, job, (int)rank, isatty(STDIN_FILENO), &t, &runtime, err);
	}
	tc_err_release(&e2);
	if (rc)
		goto out;
	/* the session's own variables go over the worker's */
	static const char *const session_vars[] = { "TERM", "SSH_CLIENT", "SSH_CONNECTION", "SSH_TTY",
						    "SSH_AUTH_SOCK", "SSH_ORIGINAL_COMMAND" };
	for (size_t i = 0; i < sizeof(session_vars) / sizeof(session_vars[0]); i++) {
		const char *v = getenv(session_vars[i]);
		if (v)
			strvec_pushf(&extra, "%s=%s", session_vars[i], v);
	}
	struct passwd *pw = getpwuid(getuid());
	const char *shell = pw && pw->pw_shell && *pw->pw_shell ? pw->pw_shell : "/bin/sh";
	const char *remote = getenv("SSH_ORIGINAL_COMMAND");
	strvec_pushv(&cmd, (const char *const *)runtime.v);
	/* in a container, its user's shell is unknown here: sh */
	strvec_push(&cmd, runtime.nr ? "/bin/sh" : shell);
	if (remote) {
		strvec_push(&cmd, "-c");
		strvec_push(&cmd, remote);
	} else if (isatty(STDIN_FILENO)) {
		strvec_push(&cmd, "-i");
	}
	struct exec_opts o = { (const char *const *)extra.v, sup, ticks };
	rc = exec_run(&t, cmd.v, &o, &ctx->exit_status, err);
out:
	exec_target_release(&t);
	strvec_clear(&runtime);
	strvec_clear(&cmd);
	strvec_clear(&extra);
	return rc;
}
