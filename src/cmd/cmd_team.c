/*
 * cmd_team.c -- `trainctl team ls` and `trainctl team show TEAM`: the
 * server's teams (docs/server.md, "Teams") through GET /api/v1/teams.
 */
#include "cmd/client.h"
#include "cmd/cmd.h"
#include "core/enc.h"
#include "core/sbuf.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

static const char team_usage[] =
	"usage: trainctl team ls [--server URL] [--json]\n"
	"       trainctl team show TEAM [--server URL] [--json]\n"
	"\n"
	"The server's teams (its settings file's teams:, docs/server.md): members,\n"
	"devices guaranteed and borrowable per type, in use, borrowed, and waiting;\n"
	"show adds Slurm's fair share (sshare) for a team mapped to a Slurm account.\n";

/* "gpu:4 cpu:2" of a {type: N} object ("-" when empty). */
static void counts(json_t *o, struct sbuf *out)
{
	const char *k;
	json_t *v;
	sbuf_reset(out);
	json_object_foreach(o, k, v)
		sbuf_addf(out, "%s%s:%lld", out->len ? " " : "", k, (long long)json_integer_value(v));
	if (!out->len)
		sbuf_adds(out, "-");
}

/* A number of sshare as Slurm wrote it ("-" when Slurm left it empty). */
static void share_num(struct sbuf *b, json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	double d = json_number_value(v);
	if (json_is_number(v) && d > -9e15 && d < 9e15 && d == (double)(long long)d)
		sbuf_addf(b, "%lld", (long long)d); /* RawUsage, RawShares: whole numbers */
	else if (json_is_number(v))
		sbuf_addf(b, "%g", d);
	else if (json_is_string(v))
		sbuf_adds(b, json_string_value(v));
	else
		sbuf_adds(b, "-");
}

/* slurm: the account its Slurm jobs are charged to and Slurm's fair share for it (sshare). */
static void show_slurm(json_t *sl)
{
	static const char *const keys[] = { "raw_shares", "norm_shares", "raw_usage",
					    "effective_usage", "fair_share" };
	static const char *const heads[] = { "RawShares", "NormShares", "RawUsage", "EffectvUsage",
					     "FairShare" };
	const char *qos = json_string_value(json_object_get(sl, "qos"));
	printf("slurm:       account %s%s%s\n", json_string_value(json_object_get(sl, "account")),
	       qos ? ", qos " : "", qos ? qos : "");
	const char *why = json_string_value(json_object_get(sl, "error"));
	if (why) {
		printf("  sshare:    %s\n", why);
		return;
	}
	if (!json_object_get(sl, "raw_usage"))
		return; /* the list's form: the mapping only */
	printf("  %-10s", "sshare:");
	for (size_t k = 0; k < 5; k++)
		printf(" %-12s", heads[k]);
	printf("\n");
	struct sbuf b = SBUF_INIT;
	json_t *users = json_object_get(sl, "users");
	for (size_t i = 0; i <= json_array_size(users); i++) {
		json_t *row = i ? json_array_get(users, i - 1) : sl;
		printf("  %-10s", i ? json_string_value(json_object_get(row, "user")) : "(account)");
		for (size_t k = 0; k < 5; k++) {
			sbuf_reset(&b);
			share_num(&b, row, keys[k]);
			printf(" %-12s", b.buf);
		}
		printf("\n");
	}
	sbuf_release(&b);
}

static void show_one(json_t *t)
{
	static const char *const rows[][2] = {
		{ "guarantee", "guarantee" }, { "borrow", "may borrow" }, { "in_use", "in use" },
		{ "borrowed", "borrowed" },   { "waiting_devices", "waiting for" },
	};
	struct sbuf b = SBUF_INIT;
	printf("team:        %s%s\n", json_string_value(json_object_get(t, "name")),
	       json_is_true(json_object_get(t, "default")) ? " (default)" : "");
	size_t i;
	json_t *m;
	printf("members:    ");
	json_array_foreach(json_object_get(t, "members"), i, m)
		printf(" %s", json_string_value(m));
	printf("\n");
	for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
		counts(json_object_get(t, rows[r][0]), &b);
		printf("%-12s %s\n", rows[r][1], b.buf);
	}
	if (json_is_object(json_object_get(t, "slurm")))
		show_slurm(json_object_get(t, "slurm"));
	printf("jobs:        %lld running, %lld waiting\n",
	       (long long)json_integer_value(json_object_get(t, "running_jobs")),
	       (long long)json_integer_value(json_object_get(t, "waiting_jobs")));
	json_t *w;
	json_array_foreach(json_object_get(t, "waiting"), i, w)
		printf("  waiting: %s (%s, %s:%lld) for %s\n", json_string_value(json_object_get(w, "id")),
		       json_string_value(json_object_get(w, "user")),
		       json_string_value(json_object_get(w, "type")),
		       (long long)json_integer_value(json_object_get(w, "count")),
		       json_string_value(json_object_get(w, "why")));
	sbuf_release(&b);
}

int cmd_team(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
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
			fputs(team_usage, stdout);
			return 0;
		}
		return cmd_bad_option("team", "h", argc, argv, opts, err);
	}
	const char *verb = optind < argc ? argv[optind] : NULL;
	bool ls = verb && (!strcmp(verb, "ls") || !strcmp(verb, "list"));
	bool show = verb && !strcmp(verb, "show");
	if (!(ls && optind + 1 == argc) && !(show && optind + 2 == argc))
		return tc_error(err, TC_EUSAGE, "team: give ls, or show TEAM (trainctl team --help)");
	struct sbuf path = SBUF_INIT, row = SBUF_INIT;
	sbuf_adds(&path, "/api/v1/teams");
	if (show) {
		sbuf_addch(&path, '/');
		url_encode(&path, argv[optind + 1], false);
	}
	json_t *o = NULL;
	int rc = client_get_json(server, path.buf, as_json, &o, err);
	if (o) {
		if (show) {
			show_one(o);
		} else {
			size_t i;
			json_t *t;
			printf("%-16s %-14s %-14s %-14s %-14s %s\n", "TEAM", "GUARANTEE", "BORROW",
			       "IN_USE", "BORROWED", "WAITING");
			json_array_foreach(json_object_get(o, "teams"), i, t) {
				printf("%-16s", json_string_value(json_object_get(t, "name")));
				static const char *const cols[] = { "guarantee", "borrow", "in_use",
								    "borrowed" };
				for (size_t k = 0; k < 4; k++) {
					counts(json_object_get(t, cols[k]), &row);
					printf(" %-14s", row.buf);
				}
				printf(" %lld\n", (long long)json_integer_value(json_object_get(t, "waiting_jobs")));
			}
		}
		json_decref(o);
	}
	sbuf_release(&path);
	sbuf_release(&row);
	return rc;
}
