/*
 * cmd_secret.c -- `trainctl secret set|list|rm`: the secrets a spec's env:
 * names ({secret: NAME}, docs/security.md).  Without a server they are
 * this account's, in $TRAINCTL_HOME/secrets; with --server URL (or
 * $TRAINCTL_SERVER) the caller's on that server.  A value comes from
 * stdin only (typed without echo on a terminal), never from argv, where
 * ps and the shell's history would show it.
 */
#include "cmd/cmd.h"
#include "core/enc.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "secret/secret.h"
#include "server/server.h"
#include "cmd/client.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

static const char secret_usage[] =
	"usage: trainctl secret set NAME [--server URL]   (the value from stdin)\n"
	"       trainctl secret list [--server URL] [--json]\n"
	"       trainctl secret rm NAME [--server URL]\n"
	"\nSecrets a spec's env: takes by name: env: {TOKEN: {secret: NAME}}.  Without a\n"
	"server they are yours, in $TRAINCTL_HOME/secrets; with --server (or\n"
	"$TRAINCTL_SERVER) yours on that server.  Values are never printed.\n";

/* The value: a line typed without echo on a terminal, else all of stdin. */
static int read_value(const char *name, struct sbuf *v, struct tc_err *err)
{
	if (isatty(STDIN_FILENO)) {
		struct termios old, quiet;
		if (tcgetattr(STDIN_FILENO, &old) < 0)
			return tc_error_errno(err, TC_ESYS, "secret: cannot read the terminal");
		quiet = old;
		quiet.c_lflag &= ~(tcflag_t)ECHO;
		quiet.c_lflag |= ECHONL;
		fprintf(stderr, "value of secret %s: ", name);
		fflush(stderr);
		if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet) < 0)
			return tc_error_errno(err, TC_ESYS, "secret: cannot turn the echo off");
		char *line = NULL;
		size_t cap = 0;
		ssize_t n = getline(&line, &cap, stdin);
		int saved = errno;
		if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &old) < 0)
			errno = 0; /* the terminal is the user's to reset; the value was read */
		if (n > 0)
			sbuf_add(v, line, (size_t)n);
		free(line);
		if (n < 0 && ferror(stdin)) {
			errno = saved;
			return tc_error_errno(err, TC_ESYS, "secret: cannot read the value");
		}
	} else {
		char buf[4096];
		size_t n;
		while ((n = fread(buf, 1, sizeof(buf), stdin)) > 0) {
			sbuf_add(v, buf, n);
			if (v->len > SECRET_VALUE_MAX + 2)
				return tc_error(err, TC_EINPUT, "secret %s: the value is over %d bytes", name,
						SECRET_VALUE_MAX);
		}
		if (ferror(stdin))
			return tc_error_errno(err, TC_ESYS, "secret: cannot read the value from stdin");
	}
	secret_trim(v);
	if (!v->len)
		return tc_error(err, TC_EINPUT, "secret %s: the value is empty (give it on stdin)", name);
	return 0;
}

/* One request to the server; resp holds its JSON. */
static int remote(const char *server, const char *method, const char *name, const char *body,
		  struct sbuf *resp, struct tc_err *err)
{
	struct client *cl = NULL;
	struct sbuf path = SBUF_INIT;
	sbuf_adds(&path, "/api/v1/secrets");
	if (name) {
		sbuf_addch(&path, '/');
		url_encode(&path, name, false);
	}
	int rc = client_open(server, &cl, err);
	if (!rc)
		rc = client_json(cl, method, path.buf, body, resp, err);
	client_close(cl);
	sbuf_release(&path);
	return rc;
}

static int do_set(const char *home, const char *server, bool at_server, const char *name,
		  struct tc_err *err)
{
	if (!secret_name_ok(name))
		return tc_error(err, TC_EUSAGE, "secret: '%s' is not a secret name (letters, digits, '.',"
				" '_' and '-', not starting with '.')", name);
	struct sbuf v = SBUF_INIT, resp = SBUF_INIT;
	int rc = read_value(name, &v, err);
	if (!rc && at_server) {
		/* hex: any bytes (but NUL) of the value reach the server as they are */
		char *hex = xmalloc(2 * v.len + 1);
		hex_encode(hex, v.buf, v.len);
		struct sbuf body = SBUF_INIT;
		sbuf_addf(&body, "{\"hex\":\"%s\"}", hex);
		free(hex);
		rc = remote(server, "POST", name, body.buf, &resp, err);
		sbuf_release(&body);
	} else if (!rc) {
		char *dir = secret_local_dir(home);
		rc = secret_put(dir, name, v.buf, v.len, err);
		free(dir);
	}
	if (!rc)
		fprintf(stderr, "secret %s set\n", name);
	/* the value leaves no copy behind in our memory that outlives the command */
	if (v.buf)
		explicit_bzero(v.buf, v.len);
	sbuf_release(&v);
	sbuf_release(&resp);
	return rc;
}

static int do_list(const char *home, const char *server, bool at_server, bool as_json,
		   struct tc_err *err)
{
	struct strvec names = STRVEC_INIT;
	int rc;
	if (at_server) {
		struct sbuf resp = SBUF_INIT;
		rc = remote(server, "GET", NULL, NULL, &resp, err);
		json_t *o = rc ? NULL : json_loadb(resp.buf, resp.len, 0, NULL);
		size_t i;
		json_t *x;
		json_array_foreach(json_object_get(o, "secrets"), i, x)
			if (json_is_string(x))
				strvec_push(&names, json_string_value(x));
		json_decref(o);
		sbuf_release(&resp);
	} else {
		char *dir = secret_local_dir(home);
		rc = secret_list(dir, &names, err);
		free(dir);
	}
	if (!rc && as_json) {
		json_t *a = json_array();
		for (size_t i = 0; i < names.nr; i++)
			json_array_append_new(a, json_string(names.v[i]));
		json_t *o = json_pack("{s:o}", "secrets", a);
		char *t = json_dumps(o, JSON_COMPACT);
		printf("%s\n", t ? t : "{}");
		free(t);
		json_decref(o);
	} else if (!rc) {
		for (size_t i = 0; i < names.nr; i++)
			printf("%s\n", names.v[i]);
	}
	strvec_clear(&names);
	return rc;
}

int cmd_secret(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
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
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (cmd_common_flag(c, &as_json, &server))
			continue;
		switch (c) {
		case 'h': fputs(secret_usage, stdout); return 0;
		default: return cmd_bad_option("secret", "h", argc, argv, opts, err);
		}
	}
	const char *verb = optind < argc ? argv[optind] : "";
	int nargs = argc - optind - 1;
	bool at_server = server || client_configured(argc, argv);
	if (!strcmp(verb, "set") && nargs == 1)
		return do_set(ctx->home, server, at_server, argv[optind + 1], err);
	if (!strcmp(verb, "list") && nargs == 0)
		return do_list(ctx->home, server, at_server, as_json, err);
	if ((!strcmp(verb, "rm") || !strcmp(verb, "remove")) && nargs == 1) {
		const char *name = argv[optind + 1];
		int rc;
		if (at_server) {
			struct sbuf resp = SBUF_INIT;
			rc = remote(server, "DELETE", name, NULL, &resp, err);
			sbuf_release(&resp);
		} else {
			char *dir = secret_local_dir(ctx->home);
			rc = secret_remove(dir, name, err);
			free(dir);
		}
		if (!rc)
			fprintf(stderr, "secret %s removed\n", name);
		return rc;
	}
	if (!strcmp(verb, "set") && nargs > 1)
		return tc_error(err, TC_EUSAGE, "secret: set takes a NAME only: the value comes from stdin,"
				" never from the command line");
	return tc_error(err, TC_EUSAGE, "secret: usage: trainctl secret set NAME | list | rm NAME"
			" (see trainctl secret --help)");
}
