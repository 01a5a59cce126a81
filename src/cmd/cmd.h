/*
 * cmd.h -- the subcommands (git's builtin.h).  Each cmd_* parses its own
 * flags, calls one library module and prints.  It returns 0 or a negative
 * TC_E* code with err filled; main.c prints the message and picks the exit
 * status.  A command that wants a specific exit status without a message
 * (e.g. the job's own result) sets *exit_status.
 */
#ifndef TC_CMD_H
#define TC_CMD_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "core/err.h"

struct cmd_ctx {
	const char *home;  /* $TRAINCTL_HOME, resolved */
	int exit_status;   /* used when the command returns 0; default 0 */
};

typedef int (*cmd_fn)(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);

int cmd_run(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_ps(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_show(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_logs(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_devices(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_doctor(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_plan(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_metrics(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_export(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_sync(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_ckpt(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_compare(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_sweep(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_report(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_zoo(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_endpoints(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
/* cmd_server.c, cmd_jobs.c: trainctl server and the verbs that use it */
int cmd_server(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_token(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_supervise(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
/* cmd_secret.c: trainctl secret set|list|rm (local store, or the server's) */
int cmd_secret(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
/* cmd_slurm.c: backend: slurm's batch driver and node supervisor (not typed) */
int cmd_slurm_batch(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_supervise_node(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_supervise_spare(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_hub(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_rdzv_sim(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_submit(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_team(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_queue(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_stop(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_pause(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_resume(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_clone(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_delete(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
/*
 * cmd_jobs.c, for submit and sweep --server: POST FILE's text to the server
 * at `path` as {KEY: text, "file": FILE, "base": FILE's folder} plus the
 * fields of `extra` (may be NULL; its reference is taken), then print the
 * answer: whole with as_json, else its "id".
 */
int cmd_post_file(const char *server, const char *path, const char *key, const char *file,
		  const char *text, size_t len, json_t *extra, bool as_json, struct tc_err *err);
/*
 * source_remote.c: the job source a read verb asks (source/source.h): the
 * server's (--server's value, else $TRAINCTL_SERVER) when one is
 * configured, else the local one of home.  The verb parses its flags once,
 * --server among them, and reads the same way through either.
 */
struct job_source;
int cmd_source_open(const char *home, const char *server, int argc, char **argv,
		    struct job_source **out, struct tc_err *err);
/* a read verb's --rank R past the job's ranks: TC_EUSAGE naming them ("logs", "metrics") */
int cmd_check_rank(const char *verb, const char *id, long rank, long world, struct tc_err *err);
/*
 * cmd_opts.c: flags.  cmd_dashdash: the index of the first "--" in argv,
 * or argc (options are parsed before it, with getopt's permutation, so they
 * may follow a spec file).  cmd_bad_option: the TC_EUSAGE for a flag
 * getopt_long refused (its return '?'), naming it, with a did-you-mean
 * among opts ("run: unknown option '--quite' (did you mean '--quiet'?)");
 * -n, which is `logs --tail` only, names the long flag it once stood for
 * (--nproc, --name, --dry-run, --count) where opts has it.
 * cmd_nearest: the name of names nearest word (few edits), or NULL.
 */
struct option;
int cmd_dashdash(int argc, char **argv);
/*
 * The flags many verbs share, one row each (git's OPT__QUIET and friends):
 * a verb puts these rows in its table where the flag stood, and hands each
 * getopt answer to cmd_common_flag first.  It takes --json (into *json) and
 * --server (into *server) where the verb passes the place, and returns
 * true; NULL where the verb has no such flag (the letter may be its own)
 * or reads it itself (ps: --json is a --format).  --help stays the verb's
 * `case 'h'`, as only the verb knows its usage.
 */
#define CMD_OPT_JSON { "json", no_argument, NULL, 'j' }
#define CMD_OPT_SERVER { "server", required_argument, NULL, 'S' }
#define CMD_OPT_HELP { "help", no_argument, NULL, 'h' }
#define CMD_OPT_END { NULL, 0, NULL, 0 }
bool cmd_common_flag(int c, bool *json, const char **server);
int cmd_bad_option(const char *cmd, const char *shorts, int argc, char **argv,
		   const struct option *opts, struct tc_err *err);
const char *cmd_nearest(const char *word, const char *const *names, size_t n);
/* cmd_exec.c: `trainctl exec`; cmd_ssh.c: `trainctl ssh` and the ssh endpoint's helpers (not typed) */
int cmd_exec(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_ssh(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_ssh_serve(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_ssh_session(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
/*
 * The JSON form of job ref (jobs_show, or the server's GET /api/v1/jobs/REF
 * when client_configured(argc, argv)); a new reference in *out.
 */
int cmd_job_json(int argc, char **argv, const char *server, const char *home, const char *ref,
		 json_t **out, struct tc_err *err);
/* cmd_metrics.c: s as one CSV field (quoted when it holds a comma, quote or line break) */
struct sbuf;
void cmd_add_csv(struct sbuf *sb, const char *s);
/* seconds as "42s" (tenths under a minute), "5m", "3h", "2d": an age (ps, queue) */
void cmd_add_age(struct sbuf *sb, double d);
/* cmd_usage.c: `trainctl usage`; cmd_gc.c: `trainctl gc` */
int cmd_usage(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
int cmd_gc(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
/* cmd_completion.c: `trainctl completion bash|zsh` */
int cmd_completion(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err);
/* main.c: each command a user types (hidden ones left out), in the table's order */
void cmd_each(void (*fn)(void *arg, const char *name, const char *help), void *arg);
/* cmd_show.c: a job's JSON (jobs_show, local or from the server) as --json or text */
void show_print(json_t *job, bool as_json);

#endif
