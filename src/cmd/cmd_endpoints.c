/*
 * cmd_endpoints.c -- `trainctl endpoints JOB [--json] [--server URL]`: a
 * job's endpoints and where to open them (docs/endpoints.md).  Through a
 * server: its proxy's URLs (which send a browser on to the endpoint's own
 * host name when the server has --endpoint-host); else the local addresses of this machine's
 * store (with Jupyter's token, which only the job's own store holds).
 */
#include "cmd/cmd.h"
#include "core/enc.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "endpoint/endpoint.h"
#include "server/server.h"
#include "source/source.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"usage: trainctl endpoints JOB [--json] [--server URL]\n"
	"\n"
	"List a job's endpoints (spec key endpoints:): name, kind, state and URL.\n"
	"  --json        print them as JSON\n"
	"  --server URL  ask this server (default $TRAINCTL_SERVER): its proxy's URLs\n";

/* a job's text (names, notes) never reaches the terminal as control characters */
static void cell(const char *v, int width)
{
	struct sbuf s = SBUF_INIT;
	term_escape(&s, v ? v : "-", strlen(v ? v : "-"), false);
	printf("%-*s", width, s.buf);
	sbuf_release(&s);
}

static void print_list(json_t *a)
{
	if (!json_array_size(a)) {
		printf("no endpoints (the spec's endpoints: key opens them)\n");
		return;
	}
	printf("%-16s %-12s %-9s %s\n", "NAME", "KIND", "STATE", "URL");
	size_t i;
	json_t *o;
	json_array_foreach(a, i, o) {
		cell(json_string_value(json_object_get(o, "name")), 16);
		putchar(' ');
		cell(json_string_value(json_object_get(o, "kind")), 12);
		putchar(' ');
		cell(json_string_value(json_object_get(o, "state")), 9);
		putchar(' ');
		const char *url = json_string_value(json_object_get(o, "url"));
		const char *note = json_string_value(json_object_get(o, "note"));
		cell(url, 0);
		if (note && !endpoint_state_is(json_string_value(json_object_get(o, "state")), ENDPOINT_RUNNING)) {
			fputs(" (", stdout);
			cell(note, 0);
			putchar(')');
		}
		putchar('\n');
	}
}

static int print_out(json_t *a, const char *job, bool as_json, struct tc_err *err)
{
	if (as_json) {
		json_t *o = json_pack("{s:s, s:O}", "job", job, "endpoints", a);
		char *t = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		json_decref(o);
		if (!t)
			return tc_error(err, TC_ESYS, "endpoints: cannot encode JSON");
		puts(t);
		free(t);
	} else {
		print_list(a);
	}
	return 0;
}

/* where a browser that opens a URL lands, as the server says (docs/endpoints.md) */
static void print_origin(const char *origin)
{
	if (origin && !strcmp(origin, "own"))
		printf("(a browser that opens a URL is sent on to the endpoint's own host"
		       " name, JOB-NAME under the server's --endpoint-host)\n");
	else if (origin && !strcmp(origin, "server"))
		printf("(the server shows these pages in a browser to the job's owner only:"
		       " `trainctl server --endpoint-host NAME` gives each its own host name)\n");
}

int cmd_endpoints(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		CMD_OPT_JSON,
		CMD_OPT_SERVER,
		CMD_OPT_HELP,
		CMD_OPT_END,
	};
	const char *server = NULL;
	bool as_json = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (cmd_common_flag(c, &as_json, &server))
			continue;
		switch (c) {
		case 'h': fputs(usage, stdout); return 0;
		default: return cmd_bad_option("endpoints", "h", argc, argv, opts, err);
		}
	}
	if (optind + 1 != argc)
		return tc_error(err, TC_EUSAGE, "endpoints: give one job");
	/* through a server its proxy's URLs, else this machine's addresses (the source's) */
	struct job_source *src = NULL;
	json_t *o = NULL;
	int rc = cmd_source_open(ctx->home, server, argc, argv, &src, err);
	if (!rc)
		rc = src->ops->endpoints(src, argv[optind], &o, err);
	if (!rc) {
		json_t *a = json_object_get(o, "endpoints");
		rc = print_out(a, json_string_value(json_object_get(o, "job")), as_json, err);
		if (!rc && !as_json && json_array_size(a))
			print_origin(json_string_value(json_object_get(o, "origin")));
	}
	json_decref(o);
	source_close(src);
	return rc;
}
