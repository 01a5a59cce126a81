/*
 * store_hub.h -- the hub's bookkeeping (store_hub.c; hub/hub.h);
 * store.h includes it.
 */
#ifndef TC_STORE_HUB_H
#define TC_STORE_HUB_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/err.h"

struct store;

/* ---- the hub's bookkeeping (store_hub.c; hub/hub.h) ----
 *
 * hub_jobs: a job whose supervisors report from elsewhere: the SHA-256 of
 * its secret (hex) and the URL they send to.  hub_streams: per (job,
 * stream), the highest sequence number applied; the hub writes it in the
 * transaction of the events it acknowledges, so an event is applied once.
 */
int store_hub_job_set(struct store *st, const char *job, const char *secret_sha256,
		      const char *url, struct tc_err *err);
/* *sha and *url: heap or NULL; TC_ENOTFOUND for a job without a hub row. */
int store_hub_job_get(struct store *st, const char *job, char **secret_sha256, char **url,
		      struct tc_err *err);
/* 0 when the stream has sent nothing yet. */
int store_hub_acked(struct store *st, const char *job, const char *stream, long long *seq,
		    struct tc_err *err);
int store_hub_set_acked(struct store *st, const char *job, const char *stream, long long seq,
			struct tc_err *err);
/*
 * hub_rdzv: a multi-node job's rendezvous round (hub/rdzv.h), as the JSON
 * text rdzv_json writes; *round_json NULL (and 0) when the job has none.
 */
int store_hub_rdzv_set(struct store *st, const char *job, const char *round_json,
		       struct tc_err *err);
int store_hub_rdzv_get(struct store *st, const char *job, char **round_json, struct tc_err *err);

#endif
