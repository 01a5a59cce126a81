/*
 * elastic_int.h -- private to src/launch/: what the multi-node driver
 * (multinode.c) does when a job has fewer nodes (docs/slurm.md "Fewer
 * nodes", elastic.c): a node left out for good given back to the
 * scheduler, the wait for nodes below nodes.min, and the parallel: auto
 * plan of an attempt on fewer nodes than nodes.max.  It works on the
 * driver's member lists (borrowed).
 */
#ifndef TC_LAUNCH_ELASTIC_INT_H
#define TC_LAUNCH_ELASTIC_INT_H

#include "hub/sink.h"
#include "launch/launch.h"

struct elastic {
	const struct spec *s;
	const struct launch_backend_ops *ops;
	struct sink *sink;
	const char *job_id;
	void (*say)(void *ctx, const char *msg);
	void *say_ctx;
	struct strvec *members, *spares; /* the hosts by node rank; the allocation's others */
	struct sbuf *exclude;            /* hosts left out: "n1,n3" */
	struct sbuf *change;             /* the attempt's change of members (its running event) */
	bool release_refused;            /* the backend kept a host: no more are given back */
};

/*
 * Below nodes.min (member n left out, no spare): wait up to nodes.wait for
 * a host of the allocation that was left out (a member, a spare not given
 * back) to be usable again (launch_backend_ops.usable), said first in a
 * wait_nodes note; the first one is taken back (out of exclude).  0: look
 * at member n again; TC_EJOB "waited 2m for nodes: 1 node up, nodes.min is
 * 2 (...)" when none came back.
 */
int elastic_wait(struct elastic *e, size_t n, struct tc_err *err);
/*
 * The spares left out (a member a spare replaced or the job went on
 * without, a spare that failed its check) given back to the scheduler
 * where the backend can (launch_backend_ops.release) and forgotten, said
 * in change.  One it keeps stays in the allocation, and no more are tried.
 */
void elastic_release(struct elastic *e);
/*
 * parallel: auto on nodes fewer than nodes.max: the planner's plan for
 * that count (spec_plan_for, the call spec loading makes for nodes.max;
 * each node supervisor makes the same), said in change ("plan dp=2 tp=1
 * pp=1 for 1 node").  No plan for that count: TC_EJOB.
 */
int elastic_plan(struct elastic *e, int nodes, struct tc_err *err);

#endif
