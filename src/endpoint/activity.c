/*
 * activity.c -- when a job's Jupyter was last used (endpoint.h note 5),
 * asked through Jupyter's own REST API with the endpoint's token, for
 * limits.idle_minutes: GET api/status (the server's last_activity: API
 * calls, kernels, terminals) and GET api/kernels (each kernel's
 * last_activity and execution_state; a busy kernel is in use now).  The
 * kernels are listed with no_track_activity, so that asking is not itself
 * activity (api/status never is).
 */
#include "endpoint/endpoint.h"
#include "core/http.h"
#include "core/sbuf.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Jupyter's answers are a few hundred bytes per kernel */
#define ANSWER_MAX (1 << 20)

bool endpoint_iso_time(const char *s, double *out)
{
	struct tm tm = { 0 };
	const char *p = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
	if (!p)
		return false;
	double frac = 0;
	if (*p == '.') {
		char *end = NULL;
		frac = strtod(p, &end); /* ".123456" */
		p = end;
	}
	/* Jupyter writes UTC: "Z" or "+00:00" */
	if (strcmp(p, "Z") != 0 && strcmp(p, "+00:00") != 0)
		return false;
	time_t t = timegm(&tm);
	if (t == (time_t)-1)
		return false;
	*out = (double)t + frac;
	return true;
}

/* The last_activity of o into *last when newer; false when o has one that is no time. */
static bool newer(json_t *o, double *last)
{
	json_t *v = json_object_get(o, "last_activity");
	double t = 0;
	if (!v)
		return true;
	if (!endpoint_iso_time(json_string_value(v), &t))
		return false;
	if (t > *last)
		*last = t;
	return true;
}

int endpoint_jupyter_parse(const char *status, const char *kernels, double now, double *last)
{
	*last = 0;
	int rc = 0;
	if (status) {
		json_t *o = json_loads(status, 0, NULL);
		if (!json_is_object(o) || !newer(o, last))
			rc = -1;
		json_decref(o);
	}
	if (kernels) {
		json_t *a = json_loads(kernels, 0, NULL), *k;
		size_t i;
		if (!json_is_array(a))
			rc = -1;
		json_array_foreach(a, i, k) {
			if (!json_is_object(k) || !newer(k, last))
				rc = -1;
			const char *st = json_string_value(json_object_get(k, "execution_state"));
			/* a cell runs: in use now, however long it takes.  "starting" too: Jupyter
			 * (notebook 6) says it until a client asks the kernel's info, so a cell sent
			 * straight over the kernel's channels runs under "starting" */
			if (st && (!strcmp(st, "busy") || !strcmp(st, "starting")))
				*last = now;
		}
		json_decref(a);
	}
	return rc;
}

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
	struct sbuf *sb = arg;
	if (sb->len + size * n > ANSWER_MAX)
		return 0; /* not Jupyter's: curl fails the transfer */
	sbuf_add(sb, data, size * n);
	return size * n;
}

/* GET path (under the endpoint's base) into out; 0 or TC_EBACKEND. */
static int get(CURL *h, const struct endpoint_probe *p, const char *path, struct sbuf *out,
	       struct tc_err *err)
{
	struct sbuf url = SBUF_INIT, auth = SBUF_INIT;
	sbuf_addf(&url, "http://127.0.0.1:%d%s%s", p->port, p->base_path, path);
	struct curl_slist *hdrs = NULL;
	if (p->secret) {
		sbuf_addf(&auth, "Authorization: token %s", p->secret);
		hdrs = curl_slist_append(NULL, auth.buf);
	}
	long status = 0;
	int rc = 0;
	curl_easy_reset(h);
	if (curl_easy_setopt(h, CURLOPT_URL, url.buf) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs) != CURLE_OK ||
	    /* the job's 127.0.0.1, never through a proxy of the environment */
	    curl_easy_setopt(h, CURLOPT_NOPROXY, "*") != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 5L) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_WRITEDATA, out) != CURLE_OK) {
		rc = tc_error(err, TC_EBACKEND, "endpoint %s: libcurl refused an option", p->name);
	} else {
		CURLcode c = curl_easy_perform(h);
		if (c != CURLE_OK)
			rc = tc_error(err, TC_EBACKEND, "endpoint %s: GET %s: %s", p->name, path,
				      curl_easy_strerror(c));
		else if (curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK ||
			 status != 200)
			rc = tc_error(err, TC_EBACKEND, "endpoint %s: GET %s: HTTP %ld", p->name, path,
				      status);
	}
	curl_slist_free_all(hdrs);
	sbuf_release(&auth);
	sbuf_release(&url);
	return rc;
}

int endpoint_jupyter_activity(const struct endpoint_probe *p, double now, double *last,
			      struct tc_err *err)
{
	*last = 0;
	int rc = http_init(err);
	CURL *h = rc ? NULL : curl_easy_init();
	if (!rc && !h)
		rc = tc_error(err, TC_EBACKEND, "endpoint %s: libcurl failed to start", p->name);
	struct sbuf status = SBUF_INIT, kernels = SBUF_INIT;
	if (!rc)
		rc = get(h, p, "api/status", &status, err);
	if (!rc)
		rc = get(h, p, "api/kernels?no_track_activity=1", &kernels, err);
	if (!rc && endpoint_jupyter_parse(status.buf, kernels.buf, now, last) < 0)
		rc = tc_error(err, TC_EBACKEND, "endpoint %s: Jupyter's api/status or api/kernels "
			      "is not the JSON it should be", p->name);
	if (h)
		curl_easy_cleanup(h);
	sbuf_release(&status);
	sbuf_release(&kernels);
	return rc;
}
