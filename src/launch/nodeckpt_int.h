/*
 * nodeckpt_int.h -- private to src/launch/: the checkpoints on one node's
 * own disk (nodeckpt.c), for a node of a multi-node job that reports to
 * its hub and shares no run folder with the driver.
 *
 *   node_ckpts_start  a thread that records each newly complete checkpoint
 *                     of dir through the sink with the node's index
 *                     (sink_ckpt_node_put; the hub's checkpoint_nodes);
 *                     and, keep > 0, removes the older ones beyond keep
 *                     from dir (never the newest step every node has: the
 *                     hub says which steps the others have);
 *   node_ckpts_stop   a last scan once the workers are gone; the names of
 *                     the checkpoints still whole on this disk (the sizes
 *                     recorded) into *whole, and whether this node ever
 *                     recorded one (either may be NULL); frees w (NULL:
 *                     nothing, *wrote false).
 *   node_ckpts_common the newest of a disk's complete steps that every
 *                     other node with records has complete, as the hub
 *                     knows it: the step a restart would resume from, which
 *                     a rotation keeps (here, and the driver's on node 0's
 *                     disk, jobio.c).
 *
 * The sink is borrowed and must outlive w; say may be called from the thread.
 */
#ifndef TC_LAUNCH_NODECKPT_INT_H
#define TC_LAUNCH_NODECKPT_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/err.h"
#include "core/strvec.h"
#include "hub/sink.h"

struct node_ckpts;

struct node_ckpts *node_ckpts_start(struct sink *k, const char *job, int node, const char *dir,
				    int keep, void (*say)(void *, const char *), void *say_arg);
void node_ckpts_stop(struct node_ckpts *w, struct strvec *whole, bool *wrote);
/*
 * steps[0..n) oldest first, of node self's disk; *common = -1: none in
 * common.  Nonzero (err): the hub did not answer or lists no nodes'
 * checkpoints, and nothing may be removed on a guess.
 */
int node_ckpts_common(const char *job, int self, const long long *steps, size_t n,
		      long long *common, struct tc_err *err);

#endif
