/* http.c -- libcurl's global init, once, and the retry policy; see http.h. */
#include "core/http.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static CURLcode init_result; /* written once, read after pthread_once */

static void init_curl(void)
{
	init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int http_init(struct tc_err *err)
{
	if (pthread_once(&init_once, init_curl) != 0)
		return tc_error(err, TC_EBACKEND, "cannot initialise libcurl");
	if (init_result != CURLE_OK)
		return tc_error(err, TC_EBACKEND, "cannot initialise libcurl: %s",
				curl_easy_strerror(init_result));
	return 0;
}

bool http_retryable_curl(CURLcode c)
{
	switch (c) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_WEIRD_SERVER_REPLY:
		return true;
	default:
		return false;
	}
}

bool http_retryable_status(long status)
{
	return status >= 500 || status == 429 || status == 408;
}

int http_backoff_ms(const struct http_backoff *b, int attempt)
{
	long wait = b->first_ms > 0 ? b->first_ms : 1;
	for (int i = 1; i < attempt && wait < b->max_ms; i++)
		wait *= 2;
	if (wait > b->max_ms)
		wait = b->max_ms;
	if (!b->jitter)
		return (int)wait;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	unsigned int seed = (unsigned int)ts.tv_nsec ^ (unsigned int)attempt;
	long jitter = (long)(rand_r(&seed) % (unsigned int)(wait / 2 + 1));
	return (int)(wait / 2 + jitter);
}

void http_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}
