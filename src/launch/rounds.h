/*
 * rounds.h -- the rounds of a multi-node job (docs/slurm.md "Rounds"):
 * one record per attempt of who ran it, written by the driver
 * (multinode.c) through its sink as the job's "round" note
 * (jobs/state.h JOB_NOTE_ROUND), read back by show (jobs.h job_rounds).
 *
 * A round's record: its attempt, node count and members (host by node
 * rank), the members of the round before that it left out and why (the
 * node was lost, failed its health check or an on_log action excluded it,
 * with the cause the node's outcome gives), the spares that took their
 * node ranks, and when the driver saw the round before fail (the loss:
 * show measures from it to the round's first training step).
 *
 * Ownership: struct launch_rounds lives with the driver; a zeroed one is
 * the state before the first attempt; launch_rounds_release frees it.
 */
#ifndef TC_LAUNCH_ROUNDS_H
#define TC_LAUNCH_ROUNDS_H

#include <stdbool.h>

#include "core/strvec.h"

struct sink;

struct launch_rounds {
	struct strvec prev; /* the members of the round before, by node rank */
	void *why;          /* json_t: host -> {"why", "cause"} named by the round before's end */
	double failed_at;   /* when the driver saw the round before fail; 0: it did not */
};

/*
 * Attempt `attempt` starts on members (its hosts by node rank; none: the
 * backend places the nodes) with `nodes` nodes: its round note is written
 * through k.  A failed write is said through say and the job goes on.
 */
void launch_round_begin(struct launch_rounds *r, struct sink *k, const char *job_id,
			int attempt, int nodes, const struct strvec *members,
			void (*say)(void *arg, const char *msg), void *arg);
/*
 * The attempt ended (failed: it failed): which of its nodes the next
 * round may leave out and why, from the nodes' outcomes
 * (attempts/<attempt>/node-<n>.json in run_dir), and the moment of the loss.
 */
void launch_round_end(struct launch_rounds *r, const char *run_dir, int attempt, int nodes,
		      bool failed);
void launch_rounds_release(struct launch_rounds *r);
/*
 * A job on one machine whose spec asks for spares (s->spares > 0): its
 * spares_ignored note says they do nothing here.  A note that cannot be
 * written is dropped: the job runs as it would without it.
 */
struct spec;
void launch_spares_ignored(const struct spec *s, struct sink *k, const char *job_id);

#endif
