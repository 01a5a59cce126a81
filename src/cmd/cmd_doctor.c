/* cmd_doctor.c -- `trainctl doctor [--fix] [--json]`: check the state folder (jobs/doctor.h) */
#include "cmd/cmd.h"
#include "jobs/doctor.h"

#include "core/json.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>

static const char usage[] =
	"usage: trainctl doctor [--fix] [--json]\n\n"
	"Checks the state folder ($TRAINCTL_HOME): the database (integrity, schema), the\n"
	"permissions of the folder, the database and each run folder's job.env and spec,\n"
	"jobs marked running whose supervisor is gone, stale device leases, and run\n"
	"folders without a job (and jobs without their folder).  One line per finding:\n"
	"what is wrong and what --fix does.\n\n"
	"  --fix   repair what is safe: chmod what is ours, record gone jobs lost, drop\n"
	"          stale leases, migrate an older schema; never deletes a run folder or a\n"
	"          row of a damaged database\n"
	"  --json  the findings as a JSON array of {kind, path, job, message, fixed}\n\n"
	"Exit status: 0 nothing wrong (or all repaired), 1 a problem remains, 2 bad usage.\n";

static void print_json(const struct doctor_report *r)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < r->nr; i++) {
		const struct doctor_finding *f = &r->v[i];
		json_t *o = json_object();
		json_object_set_new(o, "kind", json_string(doctor_kind_name(f->kind)));
		json_object_set_new(o, "path", json_string_or_null(f->path));
		json_object_set_new(o, "job", json_string_or_null(f->job));
		json_object_set_new(o, "message", json_string(f->message));
		json_object_set_new(o, "fixed", json_boolean(f->fixed));
		json_array_append_new(arr, o);
	}
	json_dumpf(arr, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	fputc('\n', stdout);
	json_decref(arr);
}

static void print_text(const struct doctor_report *r, const char *home, bool fix)
{
	for (size_t i = 0; i < r->nr; i++) {
		const struct doctor_finding *f = &r->v[i];
		if (f->path)
			printf("%s: %s: %s\n", doctor_kind_name(f->kind), f->path, f->message);
		else if (f->job)
			printf("%s: job %s: %s\n", doctor_kind_name(f->kind), f->job, f->message);
		else
			printf("%s: %s\n", doctor_kind_name(f->kind), f->message);
	}
	size_t left = doctor_unfixed(r);
	if (!r->nr)
		printf("ok: nothing wrong in %s\n", home);
	else if (!left)
		printf("ok: %zu repaired in %s\n", r->nr, home);
	else if (fix)
		printf("%zu problem%s left in %s (%zu repaired)\n", left, left == 1 ? "" : "s", home,
		       r->nr - left);
	else /* each line says whether --fix repairs it */
		printf("%zu problem%s in %s\n", left, left == 1 ? "" : "s", home);
}

int cmd_doctor(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		{ "fix", no_argument, NULL, 'f' },
		CMD_OPT_JSON,
		CMD_OPT_HELP,
		CMD_OPT_END,
	};
	bool as_json = false, fix = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (cmd_common_flag(c, &as_json, NULL))
			continue;
		switch (c) {
		case 'f': fix = true; break;
		case 'h': fputs(usage, stdout); return 0;
		default: return cmd_bad_option("doctor", "h", argc, argv, opts, err);
		}
	}
	if (optind < argc)
		return tc_error(err, TC_EUSAGE, "doctor: unexpected argument '%s' (it checks"
				" $TRAINCTL_HOME, %s)", argv[optind], ctx->home);
	struct doctor_report r = DOCTOR_REPORT_INIT;
	int rc = doctor_check(ctx->home, fix, &r, err);
	if (!rc) {
		if (as_json)
			print_json(&r);
		else
			print_text(&r, ctx->home, fix);
		ctx->exit_status = doctor_unfixed(&r) ? 1 : 0;
	}
	doctor_report_release(&r);
	return rc;
}
