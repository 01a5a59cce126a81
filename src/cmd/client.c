/* client.c -- the CLI's side of the API (libcurl); see client.h. */
#include "cmd/client.h"
#include "core/http.h"
#include "core/xalloc.h"

#include "core/util.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct client {
	char *url;   /* without a trailing '/' */
	char *auth;  /* "Authorization: Bearer ..." or NULL */
	char *sock;  /* the local server's Unix socket, or NULL: TCP */
	CURL *h;
};

/* Does a server.lock ("PID HOST:PORT\n") name the server of host (the URL after "://")? */
static bool lock_names(const char *text, const char *host)
{
	const char *a = strchr(text, ' ');
	if (!a)
		return false;
	a++;
	size_t alen = strcspn(a, "\n"), hlen = strcspn(host, "/");
	const char *hp = host;
	/* localhost and 127.0.0.1 are one address to the server (api_start) */
	if (alen > 10 && !strncmp(a, "localhost:", 10)) {
		if (hlen > 10 && !strncmp(hp, "127.0.0.1:", 10))
			return alen - 10 == hlen - 10 && !strncmp(a + 10, hp + 10, alen - 10);
	}
	if (hlen > 10 && !strncmp(hp, "localhost:", 10) && alen > 10 && !strncmp(a, "127.0.0.1:", 10))
		return alen - 10 == hlen - 10 && !strncmp(a + 10, hp + 10, alen - 10);
	return alen == hlen && !strncmp(a, hp, alen);
}

/*
 * The Unix socket of a server on this machine: $TRAINCTL_SOCKET (empty:
 * none), else the state folder's server.sock when the folder's server
 * listens at the URL's loopback address (its server.lock says so).
 * Over it the server knows the caller's account from the kernel, so the
 * CLI needs no token (docs/security.md).
 */
static char *local_socket(const char *url)
{
	const char *e = getenv("TRAINCTL_SOCKET");
	if (e)
		return *e ? xstrdup(e) : NULL;
	const char *host = strstr(url, "://");
	host = host ? host + 3 : url;
	if (strncmp(host, "127.", 4) && strncmp(host, "localhost:", 10) && strcmp(host, "localhost") &&
	    strncmp(host, "[::1]", 5))
		return NULL;
	char *home = trainctl_home();
	if (!home)
		return NULL;
	/* the state folder's server must be the URL's: its lock file names its address */
	struct sbuf p = SBUF_INIT, lock = SBUF_INIT;
	sbuf_addf(&p, "%s/server.lock", home);
	bool same = read_file(p.buf, &lock, NULL) == 0 && lock_names(lock.buf, host);
	sbuf_release(&lock);
	sbuf_reset(&p);
	sbuf_addf(&p, "%s/server.sock", home);
	free(home);
	if (!same) {
		sbuf_release(&p);
		return NULL;
	}
	struct stat st;
	if (stat(p.buf, &st) != 0 || !S_ISSOCK(st.st_mode) || access(p.buf, R_OK | W_OK) != 0) {
		sbuf_release(&p);
		return NULL;
	}
	return sbuf_detach(&p);
}

/*
 * With no URL given: the server that holds this state folder's lock (its
 * flock is taken while it runs, so a lock we cannot share means it is up),
 * reached over its Unix socket (the address its lock file names is the
 * URL's, for messages).  NULL when none runs.
 */
static char *running_server_url(char **home_out, char **sock_out)
{
	*sock_out = NULL;
	*home_out = trainctl_home();
	if (!*home_out)
		return NULL;
	struct sbuf p = SBUF_INIT, lock = SBUF_INIT;
	sbuf_addf(&p, "%s/server.lock", *home_out);
	char *url = NULL;
	int fd = open(p.buf, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK &&
		    read_file(p.buf, &lock, NULL) == 0) {
			const char *a = strchr(lock.buf, ' ');
			size_t n = a ? strcspn(a + 1, "\n") : 0;
			if (n) {
				struct sbuf u = SBUF_INIT;
				sbuf_addf(&u, "http://%.*s", (int)n, a + 1);
				url = sbuf_detach(&u);
				sbuf_reset(&p);
				sbuf_addf(&p, "%s/server.sock", *home_out);
				*sock_out = sbuf_detach(&p);
			}
		}
		close(fd); /* a shared lock we took goes with the fd */
	}
	sbuf_release(&p);
	sbuf_release(&lock);
	return url;
}

bool client_configured(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		if (!strcmp(argv[i], "--server") || !strncmp(argv[i], "--server=", 9))
			return true;
	}
	const char *e = getenv("TRAINCTL_SERVER");
	return e && *e;
}

int client_open(const char *url, struct client **out, struct tc_err *err)
{
	*out = NULL;
	if (!url || !*url)
		url = getenv("TRAINCTL_SERVER");
	char *found = NULL, *found_sock = NULL;
	if (!url || !*url) {
		/* on the server's own machine: the server of this state folder */
		char *home = NULL;
		url = found = running_server_url(&home, &found_sock);
		if (!url) {
			tc_error(err, TC_EUSAGE,
				 "no server: none runs on the state folder %s; give --server URL or"
				 " set TRAINCTL_SERVER",
				 home ? home : "(no home folder)");
			free(home);
			return TC_EUSAGE;
		}
		free(home);
	}
	if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
		tc_error(err, TC_EUSAGE, "server: '%s' is not an http:// URL", url);
		free(found);
		free(found_sock);
		return TC_EUSAGE;
	}
	int rc = http_init(err);
	if (rc) {
		free(found);
		free(found_sock);
		return rc;
	}
	struct client *c = xcalloc(1, sizeof(*c));
	size_t n = strlen(url);
	while (n && url[n - 1] == '/')
		n--;
	c->url = xstrndup(url, n);
	free(found);
	c->sock = found_sock ? found_sock : local_socket(c->url);
	const char *tok = getenv("TRAINCTL_TOKEN");
	if (tok && *tok) {
		struct sbuf a = SBUF_INIT;
		sbuf_addf(&a, "Authorization: Bearer %s", tok);
		c->auth = sbuf_detach(&a);
	}
	c->h = curl_easy_init();
	if (!c->h) {
		client_close(c);
		return tc_error(err, TC_EBACKEND, "cannot initialise libcurl");
	}
	*out = c;
	return 0;
}

void client_close(struct client *c)
{
	if (!c)
		return;
	if (c->h)
		curl_easy_cleanup(c->h);
	free(c->url);
	free(c->sock);
	if (c->auth) {
		/* the token leaves memory with the client */
		memset(c->auth, 0, strlen(c->auth));
		free(c->auth);
	}
	free(c);
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	sbuf_add(arg, p, size * n);
	return size * n;
}

static int setup(struct client *c, const char *method, const char *path, const char *body,
		 struct curl_slist **hdrs, struct tc_err *err)
{
	struct sbuf url = SBUF_INIT;
	sbuf_addf(&url, "%s%s", c->url, path);
	curl_easy_reset(c->h);
	*hdrs = curl_slist_append(NULL, "Accept: application/json");
	if (c->auth)
		*hdrs = curl_slist_append(*hdrs, c->auth);
	if (body)
		*hdrs = curl_slist_append(*hdrs, "Content-Type: application/json");
	int ok = curl_easy_setopt(c->h, CURLOPT_URL, url.buf) == CURLE_OK &&
		 curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, *hdrs) == CURLE_OK &&
		 curl_easy_setopt(c->h, CURLOPT_CUSTOMREQUEST, method) == CURLE_OK &&
		 curl_easy_setopt(c->h, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
		 curl_easy_setopt(c->h, CURLOPT_CONNECTTIMEOUT, 10L) == CURLE_OK &&
		 (!c->sock || curl_easy_setopt(c->h, CURLOPT_UNIX_SOCKET_PATH, c->sock) == CURLE_OK);
	if (ok && body)
		ok = curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, body) == CURLE_OK &&
		     curl_easy_setopt(c->h, CURLOPT_POSTFIELDSIZE, (long)strlen(body)) == CURLE_OK;
	sbuf_release(&url);
	if (!ok)
		return tc_error(err, TC_EBACKEND, "cannot set up the request");
	return 0;
}

int client_call(struct client *c, const char *method, const char *path, const char *body,
		long *status, struct sbuf *resp, struct tc_err *err)
{
	struct curl_slist *hdrs = NULL;
	int rc = setup(c, method, path, body, &hdrs, err);
	if (!rc && (curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK ||
		    curl_easy_setopt(c->h, CURLOPT_WRITEDATA, resp) != CURLE_OK ||
		    curl_easy_setopt(c->h, CURLOPT_TIMEOUT, 300L) != CURLE_OK))
		rc = tc_error(err, TC_EBACKEND, "cannot set up the request");
	if (!rc) {
		CURLcode r = curl_easy_perform(c->h);
		if (r != CURLE_OK)
			rc = tc_error(err, TC_EBACKEND, "server %s: %s", c->url, curl_easy_strerror(r));
		else if (curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, status) != CURLE_OK)
			rc = tc_error(err, TC_EBACKEND, "server %s: no status", c->url);
	}
	curl_slist_free_all(hdrs);
	return rc;
}

/*
 * An error answer as the CLI says it.  A 401 says how this CLI passes a
 * token, whatever the server wrote.
 */
static int answer_error(const struct client *c, long status, const struct sbuf *body,
			struct tc_err *err)
{
	if (status == 401)
		return tc_error(err, TC_EUSAGE, "server %s: %s (HTTP 401)", c->url,
				c->auth ? "the token in TRAINCTL_TOKEN was not accepted"
					: "a token is required: set TRAINCTL_TOKEN (`trainctl token create"
					  " --user NAME` on the server's machine makes one), or use the server's"
					  " Unix socket (its state folder's server.sock, or $TRAINCTL_SOCKET)");
	json_t *o = json_loadb(body->buf, body->len, 0, NULL);
	const char *msg = json_string_value(json_object_get(o, "error"));
	int code = status == 404 ? TC_ENOTFOUND : status >= 500 ? TC_EBACKEND : TC_EUSAGE;
	int rc = tc_error(err, code, "server: %s (HTTP %ld)", msg ? msg : "request failed", status);
	json_decref(o);
	return rc;
}

int client_json(struct client *c, const char *method, const char *path, const char *body,
		struct sbuf *resp, struct tc_err *err)
{
	long status = 0;
	int rc = client_call(c, method, path, body, &status, resp, err);
	if (rc || status < 400)
		return rc;
	return answer_error(c, status, resp, err);
}

/* ---- server-sent events ---- */

struct sse_read {
	struct sbuf buf, event, data;
	int (*on_data)(void *, const char *, const char *);
	void *arg;
	int stop;
	long status;
	struct sbuf errbody;
	CURL *h;
};

static size_t on_sse(char *p, size_t size, size_t n, void *arg)
{
	struct sse_read *r = arg;
	size_t len = size * n;
	if (!r->status)
		curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &r->status);
	if (r->status >= 400) {
		sbuf_add(&r->errbody, p, len);
		return len;
	}
	sbuf_add(&r->buf, p, len);
	size_t start = 0;
	for (size_t i = 0; i < r->buf.len; i++) {
		if (r->buf.buf[i] != '\n')
			continue;
		const char *line = r->buf.buf + start;
		size_t ll = i - start;
		start = i + 1;
		if (ll == 0) {
			if (r->data.len || r->event.len) {
				int stop = r->on_data(r->arg, r->event.len ? r->event.buf : "message", r->data.buf);
				sbuf_reset(&r->event);
				sbuf_reset(&r->data);
				if (stop) {
					r->stop = 1;
					return 0; /* aborts the transfer */
				}
			}
		} else if (ll >= 5 && !strncmp(line, "data:", 5)) {
			if (r->data.len)
				sbuf_addch(&r->data, '\n');
			sbuf_add(&r->data, line + 5 + (ll > 5 && line[5] == ' '), ll - 5 - (ll > 5 && line[5] == ' '));
		} else if (ll >= 6 && !strncmp(line, "event:", 6)) {
			sbuf_reset(&r->event);
			sbuf_add(&r->event, line + 6 + (ll > 6 && line[6] == ' '), ll - 6 - (ll > 6 && line[6] == ' '));
		}
	}
	sbuf_remove_front(&r->buf, start);
	return len;
}

int client_events(struct client *c, const char *path,
		  int (*on_data)(void *arg, const char *event, const char *data), void *arg,
		  struct tc_err *err)
{
	struct curl_slist *hdrs = NULL;
	struct sse_read r = { SBUF_INIT, SBUF_INIT, SBUF_INIT, on_data, arg, 0, 0, SBUF_INIT, c->h };
	int rc = setup(c, "GET", path, NULL, &hdrs, err);
	if (!rc && (curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, on_sse) != CURLE_OK ||
		    curl_easy_setopt(c->h, CURLOPT_WRITEDATA, &r) != CURLE_OK))
		rc = tc_error(err, TC_EBACKEND, "cannot set up the request");
	if (!rc) {
		CURLcode cr = curl_easy_perform(c->h);
		if (r.status >= 400) {
			rc = answer_error(c, r.status, &r.errbody, err);
		} else if (cr != CURLE_OK && !(cr == CURLE_WRITE_ERROR && r.stop)) {
			rc = tc_error(err, TC_EBACKEND, "server %s: %s", c->url, curl_easy_strerror(cr));
		}
	}
	curl_slist_free_all(hdrs);
	sbuf_release(&r.buf);
	sbuf_release(&r.event);
	sbuf_release(&r.data);
	sbuf_release(&r.errbody);
	return rc;
}

int client_get_json(const char *url, const char *path, bool as_json, json_t **out,
		    struct tc_err *err)
{
	struct sbuf resp = SBUF_INIT;
	struct client *cl = NULL;
	*out = NULL;
	int rc = client_open(url, &cl, err);
	if (!rc)
		rc = client_json(cl, "GET", path, NULL, &resp, err);
	client_close(cl);
	if (!rc && as_json) {
		fwrite(resp.buf, 1, resp.len, stdout);
		fputc('\n', stdout);
	} else if (!rc && !(*out = json_loadb(resp.buf, resp.len, 0, NULL))) {
		rc = tc_error(err, TC_EBACKEND, "%s: the server's answer is not JSON", path);
	}
	sbuf_release(&resp);
	return rc;
}
