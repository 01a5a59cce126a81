/*
 * store_ckpt.h -- checkpoint rows, the job's and each node's (store_ckpt.c);
 * store.h includes it.
 */
#ifndef TC_STORE_CKPT_H
#define TC_STORE_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/err.h"

struct store;

/* ---- checkpoints (store_ckpt.c) ----
 *
 * One row per complete checkpoint a supervisor saw: where (dir, name
 * relative to it), step/epoch, file count, bytes, the combined CRC32C and
 * the per-file list as JSON (ckpt_files_json).  state: complete, removed
 * (rotated away by checkpoint.keep) or damaged (failed verification).
 */
struct store_ckpt {
	char *name, *dir;
	long long step, epoch;
	int layout;
	long long nfiles, bytes;
	char *checksum;
	char *files_json;
	double created;
	char *state;
};

/* Insert or replace the row of (job, c->name). */
int store_ckpt_put(struct store *st, const char *job, const struct store_ckpt *c,
		   struct tc_err *err);
int store_ckpt_set_state(struct store *st, const char *job, const char *name, const char *state,
			 struct tc_err *err);
/* Rows of a job, oldest step first; all=false keeps state 'complete' only. */
int store_ckpt_list(struct store *st, const char *job, bool all, struct store_ckpt **out,
		    size_t *nr, struct tc_err *err);
void store_ckpt_free(struct store_ckpt *v, size_t nr);
/*
 * Node node's own record of a checkpoint on its disk (a multi-node job
 * whose nodes do not share a folder): table checkpoint_nodes, one row per
 * (job, node, name); the job's rows above stay the driver's view.
 */
int store_ckpt_node_put(struct store *st, const char *job, int node, const struct store_ckpt *c,
			struct tc_err *err);
int store_ckpt_node_set_state(struct store *st, const char *job, int node, const char *name,
			      const char *state, struct tc_err *err);
/* Every node's rows of a job, by node then step; (*nodes)[i] is row i's node. */
int store_ckpt_node_list(struct store *st, const char *job, struct store_ckpt **out, int **nodes,
			 size_t *nr, struct tc_err *err);

#endif
