/*
 * plan.h -- parallel-strategy planning: exact pipeline partition, instance
 * synthesis and evaluation, and the data / tensor / pipeline strategy search
 * (what APSS trains a network to guess; here solved exactly).
 *
 * THE PARTITION PROBLEM (docs/plan.md; its files: docs/formats.md)
 *
 * An instance has G layer costs x[0..G-1] and a (G-1) x S boundary-cost
 * matrix C, C[j][k] = cost of placing the k-th cut (k = 0..S-1, in position
 * order) right after layer j.  A partition is S cut positions
 * c_0 < ... < c_{S-1} in [0, G-2], giving S+1 non-empty contiguous stages.
 *   training objective: max stage sum + sum_k C[c_k][k]
 *   pipeline objective: (B-1) * max stage sum + sum_k C[c_k][k] + sum x
 *
 * ALGORITHM (src/plan/solve.c; exact, proven against brute force in tests)
 *
 * The bottleneck of any partition is one of the O(G^2) contiguous segment
 * sums.  For a fixed bound T, f(T) = least communication sum over partitions
 * whose stages all sum to <= T is a DP over (cut index k, position p): the
 * feasible previous cut positions for a stage ending at p form a window
 * whose left end never moves back, so a monotone deque gives each state in
 * O(1), and cut k only ranges over G - S positions: O(S (G - S)) per T.
 * The answer is min_T w*T + f(T) (w = 1 or B-1).  Instead of one DP per
 * candidate T (the O(G^3 S) baseline in bench/), one bi-criteria DP keeps
 * per state the Pareto front of (largest stage so far, comm so far):
 * fronts start at the least feasible bottleneck (found by bisection with a
 * greedy test), an incumbent from a few golden-section probes of f bounds
 * the useful stage sums (narrower windows), and labels whose cost plus a
 * lower bound of the remaining cuts reach the incumbent are dropped.  The
 * cuts are rebuilt by one windowed DP with parents at the optimal T.
 * Worst case O(G^3 S) time; ~0.2 ms at G = 102, S = 63.  Memory O(G S).
 * The strategy search adds a second bottleneck (per-stage data-parallel
 * all-reduce), searched on an outer level by interval bisection over its
 * sorted values (the inner optimum is non-increasing in it), and
 * per-stage memory caps (more windows in the same DPs).
 *
 * OWNERSHIP: every struct filled by a plan_* call owns its arrays and is
 * released by the matching *_release / *_free; releasing a zeroed struct or
 * NULL is a no-op.  Functions return 0 or a negative TC_E* with err filled;
 * bad input is TC_EINPUT (exit 2) and names the instance and the field.
 */
#ifndef TC_PLAN_H
#define TC_PLAN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/err.h"
#include "core/sbuf.h"

/* ---- instances ---------------------------------------------------------- */

struct plan_instance {
	int g;              /* layers (graph_size), >= 1 */
	int s;              /* cuts (num_split), 0 <= s <= g-1 */
	double *x;          /* g layer costs, finite, >= 0 */
	double *c;          /* (g-1) x s boundary costs, c[j*s + k] */
	long micro_batches; /* 0 when the instance does not say */
};

void plan_instance_release(struct plan_instance *in);
/* Check shape and values; "what" prefixes the message (e.g. "f.jsonl: instance 3"). */
int plan_instance_check(const struct plan_instance *in, const char *what, struct tc_err *err);

/* A reader of instance files: JSON lines (one instance per line) or, for a
 * path ending in ".csv", one instance in CSV.  "-" reads JSON lines on stdin. */
struct plan_reader;
int plan_reader_open(const char *path, struct plan_reader **out, struct tc_err *err);
/* 1 with *in filled (release it), 0 at the end, or a negative TC_E*. */
int plan_reader_next(struct plan_reader *r, struct plan_instance *in, struct tc_err *err);
/* Number of the instance last returned (0-based) and its line. */
long plan_reader_index(const struct plan_reader *r);
void plan_reader_free(struct plan_reader *r);

/* Parse one instance from a JSON line / a CSV text; what names it in errors. */
int plan_instance_from_json(const char *line, size_t len, const char *what,
			    struct plan_instance *out, struct tc_err *err);
int plan_instance_from_csv(const char *text, const char *what,
			   struct plan_instance *out, struct tc_err *err);
/* Append the instance as one JSON line (with '\n'). */
void plan_instance_to_json(const struct plan_instance *in, struct sbuf *out);

/* APSS's synthesizer: x and C uniform on [0, 1) (multiples of 1e-6, so the
 * written text is the instance exactly), stream seeded by seed.  Instance i
 * of a set is the same whatever n is. */
struct plan_synth {
	uint64_t state[4];
};
void plan_synth_init(struct plan_synth *sy, uint64_t seed);
void plan_synth_next(struct plan_synth *sy, int g, int s, struct plan_instance *out);
/* Write n instances as JSON lines to f. */
int plan_synth_write(FILE *f, int g, int s, long n, uint64_t seed, struct tc_err *err);

/* ---- exact partition ---------------------------------------------------- */

enum plan_objective { PLAN_OBJ_TRAIN, PLAN_OBJ_PIPELINE };

struct plan_result {
	int s;
	int *cuts;          /* s positions, ascending: cut right after layer cuts[k] */
	int *stages;        /* s+1 stage sizes */
	double objective;   /* the whole objective */
	double bottleneck;  /* max stage sum */
	double comm;        /* sum of boundary costs */
	double sum_x;       /* sum of x (part of the pipeline objective) */
	long micro_batches; /* B used (pipeline), 0 for train */
};
void plan_result_release(struct plan_result *r);

/* Exact optimum.  For PLAN_OBJ_PIPELINE, micro_batches >= 1. */
int plan_partition(const struct plan_instance *in, enum plan_objective obj,
		   long micro_batches, struct plan_result *out, struct tc_err *err);
/* Score given cuts (checked: s ascending positions in [0, g-2]); fills out
 * (cuts copied) or fails with TC_EINPUT naming what. */
int plan_score(const struct plan_instance *in, enum plan_objective obj,
	       long micro_batches, const int *cuts, int ncuts, const char *what,
	       struct plan_result *out, struct tc_err *err);

/* ---- eval --------------------------------------------------------------- */

struct plan_eval_opts {
	enum plan_objective obj;
	long micro_batches;      /* 0: take each instance's micro_batches */
	const char *against;     /* partitions file to score, or NULL */
	FILE *partitions_out;    /* if set, our partitions as JSON lines */
};
struct plan_eval {
	long n;
	double mean, stderr_;         /* our objective: mean, std error (n-1) */
	double seconds_per_instance;  /* solve time only */
	double total_seconds;         /* read + solve + score */
	bool has_against;
	double their_mean, their_stderr;
	double mean_gap;              /* mean of (theirs-ours)/ours over ours > 0 */
	double max_gap;
	double mean_abs_gap;          /* mean of theirs - ours */
	double gap_of_means;          /* their_mean / mean - 1 */
	long optimal;                 /* instances where theirs is optimal */
};
int plan_eval_file(const char *path, const struct plan_eval_opts *o,
		   struct plan_eval *out, struct tc_err *err);
/* Partition every instance of path and write results to out (JSON lines,
 * or an aligned table when table is set). */
int plan_partition_file(const char *path, enum plan_objective obj, long micro_batches,
			bool table, FILE *out, struct tc_err *err);
void plan_result_to_json(const struct plan_result *r, long index, enum plan_objective obj,
			 struct sbuf *out);
void plan_eval_print(const struct plan_eval *e, enum plan_objective obj, bool json, FILE *out);

/* ---- strategy search ---------------------------------------------------- */

/* What the planner takes on (bigger inputs are TC_EINPUT naming the key):
 * nodes and devices per node in a cluster file, devices in all. */
#define PLAN_MAX_NODES 100000
#define PLAN_MAX_DEVICES_PER_NODE 1024
#define PLAN_MAX_DEVICES (1 << 20)

struct plan_cluster {
	int nodes;                 /* >= 1 */
	int devices_per_node;      /* >= 1 */
	double intra_bw;           /* bytes/s inside a node */
	double inter_bw;           /* bytes/s between nodes */
	double device_memory;      /* bytes */
	double memory_reserve;     /* bytes kept free per device */
	double device_flops;       /* effective FLOP/s per device */
};
/* Defaults (docs/plan.md): 1 node x 8, 150 GB/s, 12.5 GB/s, 80 GiB,
 * 1 GiB reserve, 125 TFLOP/s effective. */
void plan_cluster_defaults(struct plan_cluster *c);
/* Overlay the keys of a cluster YAML file onto c. */
int plan_cluster_load(const char *path, struct plan_cluster *c, struct tc_err *err);
/* The same from len bytes of YAML; name names them in messages. */
int plan_cluster_parse(const char *text, size_t len, const char *name, struct plan_cluster *c,
		       struct tc_err *err);
/* "80GiB", "512MiB", "1.5e9", "40GB" -> bytes. */
bool plan_parse_size(const char *s, double *out);

struct plan_strategy_req {
	const char *model;         /* built-in name (gpt2-small ... gpt3-175b) or a YAML path */
	int devices;               /* total; 0 = nodes x devices_per_node of the cluster */
	int nodes;                 /* 0 = the cluster's */
	long global_batch;         /* >= 1 */
	const char *cluster_file;  /* NULL = defaults */
	double memory;             /* bytes per device; 0 = the cluster's */
	int seq_len;               /* 0 = the model's */
};

struct plan_candidate {
	int dp, tp, pp, mb;
	long micro_batches;        /* global_batch / (dp * mb) */
	int *layers;               /* pp stage sizes, in layers */
	double *peak_mem;          /* pp peak bytes per device, per stage */
	double step_time;          /* seconds */
	double bottleneck;         /* max stage time per micro-batch */
	double comm;               /* pipeline boundary time */
	double allreduce;          /* max per-stage data-parallel all-reduce */
};
void plan_candidate_release(struct plan_candidate *c);

struct plan_strategy {
	char *model_name;
	int num_layers;
	struct plan_cluster cluster;
	long global_batch;
	int n;                     /* feasible candidates, best first */
	struct plan_candidate *cand;
	int enumerated;            /* candidates enumerated */
	int rejected_memory;       /* enumerated but no partition fits memory */
};
void plan_strategy_free(struct plan_strategy *st);

/* Search every (tp, dp, mb) of the cluster; ranked feasible candidates.
 * A model that fits no candidate is TC_EINPUT with the memory it needs. */
int plan_strategy_search(const struct plan_strategy_req *req, struct plan_strategy **out,
			 struct tc_err *err);
/* The call for job specs: the best candidate only (out owns its arrays). */
int plan_strategy_best(const struct plan_strategy_req *req, struct plan_candidate *out,
		       struct tc_err *err);
void plan_strategy_print(const struct plan_strategy *st, int top, bool json, FILE *out);

/* Names of the built-in models, NULL-terminated. */
extern const char *const plan_builtin_models[];

#endif
