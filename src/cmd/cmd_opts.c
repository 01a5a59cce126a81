/*
 * cmd_opts.c -- what the subcommands share about their flags: where `--`
 * ends them, and the message for a flag getopt refused, with a did-you-mean
 * (core/util.h: edit_distance, as the spec's unknown keys get).  main.c
 * turns getopt's own messages off (opterr = 0): these replace them.
 */
#include "cmd/cmd.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

int cmd_dashdash(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--"))
			return i;
	return argc;
}

bool cmd_common_flag(int c, bool *json, const char **server)
{
	if (c == 'j' && json) {
		*json = true;
		return true;
	}
	if (c == 'S' && server) {
		*server = optarg;
		return true;
	}
	return false;
}

const char *cmd_nearest(const char *word, const char *const *names, size_t n)
{
	const char *best = NULL;
	/* at most 2 edits, and fewer than the word has letters */
	size_t bestd = 3, len = strlen(word);
	for (size_t i = 0; i < n; i++) {
		if (!names[i])
			continue;
		size_t d = edit_distance(names[i], word);
		if (d < bestd && d < len) {
			bestd = d;
			best = names[i];
		}
	}
	return best;
}

/*
 * torchrun's flags that have no meaning under trainctl, with what to write
 * instead.  The ones that do (--nproc-per-node, --nnodes, --standalone,
 * --max-restarts) are aliases in `run`'s own table.  Matched with '_'
 * read as '-', as torchrun itself accepts both.
 */
static const struct {
	const char *flag, *instead;
} torchrun_flags[] = {
	{ "rdzv-backend", "trainctl is its own rendezvous: leave it out (multi-node: nodes: N with "
			  "--backend slurm; docs/slurm.md)" },
	{ "rdzv-endpoint", "trainctl sets MASTER_ADDR and MASTER_PORT itself: leave it out" },
	{ "rdzv-id", "the job's name is its id: --name NAME" },
	{ "rdzv-conf", "trainctl is its own rendezvous: leave it out" },
	{ "master-addr", "trainctl sets MASTER_ADDR itself: leave it out" },
	{ "master-port", "trainctl picks a free MASTER_PORT itself: leave it out" },
	{ "node-rank", "trainctl gives each node its rank: leave it out" },
	{ "monitor-interval", "the watchdog's settings are spec keys: watchdog.* (docs/spec.md)" },
	{ "log-dir", "every rank's log is kept: trainctl logs JOB (--rank N)" },
	{ "redirects", "every rank's log is kept: trainctl logs JOB (--rank N)" },
	{ "tee", "every rank's log is kept: trainctl logs JOB (--rank N)" },
	{ "role", "leave it out: every worker runs the same command" },
	{ "run-path", "give the command after --: trainctl run -- python3 -m MODULE" },
	{ "module", "give the command after --: trainctl run -- python3 -m MODULE" },
	{ "no-python", "give the command after --: trainctl run -- PROGRAM" },
};

static int torchrun_hint(const char *cmd, const char *word, struct tc_err *err)
{
	struct sbuf w = SBUF_INIT;
	sbuf_adds(&w, word);
	for (size_t i = 0; i < w.len; i++)
		if (w.buf[i] == '_')
			w.buf[i] = '-';
	int rc = 0;
	for (size_t i = 0; i < sizeof(torchrun_flags) / sizeof(torchrun_flags[0]); i++)
		if (!strcmp(w.buf, torchrun_flags[i].flag)) {
			rc = tc_error(err, TC_EUSAGE, "%s: '--%s' is torchrun's: %s", cmd, word,
				      torchrun_flags[i].instead);
			break;
		}
	sbuf_release(&w);
	return rc;
}

int cmd_bad_option(const char *cmd, const char *shorts, int argc, char **argv,
		   const struct option *opts, struct tc_err *err)
{
	/* a long flag is behind optind; a short one is optopt */
	const char *arg = optind > 1 && optind - 1 < argc ? argv[optind - 1] : "";
	if (optopt && optopt != '?' && strchr(shorts, optopt))
		return tc_error(err, TC_EUSAGE, "%s: option '-%c' needs a value", cmd, optopt);
	/* -n is `logs --tail` only (tail -n): where it once meant one of these, say which */
	static const char *const n_was[] = { "nproc", "name", "dry-run", "count" };
	if (optopt == 'n')
		for (const struct option *o = opts; o->name; o++)
			for (size_t i = 0; i < sizeof(n_was) / sizeof(n_was[0]); i++)
				if (!strcmp(o->name, n_was[i]))
					return tc_error(err, TC_EUSAGE,
							"%s: -n is not an option here (it is `logs --tail`"
							" only): did you mean --%s?",
							cmd, o->name);
	if (optopt) {
		for (const struct option *o = opts; o->name; o++)
			if (o->val == optopt && o->has_arg == required_argument &&
			    !strncmp(arg, "--", 2) && !strncmp(arg + 2, o->name, strlen(o->name)))
				return tc_error(err, TC_EUSAGE, "%s: option '--%s' needs a value", cmd,
						o->name);
		/* --steps=1: getopt names the flag by its code, which the user never typed */
		for (const struct option *o = opts; o->name; o++) {
			size_t nl = strlen(o->name);
			if (o->val == optopt && o->has_arg == no_argument && !strncmp(arg, "--", 2) &&
			    !strncmp(arg + 2, o->name, nl) && arg[2 + nl] == '=')
				return tc_error(err, TC_EUSAGE, "%s: option '--%s' takes no value", cmd,
						o->name);
		}
		if (optopt != '?')
			return tc_error(err, TC_EUSAGE, "%s: unknown option '-%c' (see trainctl %s --help)",
					cmd, optopt, cmd);
	}
	if (strncmp(arg, "--", 2) != 0)
		return tc_error(err, TC_EUSAGE, "%s: bad option (see trainctl %s --help)", cmd, cmd);
	size_t len = strcspn(arg + 2, "=");
	struct sbuf word = SBUF_INIT;
	sbuf_add(&word, arg + 2, len);
	int trc = torchrun_hint(cmd, word.buf, err);
	if (trc) {
		sbuf_release(&word);
		return trc;
	}
	size_t n = 0;
	while (opts[n].name)
		n++;
	const char **names = xcalloc(n + 1, sizeof(*names));
	for (size_t i = 0; i < n; i++)
		names[i] = opts[i].name;
	const char *best = cmd_nearest(word.buf, names, n);
	int rc;
	if (best)
		rc = tc_error(err, TC_EUSAGE, "%s: unknown option '--%s' (did you mean '--%s'?)", cmd,
			      word.buf, best);
	else
		rc = tc_error(err, TC_EUSAGE, "%s: unknown option '--%s' (see trainctl %s --help)", cmd,
			      word.buf, cmd);
	free(names);
	sbuf_release(&word);
	return rc;
}

int cmd_check_rank(const char *verb, const char *id, long rank, long world, struct tc_err *err)
{
	if (rank < 0 || world <= 0 || rank < world)
		return 0;
	if (world == 1)
		return tc_error(err, TC_EUSAGE, "%s: job %s has one rank, 0 (not %ld)", verb, id, rank);
	return tc_error(err, TC_EUSAGE, "%s: job %s has ranks 0-%ld (not %ld)", verb, id, world - 1,
			rank);
}

/* seconds as "42s", "5m", "3h", "2d": an age */
void cmd_add_age(struct sbuf *sb, double d)
{
	if (d < 0)
		d = 0;
	/* tenths under a minute, as DURATION has: "3s" beside "3.1s" read as younger than it ran */
	if (d < 60)
		sbuf_addf(sb, "%.1fs", d);
	else if (d < 3600)
		sbuf_addf(sb, "%dm", (int)(d / 60));
	else if (d < 86400)
		sbuf_addf(sb, "%dh", (int)(d / 3600));
	else
		sbuf_addf(sb, "%dd", (int)(d / 86400));
}
