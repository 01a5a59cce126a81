/*
 * cmd_server.c -- `trainctl server`, `trainctl token create` and the hidden
 * `trainctl supervise JOB` that the server starts for each job.
 */
#include "backend/names.h"
#include "cmd/cmd.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "devices/devices.h"
#include "hub/hub.h"
#include "launch/launch.h"
#include "notify/notify.h"
#include "secret/secret.h"
#include "server/config.h"
#include "server/teams.h"
#include "report/report.h"
#include "server/server.h"
#include "cmd/client.h"
#include "spec/spec.h"
#include "store/store.h"
#include "core/strvec.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>

#include "jobs/usage.h"

#include <getopt.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char server_usage[] =
	"usage: trainctl server [--listen HOST:PORT] [--state DIR] [options]\n"
	"       trainctl server reload    the running server reads its settings file's teams\n"
	"                                 and fair_share again\n"
	"\n"
	"  -l, --listen HOST:PORT  where the API and web UI listen (default 127.0.0.1:8470)\n"
	"      --socket PATH       the Unix socket of local clients (default STATE/server.sock)\n"
	"      --host-name NAME    a name clients reach the server by (Host header; repeatable)\n"
	"      --pass-env NAME     a variable of the server's environment jobs inherit, beyond\n"
	"                          the allowlist of docs/security.md (repeatable)\n"
	"      --max-connections N       TCP connections in all (default 512)\n"
	"      --max-client-connections N  TCP connections of one address (default 32)\n"
	"      --header-seconds S  a request's headers must arrive within S (default 10)\n"
	"      --body-memory MIB   memory all request bodies may hold at once (default 256)\n"
	"      --endpoint-host NAME  serve each job endpoint a browser opens on a host name\n"
	"                          of its own, JOB-ENDPOINT.NAME (a wildcard DNS name that\n"
	"                          reaches this server, docs/endpoints.md); without it\n"
	"                          endpoints are served to their job's owner only\n"
	"      --behind-https      browsers reach the server over https (a reverse proxy\n"
	"                          ends TLS): __Host- and Secure cookies, https endpoint links\n"
	"      --allow-root-jobs   a root server may run jobs as root (root's own, the\n"
	"                          operator's login); without it they are refused\n"
	"      --state DIR         state folder: trainctl.db and runs/ (default $TRAINCTL_HOME)\n"
	"      --cpu-slots N       cpu jobs' workers that may run at once (default: cores)\n"
	"      --quota USER=N      at most N devices held by USER's jobs (USER * = everyone else)\n"
	"      --fair-share on|off order equal priorities by recent usage against the\n"
	"                          teams' guarantees (default: on with teams; in a file:\n"
	"                          fair_share: {enabled:, half_life:}, docs/server.md)\n"
	"      --fair-share-half-life D  usage weighs half after D (30s, 12h, 7d; default 7d)\n"
	"      --default-max-runtime D  limits.max_runtime of jobs whose spec has none\n"
	"                          (90m, 24h, 7d; default: no limit)\n"
	"      --default-idle-minutes M  limits.idle_minutes of jobs with a jupyter or ssh\n"
	"                          endpoint whose spec has none (30, 0.5; default: none)\n"
	"      --sample-seconds S  resource telemetry period (default 5)\n"
	"      --retention AGE     remove finished jobs (rows, run folders) that ended more\n"
	"                          than AGE ago (30d, 12h...), at start and hourly (docs/usage.md)\n"
	"      --metrics-job-series N  per-job series of /metrics at most (default 500;\n"
	"                          up to 5 per running job, docs/monitoring.md)\n"
	"      --notify-file FILE  webhooks of jobs whose spec has no notify: (a YAML file\n"
	"                          holding notify: [...], docs/diagnostics.md)\n"
	"      --backend NAME      run every job with this backend: local, or slurm (sbatch;\n"
	"                          docs/slurm.md); default: each spec's backend:\n"
	"  -q, --quiet             no activity log on stderr\n"
	"      --config FILE       settings from a YAML file whose keys are these options\n"
	"                          without -- (docs/server.md); the command line wins\n"
	"      --check-config FILE check FILE's settings and exit: 0 good, 2 not\n";

/* The keys of --config FILE: every option of opts but these (the kinds: config.h). */
static struct srvconf_key *conf_keys(const struct option *opts)
{
	static const char *const no_key[] = { "help", "config", "check-config" };
	static const struct srvconf_key kinds[] = {
		{ "host-name", SRVCONF_LIST, 0 },  { "pass-env", SRVCONF_LIST, 0 },
		{ "quota", SRVCONF_PAIRS, 0 },     { "state", SRVCONF_PATH, 0 },
		{ "socket", SRVCONF_PATH, 0 },     { "notify-file", SRVCONF_PATH, 0 },
	};
	size_t n = 0, k = 0;
	while (opts[n].name)
		n++;
	struct srvconf_key *keys = xcalloc(n + 3, sizeof(*keys));
	keys[k++] = (struct srvconf_key){ "teams", SRVCONF_SECTION, 0 }; /* server/teams.h */
	keys[k++] = (struct srvconf_key){ "fair_share", SRVCONF_SECTION, 0 }; /* ditto */
	for (const struct option *o = opts; o->name; o++) {
		bool skip = false;
		for (size_t i = 0; i < sizeof(no_key) / sizeof(no_key[0]); i++)
			skip |= !strcmp(o->name, no_key[i]);
		if (skip)
			continue;
		keys[k] = (struct srvconf_key){ o->name,
			o->has_arg == no_argument ? SRVCONF_FLAG : SRVCONF_VALUE, o->val };
		for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
			if (!strcmp(o->name, kinds[i].name))
				keys[k].kind = kinds[i].kind;
		k++;
	}
	return keys;
}

/*
 * The words getopt reads: argv[0], the file's words whose options the
 * command line does not give (it wins, repeatable ones included), then
 * the command line.  *nconf: how many came from the file, from av.v[1] on;
 * from[i]: the file's word at av.v[1 + i].
 */
static int server_words(int argc, char **argv, const struct option *opts, struct srvconf *conf,
			bool *check, struct strvec *av, size_t **from, size_t *nconf, struct tc_err *err)
{
	bool given[256] = { false };
	const char *file = NULL;
	int c;
	optind = 0;
	while ((c = getopt_long(argc, argv, "l:qh", opts, NULL)) != -1) {
		if (c > 0 && c < 256)
			given[c] = true;
		if (c == 'F' || c == 'K')
			file = optarg;
		if (c == 'K')
			*check = true;
	}
	strvec_push(av, argv[0]);
	*nconf = 0;
	if (file) {
		struct srvconf_key *keys = conf_keys(opts);
		int rc = srvconf_load(file, keys, conf, err);
		free(keys); /* the words keep opts' names, not keys */
		if (rc)
			return rc;
		*from = xcalloc(conf->n + 1, sizeof(**from));
		for (size_t i = 0; i < conf->n; i++) {
			int val = conf->w[i].val;
			if (val > 0 && val < 256 && given[val])
				continue;
			strvec_push(av, conf->w[i].arg);
			(*from)[(*nconf)++] = i;
		}
	}
	for (int i = 1; i < argc; i++)
		strvec_push(av, argv[i]);
	return 0;
}

/* `trainctl server reload`: the running server reads its settings file's teams again. */
static int server_reload(int argc, char **argv, struct tc_err *err)
{
	static const struct option opts[] = { CMD_OPT_SERVER, CMD_OPT_JSON, CMD_OPT_HELP, CMD_OPT_END };
	const char *server = NULL;
	bool as_json = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (cmd_common_flag(c, &as_json, &server))
			continue;
		if (c == 'h') {
			fputs("usage: trainctl server reload [--server URL]\n\nThe running server reads"
			      " the teams and fair_share of its --config file again, without stopping\njobs (as SIGHUP"
			      " does); a bad file is refused and the old settings stay.\n", stdout);
			return 0;
		}
		return cmd_bad_option("server reload", "h", argc, argv, opts, err);
	}
	if (optind != argc)
		return tc_error(err, TC_EUSAGE, "server reload: takes no arguments");
	struct client *cl = NULL;
	struct sbuf resp = SBUF_INIT;
	int rc = client_open(server, &cl, err);
	if (!rc)
		rc = client_json(cl, "POST", "/api/v1/server/reload", "{}", &resp, err);
	client_close(cl);
	if (rc && rc != TC_EBACKEND)
		rc = tc_error(err, TC_EUSAGE, "server reload: %s", err->msg); /* a refusal: exit 2 */
	else if (!rc && as_json)
		printf("%s\n", resp.buf);
	else if (!rc) {
		json_t *o = json_loadb(resp.buf, resp.len, 0, NULL);
		printf("reloaded: %lld team(s)\n", (long long)json_integer_value(json_object_get(o, "teams")));
		json_decref(o);
	}
	sbuf_release(&resp);
	return rc;
}

int cmd_server(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	if (argc >= 2 && !strcmp(argv[1], "reload"))
		return server_reload(argc - 1, argv + 1, err);
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "state", required_argument, NULL, 'S' },
		{ "cpu-slots", required_argument, NULL, 'c' },
		{ "quota", required_argument, NULL, 'Q' },
		{ "sample-seconds", required_argument, NULL, 's' },
		{ "backend", required_argument, NULL, 'b' },
		{ "notify-file", required_argument, NULL, 'N' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "socket", required_argument, NULL, 'U' },
		{ "host-name", required_argument, NULL, 'H' },
		{ "pass-env", required_argument, NULL, 'E' },
		{ "max-connections", required_argument, NULL, 'M' },
		{ "max-client-connections", required_argument, NULL, 'C' },
		{ "header-seconds", required_argument, NULL, 'T' },
		{ "body-memory", required_argument, NULL, 'B' },
		{ "endpoint-ports", required_argument, NULL, 'P' },
		{ "endpoint-host", required_argument, NULL, 'D' },
		{ "behind-https", no_argument, NULL, 'V' },
		{ "allow-root-jobs", no_argument, NULL, 'R' },
		{ "config", required_argument, NULL, 'F' },
		{ "check-config", required_argument, NULL, 'K' },
		{ "metrics-job-series", required_argument, NULL, 'J' },
		{ "retention", required_argument, NULL, 'G' },
		{ "default-max-runtime", required_argument, NULL, 'L' },
		{ "fair-share", required_argument, NULL, 'W' },
		{ "fair-share-half-life", required_argument, NULL, 'X' },
		{ "default-idle-minutes", required_argument, NULL, 'I' },
		CMD_OPT_HELP,
		CMD_OPT_END,
	};
	struct server_opts o = { .home = ctx->home, .listen = TC_SERVER_DEFAULT_LISTEN,
				 .fair_share = -1 };
	struct strvec hosts = STRVEC_INIT, pass = STRVEC_INIT;
	struct server_quota *q = NULL;
	struct notify_hook *hooks = NULL;
	size_t nhooks = 0;
	size_t nq = 0, qalloc = 0;
	struct srvconf conf = SRVCONF_INIT;
	struct strvec av = STRVEC_INIT;
	size_t *from = NULL, nconf = 0;
	bool check = false;
	int c, rc = 0;
	long v;
	if ((rc = server_words(argc, argv, opts, &conf, &check, &av, &from, &nconf, err)))
		goto out;
	argc = (int)av.nr;
	argv = av.v;
	optind = 0;
	while ((c = getopt_long(argc, argv, "l:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'F':
		case 'K': break; /* server_words read the file */
		case 'l': o.listen = optarg; break;
		case 'S': o.home = optarg; break;
		case 'c':
			if (!parse_long(optarg, 1, 4096, &v)) {
				rc = tc_error(err, TC_EUSAGE, "server: --cpu-slots must be 1..4096");
				goto bad;
			}
			o.cpu_slots = (int)v;
			break;
		case 's':
			if (!parse_double(optarg, &o.sample_seconds) || o.sample_seconds < 0.2 ||
			    o.sample_seconds > 3600) {
				rc = tc_error(err, TC_EUSAGE, "server: --sample-seconds must be 0.2..3600");
				goto bad;
			}
			break;
		case 'J':
			if (!parse_long(optarg, 0, 1000000, &v)) {
				rc = tc_error(err, TC_EUSAGE, "server: --metrics-job-series must be 0..1000000");
				goto bad;
			}
			o.metrics_job_series = v ? (int)v : -1; /* 0: none */
			break;
		case 'L':
			if (!parse_duration(optarg, 365L * 86400, &o.default_max_runtime)) {
				rc = tc_error(err, TC_EUSAGE, "server: --default-max-runtime must be a "
					      "duration with a unit up to 365d (90m, 24h, 7d), not '%s'",
					      optarg);
				goto bad;
			}
			break;
		case 'I':
			/* the spec's bounds (spec/limit_rules.c) */
			if (!parse_double(optarg, &o.default_idle_minutes) ||
			    !(o.default_idle_minutes >= 0.05 && o.default_idle_minutes <= 525600)) {
				rc = tc_error(err, TC_EUSAGE, "server: --default-idle-minutes must be a "
					      "number of minutes from 0.05 to 525600 (30, 0.5), not '%s'",
					      optarg);
				goto bad;
			}
			break;
		case 'Q': {
			const char *eq = strchr(optarg, '=');
			if (!eq || eq == optarg || !parse_long(eq + 1, 0, 1 << 20, &v)) {
				rc = tc_error(err, TC_EUSAGE, "server: --quota takes USER=N, not '%s'", optarg);
				goto bad;
			}
			XGROW(q, nq + 1, qalloc);
			q[nq].user = xstrndup(optarg, (size_t)(eq - optarg));
			q[nq++].max_devices = (int)v;
			break;
		}
		case 'b':
			if (backend_lookup(optarg) < 0) {
				struct sbuf names = SBUF_INIT;
				backend_names_add(&names);
				rc = tc_error(err, TC_EUSAGE, "server: '%s' is not a backend (%s)", optarg,
					      names.buf);
				sbuf_release(&names);
				goto bad;
			}
			o.backend = optarg;
			break;
		case 'N':
			notify_hooks_free(hooks, nhooks);
			if ((rc = spec_notify_load(optarg, &hooks, &nhooks, err)))
				goto bad;
			o.notify = hooks;
			o.nnotify = nhooks;
			break;
		case 'q': o.quiet = true; break;
		case 'R': o.allow_root_jobs = true; break;
		case 'U': o.socket = optarg; break;
		case 'H': strvec_push(&hosts, optarg); break;
		case 'E': strvec_push(&pass, optarg); break;
		case 'M':
		case 'C':
			if (!parse_long(optarg, 1, 100000, &v)) {
				rc = tc_error(err, TC_EUSAGE, "server: --%s must be 1..100000",
					      c == 'M' ? "max-connections" : "max-client-connections");
				goto bad;
			}
			*(c == 'M' ? &o.max_connections : &o.max_per_client) = (unsigned)v;
			break;
		case 'T':
			if (!parse_double(optarg, &o.header_seconds) || o.header_seconds < 0.5 ||
			    o.header_seconds > 3600) {
				rc = tc_error(err, TC_EUSAGE, "server: --header-seconds must be 0.5..3600");
				goto bad;
			}
			break;
		case 'B':
			if (!parse_long(optarg, 16, 1L << 20, &v)) {
				rc = tc_error(err, TC_EUSAGE, "server: --body-memory must be 16..1048576"
					      " (MiB), not '%s'", optarg);
				goto bad;
			}
			o.body_memory = (size_t)v << 20;
			break;
		case 'P':
			/* ports of one host share its cookies: an endpoint there could take the API's */
			rc = tc_error(err, TC_EUSAGE, "server: --endpoint-ports is gone: endpoints get"
				      " host names of their own instead (--endpoint-host NAME, with a"
				      " wildcard DNS name *.NAME for this server; docs/endpoints.md)");
			goto bad;
		case 'D':
			if (!server_endpoint_host_ok(optarg)) {
				rc = tc_error(err, TC_EUSAGE, "server: --endpoint-host takes a host name in"
					      " lower case (letters, digits, '-' and dots, say"
					      " ep.example.org), not '%s'", optarg);
				goto bad;
			}
			o.endpoint_host = optarg;
			break;
		case 'G':
			if (!usage_parse_age(optarg, &o.retention)) {
				rc = tc_error(err, TC_EUSAGE, "server: --retention takes an age such as"
					      " 30d, 12h or 90m, not '%s'", optarg);
				goto bad;
			}
			break;
		case 'V': o.behind_https = true; break;
		case 'W':
			if (strcmp(optarg, "on") && strcmp(optarg, "off")) {
				rc = tc_error(err, TC_EUSAGE, "server: --fair-share takes on or off, not"
					      " '%s'", optarg);
				goto bad;
			}
			o.fair_share = !strcmp(optarg, "on");
			break;
		case 'X':
			if (!usage_parse_age(optarg, &o.fair_share_half_life)) {
				rc = tc_error(err, TC_EUSAGE, "server: --fair-share-half-life takes a"
					      " duration such as 7d, 12h, 90m or 30s, not '%s'", optarg);
				goto bad;
			}
			break;
		case 'h': fputs(server_usage, stdout); goto out;
		default: rc = cmd_bad_option("server", "l:qh", argc, argv, opts, err); goto bad;
		}
	}
	if (optind != argc) {
		rc = tc_error(err, TC_EUSAGE, "server: takes no arguments");
		goto out;
	}
	if (conf.file) {
		/* the teams: section (server/teams.h); the server checks it against its devices */
		struct teams ts = { 0 };
		rc = teams_load(conf.file, &ts, err);
		teams_free(&ts);
		if (rc)
			goto out;
	}
	if (check) {
		printf("%s: good\n", conf.file);
		goto out;
	}
	char *exe = path_self_exe();
	if (!exe) {
		rc = tc_error_errno(err, TC_ESYS, "server: cannot find its own binary");
		goto out;
	}
	o.exe = exe;
	o.host_names = (const char *const *)hosts.v;
	o.pass_env = (const char *const *)pass.v;
	o.quotas = q;
	o.nquotas = (int)nq;
	char *config = conf.file ? path_absolute(conf.file, NULL) : NULL;
	o.config = config; /* read again on a reload */
	rc = server_run(&o, err);
	free(config);
	free(exe);
	goto out;
bad:
	/* a word of the file: name its line and key (getopt is past it) */
	if (rc && optind >= 2 && (size_t)(optind - 2) < nconf)
		srvconf_blame(&conf, from[optind - 2], err);
out:
	srvconf_free(&conf);
	strvec_clear(&av);
	free(from);
	for (size_t i = 0; i < nq; i++)
		free(q[i].user);
	free(q);
	notify_hooks_free(hooks, nhooks);
	strvec_clear(&hosts);
	strvec_clear(&pass);
	return rc;
}

static const char token_usage[] =
	"usage: trainctl token create --user NAME [--admin] [--state DIR]\n"
	"       trainctl token list [--state DIR]\n"
	"       trainctl token revoke ID | --user NAME [--state DIR]\n"
	"       trainctl token login [--server URL]\n"
	"\n"
	"create prints a new bearer token once; the server keeps only its SHA-256.\n"
	"list shows each token's ID (the start of its hash), user, admin and age.\n"
	"revoke deletes a token by ID (a unique start of one), or all of a user's.\n"
	"login asks the server for a one-time login URL for the web UI, as you.\n";

static int token_row(void *arg, const char *hash, const char *user, bool admin, double created)
{
	(void)arg;
	struct sbuf t = SBUF_INIT;
	format_time_utc(&t, created);
	printf("%-12.12s  %-16s  %-5s  %s\n", hash, user, admin ? "yes" : "no", t.buf);
	sbuf_release(&t);
	return 0;
}

static int count_prefix(void *arg, const char *hash, const char *user, bool admin, double created)
{
	(void)user;
	(void)admin;
	(void)created;
	const char **p = arg;
	if (!strncmp(hash, p[0], strlen(p[0])))
		p[1]++; /* a counter in a pointer slot: how many match */
	return 0;
}

static int token_login(const char *server, struct tc_err *err)
{
	struct client *c = NULL;
	struct sbuf resp = SBUF_INIT;
	int rc = client_open(server, &c, err);
	if (!rc)
		rc = client_json(c, "POST", "/api/v1/login", "{}", &resp, err);
	if (!rc) {
		json_t *o = json_loadb(resp.buf, resp.len, 0, NULL);
		const char *path = json_string_value(json_object_get(o, "path"));
		const char *url = server && *server ? server : getenv("TRAINCTL_SERVER");
		size_t n = strlen(url);
		while (n && url[n - 1] == '/')
			n--;
		if (path)
			printf("%.*s%s\n", (int)n, url, path);
		else
			rc = tc_error(err, TC_EBACKEND, "token login: the server sent no login path");
		json_decref(o);
	}
	client_close(c);
	sbuf_release(&resp);
	return rc;
}

int cmd_token(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		{ "user", required_argument, NULL, 'u' },
		{ "admin", no_argument, NULL, 'a' },
		{ "state", required_argument, NULL, 'T' },
		CMD_OPT_SERVER,
		CMD_OPT_HELP,
		CMD_OPT_END,
	};
	const char *user = NULL, *home = ctx->home, *server = NULL;
	bool admin = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "u:h", opts, NULL)) != -1) {
		if (cmd_common_flag(c, NULL, &server))
			continue;
		switch (c) {
		case 'u': user = optarg; break;
		case 'a': admin = true; break;
		case 'T': home = optarg; break;
		case 'h': fputs(token_usage, stdout); return 0;
		default: return cmd_bad_option("token", "u:h", argc, argv, opts, err);
		}
	}
	const char *verb = optind < argc ? argv[optind] : "";
	int nargs = argc - optind - 1;
	if (!strcmp(verb, "create") && nargs == 0) {
		if (!user)
			return tc_error(err, TC_EUSAGE, "token: --user is required");
		char *tok = NULL;
		int rc = server_token_create(home, user, admin, &tok, err);
		if (!rc)
			printf("%s\n", tok);
		free(tok);
		return rc;
	}
	if (!strcmp(verb, "login") && nargs == 0)
		return token_login(server, err);
	if ((strcmp(verb, "list") || nargs != 0) &&
	    (strcmp(verb, "revoke") || nargs != (user ? 0 : 1)))
		return tc_error(err, TC_EUSAGE, "token: usage: trainctl token create|list|revoke|login"
				" (see trainctl token --help)");
	struct store *st = NULL;
	int rc = store_open(home, &st, err);
	if (!rc && !strcmp(verb, "list")) {
		printf("%-12s  %-16s  %-5s  %s\n", "ID", "USER", "ADMIN", "CREATED");
		rc = store_token_each(st, token_row, NULL, err);
	} else if (!rc) {
		const char *id = user ? NULL : argv[optind + 1];
		const char *match[2] = { id, NULL };
		long long n = 0;
		if (id && (strlen(id) < 6 || strspn(id, "0123456789abcdef") != strlen(id)))
			rc = tc_error(err, TC_EUSAGE, "token: revoke takes an ID of 6 or more hex digits"
				      " (trainctl token list), or --user NAME");
		else if (id && !(rc = store_token_each(st, count_prefix, match, err)) && match[1] &&
			 (uintptr_t)match[1] > 1)
			rc = tc_error(err, TC_EUSAGE, "token: ID %s names %lu tokens: give more digits",
				      id, (unsigned long)(uintptr_t)match[1]);
		if (!rc)
			rc = store_token_revoke(st, id, user, &n, err);
		if (!rc && n == 0)
			rc = tc_error(err, TC_ENOTFOUND, "token: no token %s%s", id ? id : "of user ",
				      id ? "" : user);
		if (!rc)
			printf("revoked %lld token%s\n", n, n == 1 ? "" : "s");
	}
	store_close(st);
	return rc;
}

/* The supervisor's output: logs/supervisor.out of its run folder (its own). */
static int supervise_output(const char *run_dir, struct tc_err *err)
{
	struct sbuf p = SBUF_INIT;
	sbuf_addf(&p, "%s/logs", run_dir);
	int rc = 0;
	if (mkdir(p.buf, 0700) < 0 && errno != EEXIST)
		rc = tc_error_errno(err, TC_ESYS, "supervise: cannot create %s", p.buf);
	sbuf_adds(&p, "/supervisor.out");
	int fd = rc ? -1 : open_regular_nofollow(p.buf, O_WRONLY | O_CREAT | O_APPEND, 0600);
	if (!rc && fd < 0)
		rc = tc_error_errno(err, TC_ESYS, "supervise: cannot open %s", p.buf);
	if (fd >= 0 && (dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0))
		rc = tc_error_errno(err, TC_ESYS, "supervise: dup2");
	if (fd > STDERR_FILENO)
		close(fd);
	sbuf_release(&p);
	return rc;
}

#define SUPERVISE_SPEC_MAX (64u << 20) /* far above any spec the API takes */

/* The spec on stdin, to its end; stdin is /dev/null after, so no worker inherits it. */
static int supervise_spec(struct sbuf *out, struct tc_err *err)
{
	char buf[65536];
	ssize_t n;
	int rc = 0;
	while ((n = read(STDIN_FILENO, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = tc_error_errno(err, TC_ESYS, "supervise: cannot read the spec on stdin");
			break;
		}
		if (out->len + (size_t)n > SUPERVISE_SPEC_MAX) {
			rc = tc_error(err, TC_EUSAGE, "supervise: the spec on stdin is over %u bytes",
				      SUPERVISE_SPEC_MAX);
			break;
		}
		sbuf_add(out, buf, (size_t)n);
	}
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || dup2(fd, STDIN_FILENO) < 0)
		errno = 0; /* the spec is read; a stdin left as it is harms nothing */
	if (fd > STDIN_FILENO)
		close(fd);
	if (!rc && !out->len)
		rc = tc_error(err, TC_EUSAGE, "supervise: no spec on stdin (started by `trainctl server` only)");
	return rc;
}

static void supervise_warn(void *ctx, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "trainctl: %s\n", msg);
}

/*
 * `trainctl supervise JOB --devices IDS [--resume]`: the supervisor of a
 * job the server created and started (server/privsep.c), already as the
 * job's account.  It opens no database: its spec (JSON on its stdin) and
 * run folder (TRAINCTL_RUN_DIR) come from the server, and its records go
 * to the server's hub (TRAINCTL_HUB_URL, TRAINCTL_HUB_SOCKET and the job's
 * secret).  It is not meant to be typed.
 */
int cmd_supervise(int argc, char **argv, struct cmd_ctx *ctx, struct tc_err *err)
{
	static const struct option opts[] = {
		{ "devices", required_argument, NULL, 'd' },
		{ "resume", no_argument, NULL, 'r' },
		CMD_OPT_END,
	};
	const char *devices = NULL;
	bool resume = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd': devices = optarg; break;
		case 'r': resume = true; break;
		default: return cmd_bad_option("supervise", "", argc, argv, opts, err);
		}
	}
	if (optind + 1 != argc || !devices)
		return tc_error(err, TC_EUSAGE, "supervise: usage: trainctl supervise JOB --devices IDS");
	const char *job = argv[optind];
	const char *run_dir = getenv("TRAINCTL_RUN_DIR");
	const char *hub = getenv("TRAINCTL_HUB_URL");
	if (!run_dir || *run_dir != '/' || !hub || !*hub)
		return tc_error(err, TC_EUSAGE, "supervise: started by `trainctl server` only"
				" (TRAINCTL_RUN_DIR and TRAINCTL_HUB_URL)");
	struct spec *s = NULL;
	struct sink *k = NULL;
	/* the spec first, whole, before stdin is anything else (privsep.c: spec_memfd) */
	struct sbuf spec_json = SBUF_INIT;
	int rc = supervise_spec(&spec_json, err);
	/* without it the output goes nowhere; the run folder's trouble reaches the hub below */
	if (supervise_output(run_dir, err))
		tc_err_release(err);
	if (!rc)
		rc = spec_from_json(spec_json.buf, &s, err);
	sbuf_release(&spec_json);
	if (rc)
		goto out;
	/* the devices the scheduler allocated */
	int n = 0, *ids = NULL;
	if (device_ids_parse(devices, &ids, &n, NULL))
		rc = tc_error(err, TC_EUSAGE, "supervise: bad --devices '%s'", devices);
	else if (n != s->per_node)
		rc = tc_error(err, TC_EUSAGE, "supervise: --devices '%s' is not %d ids", devices, s->per_node);
	else
		memcpy(s->device_ids, ids, (size_t)n * sizeof(int));
	free(ids);
	if (rc)
		goto out;
	/* one stream per process (hub.h note 3); a predecessor's journal is adopted */
	struct sbuf stream = SBUF_INIT;
	sbuf_addf(&stream, "sup.%ld", (long)getpid());
	rc = sink_from_env(run_dir, job, stream.buf, supervise_warn, NULL, &k, err);
	sbuf_release(&stream);
	if (!rc && !k)
		rc = tc_error(err, TC_EUSAGE, "supervise: no hub to report to");
	if (rc)
		goto out;
	(void)ctx;
	/* the secrets the server handed over: a server job never reads a local store */
	struct strvec secrets = STRVEC_INIT;
	secret_take_env(&secrets);
	struct launch_opts lo = { .quiet = true, .job_id = job, .resume_newest = resume,
				  .sink = k, .run_dir = run_dir, .secrets = &secrets };
	char *id = NULL;
	rc = launch_run(s, &lo, &id, &ctx->exit_status, err);
	free(id);
	strvec_clear(&secrets);
	/*
	 * report.json: once the hub has every record (the close waits for it),
	 * built by the hub, written here as the job's account.
	 */
	sink_close(k);
	k = NULL;
	json_t *rep = NULL;
	struct tc_err e2 = TC_ERR_INIT;
	if (hub_job_report(job, 60, &rep, &e2) || report_write(rep, run_dir, &e2))
		fprintf(stderr, "trainctl: warning: report: %s\n", e2.msg ? e2.msg : "failed");
	json_decref(rep);
	tc_err_release(&e2);
out:
	sink_close(k); /* what the hub has not taken yet: waited for, bounded (hub.h note 5) */
	spec_free(s);
	return rc;
}
