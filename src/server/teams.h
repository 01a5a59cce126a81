/*
 * teams.h -- the server's teams (docs/server.md, "Teams"): the `teams:`
 * section of its settings file, read and checked here, and who is in which.
 *
 *   teams:
 *     vision:
 *       members: [alice, "@cv"]          # Unix users, @group for a Unix group
 *       guarantee: {gpu: 4, cpu: 2}      # devices per type the team always gets back
 *       borrow: {gpu: 2}                 # how many more it may use while others idle (0)
 *       default: true                    # the team of a member of several teams
 *       slurm: {account: cv, qos: normal} # its jobs sent to Slurm: --account, --qos
 *       max_runtime: 24h                 # limits.max_runtime of its jobs without one
 *       retention: 30d                   # its finished jobs removed after this long
 *
 * A type a team names in neither guarantee nor borrow has guarantee 0 and
 * no limit for it: its jobs there only borrow (sched.h rules 9-11).  The
 * section is loaded on its own (teams_load), so that a reload reads it
 * again without the options of the command line.  slurm: (docs/slurm.md,
 * "Teams and Slurm accounts") names the Slurm account (default: the team's
 * name) and optional qos its Slurm jobs are charged to; Slurm schedules them.
 * Ownership: struct teams owns every string in it; teams_free frees them.
 */
#ifndef TC_SERVER_TEAMS_H
#define TC_SERVER_TEAMS_H

#include "core/err.h"

#include <stdbool.h>
#include <stddef.h>

struct team_share {
	char *type;
	int guarantee, borrow;
	int line; /* of the guarantee (else borrow) entry, for messages */
};

struct team {
	char *name;
	char **members; /* "user" or "@group" */
	size_t nmembers;
	struct team_share *share;
	size_t nshare;
	bool is_default;
	int line;
	char *slurm_account; /* NULL: no slurm: key, no --account */
	char *slurm_qos;     /* NULL: none given */
	/*
	 * The server's defaults for this team's jobs, in place of
	 * --default-max-runtime and --retention (0: the server's): the time
	 * limit of a job whose spec has none, and how long its finished jobs
	 * are kept (seconds).
	 */
	long max_runtime;
	double retention;
};

struct teams {
	char *file;
	struct team *t;
	size_t n;
	/*
	 * The fair_share: section of the same file (sched/fairshare.h), read
	 * with the teams so that a reload applies it:
	 *   fair_share:
	 *     enabled: true       # default: on when the file has teams, else off
	 *     half_life: 7d       # usage weighs half after this long (s, m, h, d, w)
	 */
	bool fs_enabled_set, fs_enabled;
	double fs_half_life; /* seconds; 0: not set */
};

/* The teams: and fair_share: sections of path (none: n == 0); TC_ESPEC
 * "FILE:LINE: teams.NAME.KEY: ..." or "FILE:LINE: fair_share.KEY: ...". */
int teams_load(const char *path, struct teams *out, struct tc_err *err);
/* Sum of guarantees of a type over what the machine has (types[i] has have[i]): TC_ESPEC. */
int teams_check_devices(const struct teams *t, const char *const *types, const int *have,
			size_t ntypes, struct tc_err *err);
void teams_free(struct teams *t);

/* Is user a member of t (by name, or through a @group: a member or its primary group)? */
bool teams_member(const struct team *t, const char *user);
/*
 * The team of user's job: asked (a name), else the user's one team, else
 * its default team.  NULL with no error when there are no teams; TC_EUSAGE
 * with the reason for a team that does not exist or the user is not in.
 */
int teams_pick(const struct teams *t, const char *user, const char *asked,
	       const struct team **out, struct tc_err *err);
const struct team *teams_find(const struct teams *t, const char *name);
/* t's share of type, or NULL (not limited). */
const struct team_share *teams_share(const struct team *t, const char *type);

#endif
