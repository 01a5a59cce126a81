/*
 * fairshare.h -- the fair-share factor of sched.h's rule (1), as a pure
 * function of usage intervals (no I/O, no clock), after Slurm's classic
 * multifactor fair share.
 *
 * For each device type, over the usage intervals of that type:
 *  - decayed usage: each interval [opened, stop) of count devices weighs
 *    count x the integral of 2^(-(now - t) / half_life) dt over it
 *    (device-seconds, recent ones counting most);
 *  - normalised usage u: a team's (or user's) decayed usage over the
 *    type's capacity: what all its devices would have given, busy all the
 *    time, decayed the same way (ndev x half_life / ln 2).  Slurm divides by
 *    the total usage instead; against the capacity, old usage fades to
 *    nothing and every factor goes back to 1 after some idle half-lives.
 *    A type the machine has no device of is divided by its total usage;
 *  - team share s_t: its guarantee of the type over the sum of the
 *    guarantees of the teams with usage or a row for the type.  A team
 *    without a guarantee (and the jobs of no team, as one team "") counts
 *    FS_NOSHARE (1/20) of the type's total guarantee; when no team has a
 *    guarantee of the type, every team counts 1 (equal shares);
 *  - a user's share within its team: s_t / n, n the team's users seen in
 *    the intervals (plus the user asked about when it has none);
 *  - effective usage (Slurm's classic): UE = u_user + (u_team - u_user) / n;
 *  - factor F = 2^(-UE / s_user), in (0, 1]: 1 for no usage, 0.5 when a
 *    user used exactly its share, lower the further over it.
 * A team that used more than its share thus sorts behind one that used
 * less, and within a team a user who used more behind one who used less.
 *
 * Ownership: the table copies what it needs of the intervals and the rows.
 */
#ifndef TC_SCHED_FAIRSHARE_H
#define TC_SCHED_FAIRSHARE_H

#include <stddef.h>

#include "sched/sched.h"

#define FS_NOSHARE 0.05 /* a team without a guarantee: this fraction of the type's guarantees */

/* One interval a job held count devices of type (stop: its end, or now while open). */
struct fs_interval {
	const char *team; /* NULL: the job had no team */
	const char *user, *type;
	int count;
	double opened, stop;
};

struct fs_table;

/*
 * The table of decayed usage of iv[0..n) at now with half_life (> 0)
 * seconds, against the guarantees in rows[0..nrows) (sched.h rule 9's
 * rows) and the capacity of the devices devs[0..ndevs) (owners ignored);
 * heap, fs_free it.
 */
struct fs_table *fs_build(const struct fs_interval *iv, size_t n,
			  const struct sched_team_limit *rows, size_t nrows,
			  const struct sched_dev *devs, size_t ndevs, double now, double half_life);
void fs_free(struct fs_table *t);

/* A job's factor and its parts (for `trainctl queue` and the API). */
struct fs_factor {
	double factor;     /* F in (0, 1] */
	double team_usage; /* u of its team: its decayed usage over the type's capacity, [0, 1] */
	double team_share; /* s_t, (0, 1] */
	double user_usage; /* u of its user in the team, over the same capacity, [0, 1] */
	double user_share; /* s_t / n */
};

/* The factor of a job of user in team (NULL: none) needing type. */
void fs_factor(const struct fs_table *t, const char *team, const char *user, const char *type,
	       struct fs_factor *out);

/* Decayed device-seconds of count devices held over [opened, stop), seen at now. */
double fs_decayed(int count, double opened, double stop, double now, double half_life);

#endif
