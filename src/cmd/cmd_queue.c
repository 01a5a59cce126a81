/*
 * cmd_queue.c -- `trainctl queue`: the server's waiting jobs in the order
 * they will start, and why each waits (a quota, its team's limit or
 * another team's guarantee, the devices, a reservation it cannot backfill
 * past), through GET /api/v1/queue (docs/server.md, "Why a job waits").
 */
#include "cmd/client.h"
#include "cmd/cmd.h"
#include "core/sbuf.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>

static const char queue_usage[] =
	"usage: trainctl queue [--server URL] [--json]\n"
	"\n"
	"The server's waiting jobs in the order they will start (priority, then the\n"
	"fair-share factor, then submission), and why each waits. Another user's job\n"
	"shows without its name. FAIR: the factor (1 = no recent usage; higher starts\n"
	"first), then the team's share of the recent usage of the type against its\n"
	"share, and the user's share of it (docs/server.md, \"Fair share\").\n";

static const char *str_or(json_t *o, const char *key, const char *dflt)
{
	const char *v = json_string_value(json_object_get(o, key));
	return v && *v ? v : dflt;
}

static void print_queue(json_t *o)
{
	size_t i;
	json_t *j;
	struct sbuf dev = SBUF_INIT, waited = SBUF_INIT, fair = SBUF_INIT;
	printf("%-4s %-22s %-16s %-10s %-10s %-8s %-8s %-22s %s\n", "POS", "JOB", "NAME", "USER",
	       "TEAM", "DEVICES", "WAITED", "FAIR (TEAM/SHARE USER)", "WHY");
	json_array_foreach(json_object_get(o, "jobs"), i, j) {
		sbuf_reset(&dev);
		sbuf_addf(&dev, "%s:%lld", str_or(j, "type", "-"),
			  (long long)json_integer_value(json_object_get(j, "count")));
		sbuf_reset(&waited);
		cmd_add_age(&waited, json_number_value(json_object_get(j, "waited_seconds")));
		sbuf_reset(&fair);
		json_t *f = json_object_get(j, "fair_share");
		if (json_is_object(f))
			sbuf_addf(&fair, "%.3f (%.0f%%/%.0f%% %.0f%%)",
				  json_number_value(json_object_get(f, "factor")),
				  100 * json_number_value(json_object_get(f, "team_usage")),
				  100 * json_number_value(json_object_get(f, "team_share")),
				  100 * json_number_value(json_object_get(f, "user_usage")));
		else
			sbuf_adds(&fair, "-");
		printf("%-4lld %-22s %-16s %-10s %-10s %-8s %-8s %-22s %s\n",
		       (long long)json_integer_value(json_object_get(j, "position")),
		       str_or(j, "id", "-"), str_or(j, "name", "-"), str_or(j, "user", "-"),
		       str_or(j, "team", "-"), dev.buf, waited.buf, fair.buf, str_or(j, "why", "-"));
	}
	size_t shown = json_array_size(json_object_get(o, "jobs"));
	long long total = (long long)json_integer_value(json_object_get(o, "total"));
	if ((long long)shown < total)
		printf("(%lld more)\n", total - (long long)shown);
	sbuf_release(&dev);
	sbuf_release(&waited);
	sbuf_release(&fair);
}

int cmd_queue(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		CMD_OPT_SERVER,
		CMD_OPT_JSON,
		CMD_OPT_HELP,
		CMD_OPT_END,
	};
	const char *server = NULL;
	bool as_json = false;
	int c;
	(void)ctx;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (cmd_common_flag(c, &as_json, &server))
			continue;
		if (c == 'h') {
			fputs(queue_usage, stdout);
			return 0;
		}
		return cmd_bad_option("queue", "h", argc, argv, opts, err);
	}
	if (optind < argc)
		return tc_error(err, TC_EUSAGE, "queue: unexpected '%s' (trainctl queue --help)",
				argv[optind]);
	json_t *o = NULL;
	int rc = client_get_json(server, "/api/v1/queue", as_json, &o, err);
	if (o)
		print_queue(o);
	json_decref(o);
	return rc;
}
