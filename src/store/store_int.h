/*
 * store_int.h -- private to src/store/: the handle behind struct store, so
 * that the query files (store.c, store_metrics.c) share one connection.
 */
#ifndef TC_STORE_INT_H
#define TC_STORE_INT_H

#include <sqlite3.h>

#include "core/err.h"

struct store {
	sqlite3 *db;
};

/* Fill err with "database: WHAT: sqlite's message" (TC_ESTORE); returns TC_ESTORE. */
int db_fail(struct store *st, struct tc_err *err, const char *what);

#endif
