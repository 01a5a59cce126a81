/*
 * http.h -- what every libcurl user shares: the global initialisation and
 * the retry policy.
 *
 * NOTES ON THE DESIGN
 * (1) curl_global_init() is not thread-safe, and curl_easy_init() runs it
 *     implicitly when nobody has.  So every module calls http_init() before
 *     its first curl_easy_init(): the initialisation runs exactly once
 *     (pthread_once), whichever thread gets there first, and a failure is
 *     an error returned to every caller, never an abort.
 * (2) libcurl is loaded lazily (core/lazylib.h); this header includes that
 *     one, so including it is all a curl user needs.
 * (3) The retry policy: which failures are transient (a refused, reset or
 *     timed-out connection; HTTP 5xx, 429 and 408), and how long to wait
 *     before the next try (doubling from a first wait up to a ceiling,
 *     optionally with jitter so that parallel clients spread out).  How
 *     many tries is the caller's choice.
 */
#ifndef TC_CORE_HTTP_H
#define TC_CORE_HTTP_H

#include <stdbool.h>

#include "core/err.h"
#include "core/lazylib.h"

/* curl_global_init, once per process; 0 or TC_EBACKEND. */
int http_init(struct tc_err *err);

/* Is a libcurl failure transient (worth another try)? */
bool http_retryable_curl(CURLcode c);
/* Is an HTTP status transient: 5xx, 429 Too Many Requests, 408 Request Timeout? */
bool http_retryable_status(long status);

struct http_backoff {
	int first_ms; /* the wait after the first failed try */
	int max_ms;   /* the doubling stops here */
	bool jitter;  /* wait a random 50% to 100% of it */
};
/* Milliseconds to wait after failed try `attempt` (1-based). */
int http_backoff_ms(const struct http_backoff *b, int attempt);
/* Sleep ms milliseconds, resuming after signals. */
void http_sleep_ms(int ms);

#endif
