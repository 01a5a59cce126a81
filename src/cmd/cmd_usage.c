/*
 * cmd_usage.c -- `trainctl usage`: device-hours per device type, jobs and
 * queue waits per user or team over a period (jobs/usage.h), from the
 * state folder's database or from the server's GET /api/v1/usage; Slurm
 * jobs' device time from sacct (docs/slurm.md).
 */
#include "cmd/cmd.h"
#include "cmd/client.h"
#include "jobs/usage.h"

#include "core/enc.h"
#include "core/json.h"
#include "core/sbuf.h"
#include "core/util.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

static const char usage[] =
	"usage: trainctl usage [--since DATE] [--until DATE] [--by user|team]\n"
	"                      [--format table|csv|json] [--server URL]\n\n"
	"What the jobs used between two dates, recorded as they ran: per user (or team)\n"
	"and device type, the device-hours held, the jobs, and the mean and longest\n"
	"wait from queued to first running.  Dates are UTC: 2026-11-01 or\n"
	"2026-11-01T12:00:00; each interval is cut to the window [since, until).\n"
	"Jobs run through Slurm count as Slurm's accounting (sacct) has them.\n\n"
	"  --since DATE     start of the window (default: 30 days before --until)\n"
	"  --until DATE     end of the window, not included (default: now)\n"
	"  --by user|team   group by the job's user (default) or its team\n"
	"  -o, --format F   table (default), csv or json\n"
	"  --server URL     ask a server (or $TRAINCTL_SERVER); a user who is not an\n"
	"                   admin sees only their own usage\n";

enum fmt { FMT_TABLE, FMT_CSV, FMT_JSON };

static double num(json_t *o, const char *key)
{
	return json_number_value(json_object_get(o, key));
}

static const char *str(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

/* seconds as "12s", "5m07s", "3h12m"; "-" for none */
static void add_wait(struct sbuf *sb, json_t *v)
{
	if (!json_is_number(v)) {
		sbuf_adds(sb, "-");
		return;
	}
	double d = json_number_value(v);
	long s = (long)(d + 0.5);
	if (s < 60)
		sbuf_addf(sb, "%lds", s);
	else if (s < 3600)
		sbuf_addf(sb, "%ldm%02lds", s / 60, s % 60);
	else
		sbuf_addf(sb, "%ldh%02ldm", s / 3600, s / 60 % 60);
}

/* Where the Slurm jobs' device time comes from (docs/slurm.md): sacct, or why not. */
static void print_slurm(json_t *sl)
{
	if (!json_is_object(sl))
		return;
	if (json_object_get(sl, "error")) {
		printf("slurm jobs: counted from trainctl's record of their states; sacct could not"
		       " say: %s\n", str(sl, "error"));
		return;
	}
	long long n = (long long)json_integer_value(json_object_get(sl, "jobs"));
	long long unknown = (long long)json_integer_value(json_object_get(sl, "unknown_to_sacct"));
	printf("slurm jobs: %lld, counted from sacct", n);
	if (unknown)
		printf(" (%lld unknown to sacct, not counted)", unknown);
	printf("\n");
}

static void print_table(json_t *rep)
{
	json_t *rows = json_object_get(rep, "rows"), *r;
	size_t i;
	printf("usage %s .. %s by %s\n", str(rep, "since"), str(rep, "until"), str(rep, "by"));
	print_slurm(json_object_get(rep, "slurm"));
	if (!json_array_size(rows)) {
		printf("no device time recorded in this period\n");
		return;
	}
	printf("%-16s %-8s %12s %6s %10s %10s\n", str(rep, "by"), "type", "device-hours", "jobs",
	       "wait-mean", "wait-max");
	json_array_foreach(rows, i, r) {
		struct sbuf mean = SBUF_INIT, max = SBUF_INIT;
		add_wait(&mean, json_object_get(r, "wait_mean_seconds"));
		add_wait(&max, json_object_get(r, "wait_max_seconds"));
		const char *g = str(r, "group");
		printf("%-16s %-8s %12.3f %6lld %10s %10s\n", *g ? g : "-", str(r, "device_type"),
		       num(r, "device_hours"), (long long)json_integer_value(json_object_get(r, "jobs")),
		       mean.buf, max.buf);
		sbuf_release(&mean);
		sbuf_release(&max);
	}
}

static void print_csv(json_t *rep)
{
	struct sbuf sb = SBUF_INIT;
	usage_report_csv(rep, &sb);
	fputs(sb.buf, stdout);
	sbuf_release(&sb);
}

static int from_server(const char *server, const char *since, const char *until,
		       const char *by, json_t **out, struct tc_err *err)
{
	struct client *cl;
	int rc = client_open(server, &cl, err);
	if (rc)
		return rc;
	struct sbuf path = SBUF_INIT, resp = SBUF_INIT;
	sbuf_adds(&path, "/api/v1/usage?by=");
	url_encode(&path, by, false);
	if (since) {
		sbuf_adds(&path, "&since=");
		url_encode(&path, since, false);
	}
	if (until) {
		sbuf_adds(&path, "&until=");
		url_encode(&path, until, false);
	}
	rc = client_json(cl, "GET", path.buf, NULL, &resp, err);
	if (!rc) {
		json_error_t je;
		*out = json_loads(resp.buf, 0, &je);
		if (!json_is_object(*out)) {
			json_decref(*out);
			*out = NULL;
			rc = tc_error(err, TC_EBACKEND, "usage: the server's answer is not a JSON"
					" object: %s", je.text);
		}
	}
	client_close(cl);
	sbuf_release(&path);
	sbuf_release(&resp);
	return rc;
}

static int from_store(const char *home, const struct usage_query *q, json_t **out,
		      struct tc_err *err)
{
	struct store *st;
	int rc = store_open_read(home, &st, err);
	if (rc)
		return rc;
	rc = usage_report_json(st, q, out, err);
	store_close(st);
	return rc;
}

int cmd_usage(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		{ "since", required_argument, NULL, 's' },
		{ "until", required_argument, NULL, 'u' },
		{ "by", required_argument, NULL, 'b' },
		{ "format", required_argument, NULL, 'o' },
		CMD_OPT_SERVER,
		CMD_OPT_HELP,
		CMD_OPT_END,
	};
	const char *since = NULL, *until = NULL, *by = "user", *server = NULL;
	enum fmt fmt = FMT_TABLE;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		if (cmd_common_flag(c, NULL, &server))
			continue;
		switch (c) {
		case 's': since = optarg; break;
		case 'u': until = optarg; break;
		case 'b': by = optarg; break;
		case 'o':
			if (!strcmp(optarg, "table"))
				fmt = FMT_TABLE;
			else if (!strcmp(optarg, "csv"))
				fmt = FMT_CSV;
			else if (!strcmp(optarg, "json"))
				fmt = FMT_JSON;
			else
				return tc_error(err, TC_EUSAGE, "usage: --format is table, csv or json,"
						" not '%s'", optarg);
			break;
		case 'h': fputs(usage, stdout); return 0;
		default: return cmd_bad_option("usage", "o:h", argc, argv, opts, err);
		}
	}
	if (optind < argc)
		return tc_error(err, TC_EUSAGE, "usage: unexpected argument '%s'", argv[optind]);
	/* the words are checked here too, so that a typo is named before a server is asked */
	struct usage_query q = { .user = NULL };
	int rc = usage_query_parse(since, until, by, now_wall(), &q, err);
	if (rc)
		return rc;
	json_t *rep = NULL;
	rc = client_configured(argc, argv) || server
			 ? from_server(server, since, until, by, &rep, err)
			 : from_store(ctx->home, &q, &rep, err);
	if (rc)
		return rc;
	if (fmt == FMT_JSON) {
		json_dumpf(rep, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		fputc('\n', stdout);
	} else if (fmt == FMT_CSV) {
		print_csv(rep);
	} else {
		print_table(rep);
	}
	json_decref(rep);
	return 0;
}
