/*
 * ingest_store.h -- for the metrics tests: the writer of metrics_ingest
 * (metrics/ingest.h) that puts each batch in a store, as a direct sink
 * does in the supervisor.
 */
#ifndef TC_TEST_INGEST_STORE_H
#define TC_TEST_INGEST_STORE_H

#include "store/store.h"

static inline int ingest_to_store(void *st, struct store_mbatch *b, struct tc_err *err)
{
	return store_mbatch_write(st, b, err);
}

#endif
