/*
 * cmd_ps.c -- `trainctl ps [-a] [--state S] [--user U] [--format F] [-o COLS]`:
 * jobs, newest first, from this machine's store or from the server
 * (remote_ps_list).  Either way the jobs are job_to_json's brief objects and
 * one printer turns them into the same columns.
 */
#include "backend/backend.h"
#include "cmd/cmd.h"
#include "core/enc.h"
#include "jobs/jobs.h"
#include "server/server.h"
#include "cmd/client.h"
#include "core/sbuf.h"
#include "core/strvec.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "source/source.h"
#include "store/store.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char usage[] =
	"usage: trainctl ps [-a] [--state S[,S]] [--user U] [--format table|csv|json] [-o COLS]\n"
	"                   [--server URL]\n"
	"\n"
	"  -a, --all           every job (default: active jobs and the newest)\n"
	"      --state S[,S]   only jobs in these states (queued, running, failed, ...)\n"
	"      --user U        only jobs of user U\n"
	"      --format F      table (default), csv (a header line, then one line a job)\n"
	"                      or json (one array of the jobs' objects)\n"
	"      --json          --format json\n"
	"  -o, --columns COLS  the columns, comma separated (table and csv), from:\n"
	"                      id name user state age start duration devices workers\n"
	"                      restarts prio exit cause result\n"
	"                      default: id,name,user,state,age,duration,devices,restarts,result\n"
	"      --server URL    the server's jobs ($TRAINCTL_SERVER)\n";

#define DEFAULT_COLUMNS "id,name,user,state,age,duration,devices,restarts,result"

/* ---- the cells of one job, as text ---- */

static const char *jstr(json_t *o, const char *k)
{
	const char *v = json_string_value(json_object_get(o, k));
	return v ? v : "";
}

static long long jint(json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

/* seconds as "4.2s", "5m07s", "3h12m": a duration */
static void add_duration(struct sbuf *sb, double d)
{
	if (d < 0)
		d = 0;
	if (d < 60)
		sbuf_addf(sb, "%.1fs", d);
	else if (d < 3600)
		sbuf_addf(sb, "%dm%02ds", (int)d / 60, (int)d % 60);
	else
		sbuf_addf(sb, "%dh%02dm", (int)d / 3600, ((int)d % 3600) / 60);
}

/* the first line of a root cause, at most max characters ("..." when cut) */
static void add_short(struct sbuf *sb, const char *text, size_t max)
{
	size_t n = strcspn(text, "\n");
	if (n > max)
		sbuf_addf(sb, "%.*s...", (int)(max - 3), text);
	else
		sbuf_add(sb, text, n);
}

static bool ended(json_t *j)
{
	return json_is_number(json_object_get(j, "ended"));
}

/* a succeeded job's root cause is no cause (the last words of its workers) */
static bool succeeded(json_t *j)
{
	const char *s = jstr(j, "state");
	enum job_state st;
	return job_state_parse(s, strlen(s), &st) && st == JOB_SUCCEEDED;
}

/* what a cell is computed against; a cell with nothing to say stays empty */
struct ps_ctx {
	double now;
	bool full; /* csv: causes not shortened */
};

typedef void (*cell_fn)(json_t *j, const struct ps_ctx *x, struct sbuf *out);

static void c_id(json_t *j, const struct ps_ctx *x, struct sbuf *out)
{
	(void)x;
	sbuf_adds(out, jstr(j, "id"));
}

static void c_name(json_t *j, const struct ps_ctx *x, struct sbuf *out)
{
	(void)x;
	sbuf_adds(out, jstr(j, "name"));
}

static void c_user(json_t *j, const struct ps_ctx *x, struct sbuf *out)
{
	(void)x;
	sbuf_adds(out, jstr(j, "user"));
}

static void c_state(json_t *j, const struct ps_ctx *x, struct sbuf *out)
{
	(void)x;
	sbuf_adds(out, jstr(j, "state"));
}

static void c_age(json_t *j, const struct ps_ctx *x, struct sbuf *out)
{
	cmd_add_age(out, x->now - json_number_value(json_object_get(j, "created")));
}

static void c_start(json_t *j, const struct ps_ctx *x, struct sbuf *out)
{
	(void)x;
	json_t *t = json_object_get(j, "started");
	if (!json_is_number(t))
		return;
	time_t secs = (time_t)json_number_value(t);
	struct tm tm;
	char buf[32];
	if (!localtime_r(&secs, &tm) || !strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm)) {
		sbuf_adds(out, "?");
		return;
	}
	sbuf_adds(out, buf);
}

static void c_duration(json_t *j, const struct ps_ctx *x, struct sbuf *out)
{
	json_t *start = json_object_get(j, "started"), *end = json_object_get(j, "ended");
	if (json_is_number(start))
		add_duration(out, (json_is_number(end) ? json_number_value(end) : x->now) -
					  json_number_value(start));
}

static void c_devices(json_t *j, const struct ps_ctx *x, struct sbuf *out)
{
	(void)x;
	/* a job the server did not schedule holds no count: its workers are its devices */
	long long n = jint(j, "device_count");
	sbuf_addf(out, "%s:%lld", jstr(j, "device_type"), n > 0 ? n : jint(j, "workers"));
}

static void c_workers(json_t *j, const struct ps_ctx *x, struct sbuf *out)
{
	(void)x;
	sbuf_addf(out, "%lld", jint(j, "workers"));
}

static void c_restarts(json_t *j, const struct ps_ctx *x, struct sbuf *out)
{
	(void)x;
	sbuf_addf(out, "%lld", jint(j, "restarts"));
}

static void c_prio(json_t *j, const struct ps_ctx *x, struct sbuf *out)
{
	(void)x;
	sbuf_addf(out, "%lld", jint(j, "priority"));
}

static void c_exit(json_t *j, const struct ps_ctx *x, struct sbuf *out)
{
	(void)x;
	if (ended(j))
		sbuf_addf(out, "%lld", jint(j, "exit_code"));
}

static void c_cause(json_t *j, const struct ps_ctx *x, struct sbuf *out)
{
	const char *c = jstr(j, "root_cause");
	if (*c && !succeeded(j))
		add_short(out, c, x->full ? strlen(c) : 48);
}

/* "exit 0", or "exit 1: rank 1 exited with code 3" */
static void c_result(json_t *j, const struct ps_ctx *x, struct sbuf *out)
{
	if (!ended(j))
		return;
	sbuf_addf(out, "exit %lld", jint(j, "exit_code"));
	const char *c = jstr(j, "root_cause");
	if (*c && !succeeded(j)) {
		sbuf_adds(out, ": ");
		c_cause(j, x, out);
	}
}

static const struct column {
	const char *name, *title;
	cell_fn fn;
	bool right; /* numbers align right in the table */
} columns[] = {
	{ "id", "JOB", c_id, false },
	{ "name", "NAME", c_name, false },
	{ "user", "USER", c_user, false },
	{ "state", "STATE", c_state, false },
	{ "age", "AGE", c_age, true },
	{ "start", "START", c_start, false },
	{ "duration", "DURATION", c_duration, true },
	{ "devices", "DEVICES", c_devices, false },
	{ "workers", "WORKERS", c_workers, true },
	{ "restarts", "RESTARTS", c_restarts, true },
	{ "prio", "PRIO", c_prio, true },
	{ "exit", "EXIT", c_exit, true },
	{ "cause", "CAUSE", c_cause, false },
	{ "result", "RESULT", c_result, false },
};
#define NCOLUMNS (sizeof(columns) / sizeof(columns[0]))

/* "id,name,..." -> column indexes; TC_EUSAGE naming an unknown one */
static int parse_columns(const char *list, size_t **out, size_t *nr, struct tc_err *err)
{
	*out = NULL;
	*nr = 0;
	size_t alloc = 0;
	for (const char *p = list;;) {
		size_t len = strcspn(p, ",");
		size_t i;
		for (i = 0; i < NCOLUMNS; i++)
			if (strlen(columns[i].name) == len && !strncmp(columns[i].name, p, len))
				break;
		if (i == NCOLUMNS) {
			free(*out);
			*out = NULL;
			struct sbuf names = SBUF_INIT;
			for (size_t k = 0; k < NCOLUMNS; k++)
				sbuf_addf(&names, "%s%s", k ? ", " : "", columns[k].name);
			int rc = tc_error(err, TC_EUSAGE, "ps: '%.*s' is not a column (one of: %s)", (int)len,
					  p, names.buf);
			sbuf_release(&names);
			return rc;
		}
		XGROW(*out, *nr + 1, alloc);
		(*out)[(*nr)++] = i;
		if (!p[len])
			return 0;
		p += len + 1;
	}
}

static void csv_field(const char *v)
{
	if (!strpbrk(v, ",\"\n\r")) {
		fputs(v, stdout);
		return;
	}
	fputc('"', stdout);
	for (; *v; v++) {
		if (*v == '"')
			fputc('"', stdout);
		fputc(*v, stdout);
	}
	fputc('"', stdout);
}

enum ps_format { PS_TABLE, PS_CSV, PS_JSON };

static void ps_print(json_t *jobs, enum ps_format fmt, const size_t *cols, size_t ncols)
{
	if (fmt == PS_JSON) {
		json_dumpf(jobs, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		fputc('\n', stdout);
		return;
	}
	struct ps_ctx x = { now_wall(), fmt == PS_CSV };
	size_t njobs = json_array_size(jobs);
	/* every cell first: the table's columns are as wide as their widest cell */
	struct sbuf *cells = xcalloc((njobs + 1) * ncols, sizeof(*cells));
	size_t *width = xcalloc(ncols, sizeof(*width));
	for (size_t c = 0; c < ncols; c++) {
		sbuf_init(&cells[c], 0);
		sbuf_adds(&cells[c], fmt == PS_CSV ? columns[cols[c]].name : columns[cols[c]].title);
		width[c] = cells[c].len;
	}
	for (size_t r = 0; r < njobs; r++) {
		json_t *j = json_array_get(jobs, r);
		for (size_t c = 0; c < ncols; c++) {
			struct sbuf *cell = &cells[(r + 1) * ncols + c];
			sbuf_init(cell, 0);
			struct sbuf raw = SBUF_INIT;
			columns[cols[c]].fn(j, &x, &raw);
			/* names and root causes are job-written: no escape sequences reach the terminal */
			term_escape(cell, raw.buf, raw.len, false);
			sbuf_release(&raw);
			if (fmt == PS_TABLE && !cell->len)
				sbuf_addch(cell, '-'); /* nothing to say, as ps(1) says it */
			if (cell->len > width[c])
				width[c] = cell->len;
		}
	}
	for (size_t r = 0; r <= njobs; r++) {
		for (size_t c = 0; c < ncols; c++) {
			const struct sbuf *cell = &cells[r * ncols + c];
			if (fmt == PS_CSV) {
				if (c)
					fputc(',', stdout);
				csv_field(cell->buf);
			} else if (c + 1 == ncols && !columns[cols[c]].right) {
				fputs(cell->buf, stdout); /* no padding at the end of the line */
			} else {
				printf(columns[cols[c]].right ? "%*s" : "%-*s", (int)width[c], cell->buf);
				if (c + 1 < ncols)
					fputs("  ", stdout);
			}
		}
		fputc('\n', stdout);
	}
	for (size_t i = 0; i < (njobs + 1) * ncols; i++)
		sbuf_release(&cells[i]);
	free(cells);
	free(width);
}

/* ---- which jobs: the same flags with and without a server ---- */

/* "queued,running" -> a bit per state; TC_EUSAGE naming a word that is not one */
static int parse_states(const char *list, unsigned *out, struct tc_err *err)
{
	*out = 0;
	for (const char *p = list;;) {
		size_t len = strcspn(p, ",");
		enum job_state s;
		if (!job_state_parse(p, len, &s))
			return tc_error(err, TC_EUSAGE, "ps: --state: '%.*s' is not a job state", (int)len, p);
		*out |= 1u << s;
		if (!p[len])
			return 0;
		p += len + 1;
	}
}

int cmd_ps(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		{ "all", no_argument, NULL, 'a' },
		CMD_OPT_JSON,
		{ "format", required_argument, NULL, 'F' },
		{ "columns", required_argument, NULL, 'o' },
		{ "state", required_argument, NULL, 's' },
		{ "user", required_argument, NULL, 'u' },
		CMD_OPT_SERVER,
		CMD_OPT_HELP,
		CMD_OPT_END,
	};
	const char *server = NULL, *state = NULL, *user = NULL, *cols_text = DEFAULT_COLUMNS;
	bool all = false;
	enum ps_format fmt = PS_TABLE;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "aho:", opts, NULL)) != -1) {
		if (cmd_common_flag(c, NULL, &server))
			continue;
		switch (c) {
		case 'a': all = true; break;
		case 'j': fmt = PS_JSON; break;
		case 'F':
			if (!strcmp(optarg, "table"))
				fmt = PS_TABLE;
			else if (!strcmp(optarg, "csv"))
				fmt = PS_CSV;
			else if (!strcmp(optarg, "json"))
				fmt = PS_JSON;
			else
				return tc_error(err, TC_EUSAGE, "ps: --format is table, csv or json, not '%s'", optarg);
			break;
		case 'o': cols_text = optarg; break;
		case 's': state = optarg; break;
		case 'u': user = optarg; break;
		case 'h': fputs(usage, stdout); return 0;
		default: return cmd_bad_option("ps", "aho:", argc, argv, opts, err);
		}
	}
	if (optind != argc)
		return tc_error(err, TC_EUSAGE, "ps: takes no arguments");
	size_t *cols = NULL, ncols = 0;
	int rc = parse_columns(cols_text, &cols, &ncols, err);
	if (rc)
		return rc;
	json_t *jobs = NULL;
	struct job_source *src = NULL;
	struct source_query q = { all, 0, user };
	if (state)
		rc = parse_states(state, &q.states, err);
	if (!rc)
		rc = cmd_source_open(ctx->home, server, argc, argv, &src, err);
	if (!rc)
		rc = src->ops->list(src, &q, &jobs, err);
	/* closed before the jobs are printed and freed: sqlite3_close then has a small heap to
	 * consolidate (measured: 7-14% of a 10,000-job `ps --all`, docs/PERFORMANCE.md) */
	source_close(src);
	if (!rc)
		ps_print(jobs, fmt, cols, ncols);
	json_decref(jobs);
	free(cols);
	return rc;
}
