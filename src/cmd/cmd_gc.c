/*
 * cmd_gc.c -- `trainctl gc --older-than AGE [--dry-run]`: remove finished
 * jobs that ended longer ago than AGE, rows and run folder (jobs_gc).
 */
#include "cmd/cmd.h"
#include "jobs/usage.h"

#include "core/util.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>

static const char usage[] =
	"usage: trainctl gc --older-than AGE [--dry-run] [--json]\n\n"
	"Removes the finished jobs (succeeded, failed, killed, lost) of the state folder\n"
	"that ended more than AGE ago: their rows and their run folders, as `delete`\n"
	"does, and nothing else.  A job that is queued, running or paused is never\n"
	"touched.  Usage records stay (`trainctl usage`).  One line per job removed.\n\n"
	"  --older-than AGE   30d, 12h, 90m, 2w (s, m, h, d, w)\n"
	"  --dry-run          say what would be removed; remove nothing\n"
	"  --json             the jobs as a JSON array of {id, name, state, ended, run_dir}\n";

static const char *field(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "-";
}

int cmd_gc(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		{ "older-than", required_argument, NULL, 'a' },
		{ "dry-run", no_argument, NULL, 'n' },
		CMD_OPT_JSON,
		CMD_OPT_HELP,
		CMD_OPT_END,
	};
	const char *age = NULL;
	bool dry = false, as_json = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (cmd_common_flag(c, &as_json, NULL))
			continue;
		switch (c) {
		case 'a': age = optarg; break;
		case 'n': dry = true; break;
		case 'h': fputs(usage, stdout); return 0;
		default: return cmd_bad_option("gc", "h", argc, argv, opts, err);
		}
	}
	if (optind < argc)
		return tc_error(err, TC_EUSAGE, "gc: unexpected argument '%s'", argv[optind]);
	double secs;
	if (!age)
		return tc_error(err, TC_EUSAGE, "gc: --older-than AGE is required (30d, 12h, ...)");
	if (!usage_parse_age(age, &secs))
		return tc_error(err, TC_EUSAGE, "gc: --older-than takes an age such as 30d, 12h or"
				" 90m, not '%s'", age);
	struct store *st;
	int rc = store_open(ctx->home, &st, err);
	if (rc)
		return rc;
	json_t *gone = NULL;
	rc = jobs_gc(st, now_wall() - secs, dry, NULL, &gone, err);
	store_close(st);
	/* what was removed is said even when a later job stopped the walk */
	size_t i, n = json_array_size(gone);
	json_t *j;
	if (as_json) {
		json_dumpf(gone, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		fputc('\n', stdout);
	} else {
		json_array_foreach(gone, i, j)
			printf("%s %s (%s, %s, ended %s) %s\n", dry ? "would remove" : "removed",
			       field(j, "id"), field(j, "name"), field(j, "state"), field(j, "ended"),
			       field(j, "run_dir"));
		if (!rc && !n)
			printf("nothing to remove: no finished job ended more than %s ago\n", age);
		else if (!rc)
			printf("%s %zu job%s\n", dry ? "would remove" : "removed", n, n == 1 ? "" : "s");
	}
	json_decref(gone);
	return rc;
}
