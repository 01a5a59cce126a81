/*
 * command.c -- is a list command's program there?  (spec_check_command)
 *
 * The lookup is execvp's, as proc.c does it for the workers: a name with a
 * '/' is a path (relative to workdir), any other name is searched on the
 * PATH the workers get (the spec's env: PATH, else ours, else
 * "/bin:/usr/bin"), relative PATH entries following workdir.  A miss says
 * which program and, when one is close, what it may have meant.  Each
 * endpoint's program (its kind's row in endpoint/endpoint.c) is looked up
 * the same way.  Also the argv the workers run (spec_worker_argv): one
 * place builds it for the supervisor, job.env and `show`.
 */
#include "spec/spec.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "endpoint/endpoint.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_PATH "/bin:/usr/bin" /* execvp's, for an environment without PATH */

static const char *workers_path(const struct spec *s)
{
	for (size_t i = 0; i < s->nenv; i++)
		if (!strcmp(s->env[i].key, "PATH") && s->env[i].from == ENV_FROM_VALUE)
			return s->env[i].val ? s->env[i].val : "";
	const char *p = getenv("PATH");
	return p ? p : DEFAULT_PATH;
}

/* dir (relative to workdir when it does not start with '/') + "/" + name */
static void join(struct sbuf *out, const char *workdir, const char *dir, size_t dlen,
		 const char *name)
{
	sbuf_reset(out);
	if ((!dlen || dir[0] != '/') && workdir)
		sbuf_addf(out, "%s/", workdir);
	if (dlen)
		sbuf_add(out, dir, dlen);
	else
		sbuf_addch(out, '.');
	if (name)
		sbuf_addf(out, "/%s", name);
}

/* 0: runnable; ENOENT: not there; EACCES: there but not executable */
static int probe(const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0 || S_ISDIR(st.st_mode))
		return ENOENT;
	return access(path, X_OK) == 0 ? 0 : EACCES;
}

struct guess {
	const char *name;
	size_t limit; /* farthest edit distance still worth suggesting */
	size_t best_d;
	char *best;
};

/* The closest executable name in one folder. */
static void guess_in(struct guess *g, const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct sbuf p = SBUF_INIT;
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		size_t dist = edit_distance(e->d_name, g->name);
		if (dist == 0 || dist > g->limit || dist >= g->best_d)
			continue;
		sbuf_reset(&p);
		sbuf_addf(&p, "%s/%s", dir, e->d_name);
		if (probe(p.buf) != 0)
			continue;
		g->best_d = dist;
		free(g->best);
		g->best = xstrdup(e->d_name);
	}
	closedir(d);
	sbuf_release(&p);
}

static size_t guess_limit(const char *name)
{
	size_t n = strlen(name);
	return n <= 3 ? 1 : 2; /* "pyhton3" -> "python3", but not "ls" -> "cc" */
}

/*
 * Look prog up as execvp would for the workers: 0, ENOENT or EACCES; on a
 * miss a close name goes to hint (" (did you mean 'x'?)").
 */
static int lookup(const struct spec *s, const char *prog, struct sbuf *hint)
{
	struct sbuf cand = SBUF_INIT;
	int found = ENOENT;
	struct guess g = { .best_d = (size_t)-1 };
	const char *slash = strrchr(prog, '/');
	if (slash) {
		join(&cand, s->workdir, prog, strlen(prog), NULL);
		found = probe(cand.buf);
		if (found == ENOENT && slash[1]) {
			/* a close name in the same folder */
			struct sbuf dir = SBUF_INIT;
			join(&dir, s->workdir, prog, (size_t)(slash - prog), NULL);
			g.name = slash + 1;
			g.limit = guess_limit(g.name);
			guess_in(&g, dir.buf);
			if (g.best)
				sbuf_addf(hint, " (did you mean '%.*s%s'?)", (int)(slash + 1 - prog), prog,
					  g.best);
			sbuf_release(&dir);
		}
	} else {
		const char *search = workers_path(s);
		bool denied = false;
		for (const char *d = search;;) {
			const char *end = strchrnul(d, ':');
			join(&cand, s->workdir, d, (size_t)(end - d), prog);
			int r = probe(cand.buf);
			if (r == 0) {
				found = 0;
				break;
			}
			denied |= r == EACCES;
			if (!*end)
				break;
			d = end + 1;
		}
		if (found && denied)
			found = EACCES;
		if (found == ENOENT) {
			g.name = prog;
			g.limit = guess_limit(prog);
			for (const char *d = search;;) {
				const char *end = strchrnul(d, ':');
				join(&cand, s->workdir, d, (size_t)(end - d), NULL);
				guess_in(&g, cand.buf);
				if (!*end)
					break;
				d = end + 1;
			}
			if (g.best)
				sbuf_addf(hint, " (did you mean '%s'?)", g.best);
		}
	}
	free(g.best);
	sbuf_release(&cand);
	return found;
}

/*
 * Each endpoint's program (its kind's row), on this machine: a kind that
 * runs in the image of an image job is the image's question, and a generic
 * endpoint's command is a shell's.
 */
static int check_endpoints(const struct spec *s, struct tc_err *err)
{
	int rc = 0;
	for (size_t i = 0; i < s->nendpoints && !rc; i++) {
		const struct spec_endpoint *e = &s->endpoints[i];
		const struct endpoint_kind *k = endpoint_kind_find(e->kind);
		if (!k || !k->program || (s->container.image && !k->on_host))
			continue;
		struct sbuf hint = SBUF_INIT, at = SBUF_INIT;
		if (k->also_in)
			sbuf_addf(&at, "%s/%s", k->also_in, k->program);
		if ((!k->also_in || probe(at.buf) != 0) && lookup(s, k->program, &hint) != 0)
			rc = tc_error(err, TC_ESPEC, "endpoints: %s (kind %s): '%s' is not installed "
				      "(not found on PATH%s%s)%s", e->name ? e->name : e->kind, e->kind,
				      k->program, k->also_in ? " nor in " : "", k->also_in ? k->also_in : "",
				      hint.buf);
		sbuf_release(&hint);
		sbuf_release(&at);
	}
	return rc;
}

int spec_check_command(const struct spec *s, struct tc_err *err)
{
	if (!s->argv.nr || s->shell || s->container.image)
		return check_endpoints(s, err); /* a string's words are the shell's, an image's its own */
	const char *prog = s->argv.v[0];
	struct sbuf where = SBUF_INIT, hint = SBUF_INIT;
	if (s->command_set)
		sbuf_addf(&where, "--set %s: command", s->command_set);
	else if (s->source)
		sbuf_addf(&where, "%s:%d: command", s->source, s->command_line > 0 ? s->command_line : 1);
	else
		sbuf_adds(&where, "run");
	int found = lookup(s, prog, &hint);
	int rc = 0;
	if (found == EACCES)
		rc = tc_error(err, TC_ESPEC, "%s: '%s' is not executable", where.buf, prog);
	else if (found && strchr(prog, '/'))
		rc = tc_error(err, TC_ESPEC, "%s: '%s' does not exist%s", where.buf, prog, hint.buf);
	else if (found)
		rc = tc_error(err, TC_ESPEC, "%s: '%s' is not found on PATH%s", where.buf, prog,
			      hint.buf);
	sbuf_release(&where);
	sbuf_release(&hint);
	return rc ? rc : check_endpoints(s, err);
}

void spec_worker_argv(const struct spec *s, struct strvec *argv)
{
	if (s->shell) {
		/*
		 * args reach the script as "$@", never through the shell's parser;
		 * a command that uses "$@" itself places them, others get them
		 * appended.
		 */
		struct sbuf cmd = SBUF_INIT;
		bool places_args = strstr(s->shell, "$@") || strstr(s->shell, "$*");
		sbuf_addf(&cmd, places_args || !s->nargs ? "%s" : "%s \"$@\"", s->shell);
		strvec_push(argv, "/bin/sh");
		strvec_push(argv, "-c");
		strvec_push(argv, cmd.buf);
		strvec_push(argv, "trainctl-job");
		sbuf_release(&cmd);
	} else {
		strvec_pushv(argv, (const char *const *)s->argv.v);
	}
	for (size_t i = 0; i < s->nargs; i++) {
		strvec_pushf(argv, "--%s", s->args[i].key);
		if (s->args[i].val)
			strvec_push(argv, s->args[i].val);
	}
}
