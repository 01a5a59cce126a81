/* test_fairshare.c -- src/sched/fairshare.c: decayed usage, shares and the
 * factor as fairshare.h states them, and the factor's place in rule (1) */
#include "test.h"

#include "sched/fairshare.h"
#include "sched/sched.h"

#include <math.h>

#define NOW 1e9
#define DAY 86400.0

static bool near(double a, double b)
{
	return fabs(a - b) < 1e-9 * (fabs(a) + fabs(b) + 1);
}

/* The machine: 8 gpus; the capacity u divides by, for half-life h. */
static const struct sched_dev GPUS[8] = {
	{ "gpu", 0, SCHED_FREE }, { "gpu", 1, SCHED_FREE }, { "gpu", 2, SCHED_FREE },
	{ "gpu", 3, SCHED_FREE }, { "gpu", 4, SCHED_FREE }, { "gpu", 5, SCHED_FREE },
	{ "gpu", 6, SCHED_FREE }, { "gpu", 7, SCHED_FREE },
};
static double cap(double h)
{
	return 8 * h / M_LN2;
}

TEST(decayed_usage_halves_each_half_life)
{
	/* one device for one second, h ago: weight 2^-(age/h) */
	double h = 100;
	double fresh = fs_decayed(1, NOW - 1, NOW, NOW, h);
	double old = fs_decayed(1, NOW - h - 1, NOW - h, NOW, h);
	CHECK(near(old / fresh, 0.5));
	/* counts scale; an interval of h seconds ending now weighs h / (2 ln 2) */
	CHECK(near(fs_decayed(4, NOW - h, NOW, NOW, h), 4 * h * 0.5 / M_LN2));
	/* empty, reversed, past now (clipped), no half-life */
	CHECK(fs_decayed(1, NOW, NOW, NOW, h) == 0);
	CHECK(fs_decayed(1, NOW, NOW - 5, NOW, h) == 0);
	CHECK(near(fs_decayed(1, NOW - 10, NOW + 50, NOW, h), fs_decayed(1, NOW - 10, NOW, NOW, h)));
	CHECK(fs_decayed(1, NOW - 10, NOW, NOW, 0) == 0);
}

TEST(no_usage_is_factor_one)
{
	struct sched_team_limit rows[] = { { "a", "gpu", 2, 0 }, { "b", "gpu", 2, 0 } };
	struct fs_table *t = fs_build(NULL, 0, rows, 2, GPUS, 8, NOW, DAY);
	struct fs_factor f;
	fs_factor(t, "a", "alice", "gpu", &f);
	CHECK(f.factor == 1);
	CHECK(near(f.team_share, 0.5));
	CHECK(near(f.user_share, 0.5));
	CHECK(f.team_usage == 0 && f.user_usage == 0);
	fs_factor(t, NULL, "zed", "cpu", &f); /* no team, a type nobody has: alone, share 1 */
	CHECK(f.factor == 1 && near(f.team_share, 1));
	fs_free(t);
	fs_factor(NULL, "a", "alice", "gpu", &f); /* no table at all */
	CHECK(f.factor == 1);
}

TEST(team_over_its_share_sorts_behind)
{
	/* equal guarantees; a used 3 devices for an hour, b 1 */
	struct sched_team_limit rows[] = { { "a", "gpu", 4, 0 }, { "b", "gpu", 4, 0 } };
	struct fs_interval iv[] = {
		{ "a", "alice", "gpu", 3, NOW - 3600, NOW },
		{ "b", "bob", "gpu", 1, NOW - 3600, NOW },
	};
	struct fs_table *t = fs_build(iv, 2, rows, 2, GPUS, 8, NOW, DAY);
	struct fs_factor fa, fb;
	fs_factor(t, "a", "alice", "gpu", &fa);
	fs_factor(t, "b", "bob", "gpu", &fb);
	double ua = fs_decayed(3, NOW - 3600, NOW, NOW, DAY) / cap(DAY);
	CHECK(near(fa.team_usage, ua) && near(fb.team_usage, ua / 3));
	CHECK(near(fa.factor, exp2(-ua / 0.5)));
	CHECK(near(fb.factor, exp2(-ua / 3 / 0.5)));
	CHECK(fb.factor > fa.factor);
	fs_free(t);
	/* a team that has held half the machine, its share, for ever: 0.5 */
	struct fs_interval even[] = { { "a", "alice", "gpu", 4, NOW - 100 * 60, NOW } };
	t = fs_build(even, 1, rows, 2, GPUS, 8, NOW, 60);
	fs_factor(t, "a", "alice", "gpu", &fa);
	CHECK(near(fa.team_usage, 0.5));
	CHECK(near(fa.factor, 0.5));
	fs_free(t);
}

TEST(shares_follow_the_guarantees_and_no_guarantee_is_small)
{
	/* a guaranteed 6, b 2: the same usage costs b three times as much */
	struct sched_team_limit rows[] = { { "a", "gpu", 6, 0 }, { "b", "gpu", 2, 0 } };
	struct fs_interval iv[] = {
		{ "a", "alice", "gpu", 1, NOW - 100, NOW },
		{ "b", "bob", "gpu", 1, NOW - 100, NOW },
		{ NULL, "nobody", "gpu", 1, NOW - 100, NOW },
	};
	struct fs_table *t = fs_build(iv, 3, rows, 2, GPUS, 8, NOW, DAY);
	struct fs_factor fa, fb, fn, fc;
	fs_factor(t, "a", "alice", "gpu", &fa);
	fs_factor(t, "b", "bob", "gpu", &fb);
	fs_factor(t, NULL, "nobody", "gpu", &fn);
	fs_factor(t, "c", "carol", "gpu", &fc); /* a team with no row and no usage */
	double sum = 6 + 2 + FS_NOSHARE * 8;
	CHECK(near(fa.team_share, 6 / sum) && near(fb.team_share, 2 / sum));
	CHECK(near(fn.team_share, FS_NOSHARE * 8 / sum));
	CHECK(fa.factor > fb.factor && fb.factor > fn.factor);
	CHECK(fc.factor == 1);
	fs_free(t);
}

TEST(users_within_a_team_split_its_share)
{
	struct sched_team_limit rows[] = { { "a", "gpu", 4, 0 }, { "b", "gpu", 4, 0 } };
	/* a's alice used everything; a's al nothing yet; b's bob nothing */
	struct fs_interval iv[] = {
		{ "a", "alice", "gpu", 2, NOW - 600, NOW },
		{ "a", "al", "gpu", 1, NOW - 1, NOW - 1 }, /* seen, no usage */
	};
	struct fs_table *t = fs_build(iv, 2, rows, 2, GPUS, 8, NOW, DAY);
	struct fs_factor alice, al, bob, newcomer;
	fs_factor(t, "a", "alice", "gpu", &alice);
	fs_factor(t, "a", "al", "gpu", &al);
	fs_factor(t, "b", "bob", "gpu", &bob);
	fs_factor(t, "a", "ann", "gpu", &newcomer);
	CHECK(near(alice.user_share, 0.25) && near(al.user_share, 0.25));
	/* Slurm's classic effective usage: al inherits half the team's */
	double u = fs_decayed(2, NOW - 600, NOW, NOW, DAY) / cap(DAY);
	CHECK(near(alice.user_usage, u) && near(alice.team_usage, u) && al.user_usage == 0);
	CHECK(near(alice.factor, exp2(-u / 0.25)));
	CHECK(near(al.factor, exp2(-u / 2 / 0.25)));
	CHECK(bob.factor == 1);
	CHECK(bob.factor > al.factor && al.factor > alice.factor);
	CHECK(near(newcomer.user_share, 0.5 / 3)); /* ann joins the two seen */
	fs_free(t);
}

TEST(old_usage_fades)
{
	/* a used the type 10 half-lives ago, b just now: b's team usage dominates */
	double h = 60;
	struct sched_team_limit rows[] = { { "a", "gpu", 1, 0 }, { "b", "gpu", 1, 0 } };
	struct fs_interval iv[] = {
		{ "a", "alice", "gpu", 8, NOW - 11 * h, NOW - 10 * h },
		{ "b", "bob", "gpu", 1, NOW - h, NOW },
	};
	struct fs_table *t = fs_build(iv, 2, rows, 2, GPUS, 8, NOW, h);
	struct fs_factor fa, fb;
	fs_factor(t, "a", "alice", "gpu", &fa);
	fs_factor(t, "b", "bob", "gpu", &fb);
	CHECK(fa.team_usage < 0.001);
	CHECK(fa.factor > fb.factor);
	fs_free(t);
	/* seen right after the interval, a's usage dominates instead */
	t = fs_build(iv, 1, rows, 2, GPUS, 8, NOW - 10 * h, h);
	fs_factor(t, "a", "alice", "gpu", &fa);
	CHECK(fa.factor < 0.5);
	fs_free(t);
}

TEST(factors_go_back_to_one_when_the_machine_idles)
{
	/* a held the whole machine for 4 half-lives, then nobody used it */
	double h = 30;
	struct sched_team_limit rows[] = { { "a", "gpu", 4, 0 }, { "b", "gpu", 4, 0 } };
	struct fs_interval iv[] = { { "a", "alice", "gpu", 8, NOW - 4 * h, NOW } };
	double f[3];
	for (int k = 0; k < 3; k++) {
		struct fs_table *t = fs_build(iv, 1, rows, 2, GPUS, 8, NOW + k * 5 * h, h);
		struct fs_factor fa;
		fs_factor(t, "a", "alice", "gpu", &fa);
		f[k] = fa.factor;
		fs_free(t);
	}
	CHECK(f[0] < 0.3 && f[0] < f[1] && f[1] < f[2] && f[2] > 0.99);
	/* without the machine's devices u is over the total usage: a pause changes nothing */
	struct fs_table *t = fs_build(iv, 1, rows, 2, NULL, 0, NOW + 10 * h, h);
	struct fs_factor fa;
	fs_factor(t, "a", "alice", "gpu", &fa);
	CHECK(near(fa.team_usage, 1) && near(fa.factor, 0.25));
	fs_free(t);
}

TEST(rule_1_factor_between_priority_and_submission)
{
	struct sched_job jobs[] = {
		{ .id = "old", .user = "alice", .type = "gpu", .priority = 5, .created = 1, .fairshare = 0.2 },
		{ .id = "new", .user = "bob", .type = "gpu", .priority = 5, .created = 2, .fairshare = 0.9 },
		{ .id = "high", .user = "alice", .type = "gpu", .priority = 9, .created = 3, .fairshare = 0.1 },
		{ .id = "tie", .user = "carol", .type = "gpu", .priority = 5, .created = 0, .fairshare = 0.2 },
	};
	size_t idx[] = { 0, 1, 2, 3 };
	sched_sort(jobs, idx, 4);
	CHECK_STR(jobs[idx[0]].id, "high"); /* priority first */
	CHECK_STR(jobs[idx[1]].id, "new");  /* then the factor */
	CHECK_STR(jobs[idx[2]].id, "tie");  /* then submission time */
	CHECK_STR(jobs[idx[3]].id, "old");
}

TEST(fair_share_order_starts_the_other_team_first)
{
	/* one free gpu; a's job was submitted first but a used the type */
	struct sched_team_limit rows[] = { { "a", "gpu", 1, 0 }, { "b", "gpu", 1, 0 } };
	struct fs_interval iv[] = { { "a", "alice", "gpu", 1, NOW - 600, NOW - 1 } };
	struct fs_table *t = fs_build(iv, 1, rows, 2, GPUS, 8, NOW, 300);
	struct fs_factor fa, fb;
	fs_factor(t, "a", "alice", "gpu", &fa);
	fs_factor(t, "b", "bob", "gpu", &fb);
	struct sched_job jobs[] = {
		{ .id = "ja", .user = "alice", .type = "gpu", .created = 1, .count = 1,
		  .state = SJ_QUEUED, .team = "a", .fairshare = fa.factor },
		{ .id = "jb", .user = "bob", .type = "gpu", .created = 2, .count = 1,
		  .state = SJ_QUEUED, .team = "b", .fairshare = fb.factor },
	};
	struct sched_dev dev = { "gpu", 0, SCHED_FREE };
	size_t q[] = { 0, 1 };
	sched_sort(jobs, q, 2);
	struct sched_in in = { jobs, 2, q, 2, &dev, 1, NULL, 0, NOW, rows, 2 };
	struct sched_decision d;
	sched_decide(&in, &d);
	CHECK_INT(d.action, SCHED_START);
	CHECK_STR(jobs[d.job].id, "jb");
	sched_decision_release(&d);
	fs_free(t);
}
