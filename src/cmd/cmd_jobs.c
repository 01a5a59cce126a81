/*
 * cmd_jobs.c -- the verbs that go through `trainctl server`: submit, stop,
 * pause, resume, clone, delete, and ps / show / logs when a server is
 * configured (--server URL or $TRAINCTL_SERVER; token in $TRAINCTL_TOKEN).
 * Without a server, `stop` goes through the job's backend here (jobs.h:
 * SIGTERM to its supervisor, or scancel) and the others say that they need
 * one.
 */
#include "backend/backend.h"
#include "cmd/cmd.h"
#include "core/enc.h"
#include "jobs/jobs.h"
#include "spec/spec.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "server/server.h"
#include "cmd/client.h"
#include "store/store.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- submit ---- */

int cmd_submit(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		CMD_OPT_SERVER,
		{ "name", required_argument, NULL, 'N' },
		CMD_OPT_JSON,
		{ "set", required_argument, NULL, 's' },
		{ "team", required_argument, NULL, 't' },
		CMD_OPT_HELP,
		CMD_OPT_END,
	};
	const char *server = NULL, *name = NULL, *team = NULL;
	bool as_json = false;
	json_t *sets = json_array();
	int c, rc;
	(void)ctx;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (cmd_common_flag(c, &as_json, &server))
			continue;
		switch (c) {
		case 'N': name = optarg; break;
		case 't': team = optarg; break;
		case 's':
			/* its form here; the server checks it against the spec */
			if ((rc = spec_set_check(optarg, err))) {
				json_decref(sets);
				return rc;
			}
			json_array_append_new(sets, json_string(optarg));
			break;
		case 'h':
			json_decref(sets);
			fputs("usage: trainctl submit SPEC.yaml [--server URL] [--name NAME] [--set KEY=VALUE]... [--team TEAM] [--json]\n"
			      "\nQueues the job on the server ($TRAINCTL_SERVER, token $TRAINCTL_TOKEN)"
			      " and prints its id.\n--set overrides a spec key by its dotted path"
			      " (args.lr=0.1; docs/spec.md).\n--team: the team whose devices it uses"
			      " (a member of one team needs no flag; docs/server.md).\n", stdout);
			return 0;
		default:
			json_decref(sets);
			return cmd_bad_option("submit", "h", argc, argv, opts, err);
		}
	}
	if (optind + 1 != argc) {
		json_decref(sets);
		return tc_error(err, TC_EUSAGE, "submit: give one spec file");
	}
	struct sbuf text = SBUF_INIT;
	rc = read_file(argv[optind], &text, err);
	if (rc) {
		rc = tc_error(err, TC_ESPEC, "%s", err->msg);
		goto out;
	}
	json_t *extra = json_object();
	if (name)
		json_object_set_new(extra, "name", json_string(name));
	if (team)
		json_object_set_new(extra, "team", json_string(team));
	if (json_array_size(sets))
		json_object_set(extra, "set", sets);
	rc = cmd_post_file(server, "/api/v1/jobs", "spec", argv[optind], text.buf, text.len, extra,
			   as_json, err);
out:
	json_decref(sets);
	sbuf_release(&text);
	return rc;
}

int cmd_post_file(const char *server, const char *path, const char *key, const char *file,
		  const char *text, size_t len, json_t *extra, bool as_json, struct tc_err *err)
{
	struct sbuf resp = SBUF_INIT;
	struct client *cl = NULL;
	char *abs = path_absolute(file, NULL);
	char *base = path_dirname(abs);
	json_t *body = json_pack("{s:s%, s:s, s:s}", key, text, len, "file", file, "base", base);
	if (body && extra)
		json_object_update(body, extra);
	json_decref(extra);
	char *b = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	free(abs);
	free(base);
	if (!b)
		return tc_error(err, TC_ESPEC, "%s: not UTF-8 text", file);
	int rc = client_open(server, &cl, err);
	if (!rc)
		rc = client_json(cl, "POST", path, b, &resp, err);
	free(b);
	if (!rc && as_json) {
		fwrite(resp.buf, 1, resp.len, stdout);
		fputc('\n', stdout);
	} else if (!rc) {
		json_t *o = json_loadb(resp.buf, resp.len, 0, NULL);
		const char *id = json_string_value(json_object_get(o, "id"));
		printf("%s\n", id ? id : "?");
		json_decref(o);
	}
	client_close(cl);
	sbuf_release(&resp);
	return rc;
}

/* ---- stop, pause, resume, clone, delete ---- */

static void print_line(void *arg, const char *line)
{
	(void)arg;
	printf("%s\n", line);
	fflush(stdout); /* before a Slurm job's grace time is waited out */
}

/* `trainctl stop` without a server: through the job's backend, here. */
static int stop_here(const char *home, const char *ref, struct tc_err *err)
{
	struct backend_env env = { .home = home, .say = print_line, .say_arg = NULL };
	struct store *st = NULL;
	struct job_row j = { 0 };
	int rc = store_open(home, &st, err);
	if (!rc)
		rc = store_job_get(st, ref, &j, err);
	if (!rc)
		rc = backend_reconcile(st, &j, err);
	if (!rc)
		rc = jobs_stop(&env, st, &j, JOB_STOP_NONE, err);
	job_row_release(&j);
	store_close(st);
	return rc;
}

static int job_verb(const char *verb, int argc, char **argv, struct cmd_ctx *ctx,
		    struct tc_err *err)
{
	static const struct option opts[] = {
		CMD_OPT_SERVER,
		CMD_OPT_JSON,
		{ "set", required_argument, NULL, 's' },
		CMD_OPT_HELP,
		CMD_OPT_END,
	};
	const char *server = NULL;
	bool as_json = false, clone = !strcmp(verb, "clone");
	json_t *sets = json_array();
	int c, rc;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (cmd_common_flag(c, &as_json, &server))
			continue;
		switch (c) {
		case 's':
			if (!clone)
				rc = tc_error(err, TC_EUSAGE, "%s: --set is for run, submit and clone", verb);
			else
				rc = spec_set_check(optarg, err);
			if (rc) {
				json_decref(sets);
				return rc;
			}
			json_array_append_new(sets, json_string(optarg));
			break;
		case 'h':
			json_decref(sets);
			printf("usage: trainctl %s JOB [--server URL]%s [--json]\n", verb,
			       clone ? " [--set KEY=VALUE]..." : "");
			return 0;
		default:
			json_decref(sets);
			return cmd_bad_option(verb, "h", argc, argv, opts, err);
		}
	}
	if (optind + 1 != argc) {
		json_decref(sets);
		return tc_error(err, TC_EUSAGE, "%s: give one job", verb);
	}
	const char *ref = argv[optind];
	/* clone's overrides, in its body (api_clone_parse) */
	json_t *bo = json_pack("{s:O}", "set", sets);
	char *body = json_array_size(sets) && bo ? json_dumps(bo, JSON_COMPACT) : NULL;
	json_decref(bo);
	json_decref(sets);
	if (!server && !client_configured(argc, argv)) {
		free(body);
		if (!strcmp(verb, "stop"))
			return stop_here(ctx->home, ref, err);
		return tc_error(err, TC_EUSAGE,
				"%s: needs `trainctl server` (give --server URL or set TRAINCTL_SERVER)", verb);
	}
	struct client *cl = NULL;
	struct sbuf path = SBUF_INIT, resp = SBUF_INIT;
	sbuf_adds(&path, "/api/v1/jobs/");
	url_encode(&path, ref, false);
	if (strcmp(verb, "delete") != 0)
		sbuf_addf(&path, "/%s", verb);
	rc = client_open(server, &cl, err);
	if (!rc)
		rc = client_json(cl, !strcmp(verb, "delete") ? "DELETE" : "POST", path.buf,
				 body ? body : "{}", &resp, err);
	free(body);
	if (!rc) {
		json_t *o = json_loadb(resp.buf, resp.len, 0, NULL);
		if (as_json) {
			fwrite(resp.buf, 1, resp.len, stdout);
			fputc('\n', stdout);
		} else if (!strcmp(verb, "clone")) {
			printf("%s\n", json_string_value(json_object_get(o, "id")));
		} else {
			printf("%s: %s\n", json_string_value(json_object_get(o, "id")), verb);
		}
		json_decref(o);
	}
	client_close(cl);
	sbuf_release(&path);
	sbuf_release(&resp);
	return rc;
}

int cmd_stop(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	return job_verb("stop", argc, argv, ctx, err);
}

int cmd_pause(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	return job_verb("pause", argc, argv, ctx, err);
}

int cmd_resume(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	return job_verb("resume", argc, argv, ctx, err);
}

int cmd_clone(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	return job_verb("clone", argc, argv, ctx, err);
}

int cmd_delete(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	return job_verb("delete", argc, argv, ctx, err);
}
