/*
 * listen.c -- the API's listeners: the TCP and Unix-socket daemons of
 * libmicrohttpd (one thread per connection), the checks before auth on
 * each request's headers (guard.c), and a request's life from its headers
 * to its answer: decided (api.c), its body kept (core/reqbody), dispatched
 * through the route table or to an endpoint's host (eporigin.c).
 */
#include "server/server_int.h"
#include "api/request.h"
#include "core/lazylib.h"
#include "core/reqbody.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "gateway/parking.h"
#include "hub/hub.h"
#include "server/srvlog.h"

#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* 503 with Retry-After: the server is full; the client should come back. */
static int reply_503(struct MHD_Connection *con)
{
	static const char body[] = "{\"error\":\"the server has too many connections (from you, or in"
				   " all): try again shortly\",\"status\":503}";
	struct MHD_Response *r = MHD_create_response_from_buffer(sizeof(body) - 1, (void *)body,
								  MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "application/json");
	MHD_add_response_header(r, "Retry-After", "2");
	MHD_add_response_header(r, "Connection", "close");
	api_page_headers(r);
	int ret = MHD_queue_response(con, 503, r);
	MHD_destroy_response(r);
	return ret;
}

/* The Unix socket's peer uid (SO_PEERCRED), or -1. */
static long peer_uid_of(struct MHD_Connection *con)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(con, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct ucred cr;
	socklen_t len = sizeof(cr);
	if (!ci || getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0)
		return -1;
	return (long)cr.uid;
}

/*
 * What is refused before the caller is even asked for (guard.c), on the
 * headers alone: 0, or the reply is queued and *ret holds MHD's answer.
 */
static unsigned precheck(const struct api_listener *l, struct MHD_Connection *con,
			 const char *url, const char *method, struct api_req *rq, int *ret)
{
	struct srv *s = l->s;
	const char *host = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Host");
	if (guard_full(s->guard, rq->gc)) {
		*ret = reply_503(con);
		return 503;
	}
	/*
	 * DNS rebinding: a name the attacker controls resolves to us; the socket
	 * has no names, and the hub's routes answer only a job's own secret
	 * (its nodes may call us by any name: TRAINCTL_HUB_ADVERTISE)
	 */
	bool hub = !strncmp(url, "/api/v1/hub/", 12);
	if (!l->unix_ && !hub && !api_host_ok(host, s->port, s->o.host_names)) {
		*ret = reply_err(con, 403, "Host '%s' does not name this server (trainctl server"
				 " --host-name NAME adds a name)", host ? host : "");
		return 403;
	}
	if (MHD_lookup_connection_value(con, MHD_GET_ARGUMENT_KIND, "token")) {
		*ret = reply_err(con, 400, "a token goes in the Authorization header (Bearer TOKEN),"
				 " never in the URL");
		return 400;
	}
	if (!api_method_changes(method))
		return 0;
	/* cross-site forgery: a page elsewhere may send requests, never with our Origin */
	const char *origin = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Origin");
	const char *site = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Sec-Fetch-Site");
	if (!api_origin_ok(origin, host) || !api_fetch_site_ok(site)) {
		*ret = reply_err(con, 403, "a request from another origin (%s) may not change anything",
				 origin ? origin : site);
		return 403;
	}
	/* an HTML form cannot send JSON: a body must say it is JSON */
	const char *ctype = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Content-Type");
	const char *cl = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Content-Length");
	const char *te = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Transfer-Encoding");
	bool body = (cl && strcmp(cl, "0") != 0) || te;
	/* an endpoint's own forms and uploads are its business (the Origin check above stands) */
	bool endpoint = !strncmp(url, "/jobs/", 6) && strstr(url, "/endpoints/");
	if (!endpoint && (body || ctype) && !api_json_type_ok(ctype)) {
		*ret = reply_err(con, 415, "a request body must be JSON (Content-Type: application/json)");
		return 415;
	}
	return 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *con, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	const struct api_listener *l = cls;
	struct srv *s = l->s;
	(void)version;
	struct api_req *rq = *con_cls;
	if (!rq || !rq->started) {
		if (!rq) {
			rq = xcalloc(1, sizeof(*rq));
			rq->body = (struct reqbody)REQBODY_INIT;
			*con_cls = rq;
		}
		rq->started = true;
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(con, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
		rq->gc = ci ? ci->socket_context : NULL;
		guard_busy(s->guard, rq->gc, true); /* its headers are in: the deadline is met */
		rq->peer_uid = l->unix_ ? peer_uid_of(con) : -1;
		if (l->unix_ && rq->peer_uid < 0) {
			rq->answered = true;
			return reply_err(con, 403, "cannot tell who is on the other end of the socket") ==
					       MHD_YES ? MHD_YES : MHD_NO;
		}
		int ret;
		/* a job endpoint's host name: its own checks (eporigin.c), never the API's routes */
		if ((!l->unix_ && !guard_full(s->guard, rq->gc) &&
		     eporigin_claim(s, con, url, method, &rq->ep, &ret)) ||
		    (!rq->ep && precheck(l, con, url, method, rq, &ret))) {
			rq->answered = true;
			return ret == MHD_YES ? MHD_YES : MHD_NO;
		}
		bool now = false;
		if (rq->ep)
			api_decide_endpoint(con, rq, &now);
		else
			api_decide(s, con, url, method, rq, &now);
		if (now && rq->ep) {
			rq->answered = true;
			return (rq->refuse ? reply_err(con, rq->refuse, "%s", rq->refuse_msg)
					   : reply_err(con, 413, "the body is over %u bytes",
						       TC_SERVER_MAX_BODY)) == MHD_YES ? MHD_YES : MHD_NO;
		}
		if (now) {
			rq->answered = true;
			return api_reply_refused(con, rq, url) == MHD_YES ? MHD_YES : MHD_NO;
		}
		return MHD_YES;
	}
	if (*upload_size) {
		/* a refused request's body, or one its route does not take, is dropped */
		bool keep = !rq->answered && !rq->auth && !rq->refuse && !rq->too_big;
		int st = reqbody_take(&rq->body, keep, upload, *upload_size, &rq->dropped);
		if (st < 0)
			return MHD_NO; /* more than any refusal reads (chunked): the connection ends */
		if (st == 413)
			rq->too_big = true;
		else if (st) {
			rq->refuse = (unsigned)st;
			rq->refuse_msg = xstrdup(api_budget_spent);
		}
		*upload_size = 0;
		return MHD_YES;
	}
	if (rq->answered)
		return MHD_YES;
	rq->answered = true;
	pthread_mutex_lock(&s->mu);
	s->requests++;
	pthread_mutex_unlock(&s->mu);
	if (rq->ep && rq->refuse)
		return reply_err(con, rq->refuse, "%s", rq->refuse_msg) == MHD_YES ? MHD_YES : MHD_NO;
	if (rq->ep)
		return eporigin_answer(s, con, rq->ep, method, rq->raw_uri, rq->body.data.buf,
				       rq->body.data.len, rq->too_big, rq->gc) == MHD_YES ? MHD_YES
											  : MHD_NO;
	return api_dispatch(s, con, url, method, rq) == MHD_YES ? MHD_YES : MHD_NO;
}

static void on_done(void *cls, struct MHD_Connection *con, void **con_cls,
		    enum MHD_RequestTerminationCode toe)
{
	const struct api_listener *l = cls;
	(void)con;
	(void)toe;
	struct api_req *rq = *con_cls;
	if (rq) {
		guard_busy(l->s->guard, rq->gc, false); /* the next request's headers: a new deadline */
		reqbody_release(&rq->body);
		if (rq->decided)
			route_match_release(&rq->m);
		free(rq->w.user);
		free(rq->refuse_msg);
		free(rq->raw_uri);
		eporigin_req_free(rq->ep);
		free(rq);
		*con_cls = NULL;
	}
}

/* Each request's target as sent (before libmicrohttpd decodes it): the proxy forwards it. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *con)
{
	(void)cls;
	(void)con;
	struct api_req *rq = xcalloc(1, sizeof(*rq));
	rq->body = (struct reqbody)REQBODY_INIT;
	rq->raw_uri = xstrdup(uri ? uri : "");
	return rq;
}

struct gconn *guard_open_con(struct guard *g, struct MHD_Connection *con, bool ip)
{
	const union MHD_ConnectionInfo *fd =
		MHD_get_connection_info(con, MHD_CONNECTION_INFO_CONNECTION_FD);
	const union MHD_ConnectionInfo *ad =
		ip ? MHD_get_connection_info(con, MHD_CONNECTION_INFO_CLIENT_ADDRESS) : NULL;
	return guard_open(g, fd ? fd->connect_fd : -1, ad ? ad->client_addr : NULL);
}

/* Connections in and out, for the limits and the header deadline (guard.c). */
static void on_connection(void *cls, struct MHD_Connection *con, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	const struct api_listener *l = cls;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		*socket_context = guard_open_con(l->s->guard, con, !l->unix_);
	} else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		guard_close(l->s->guard, *socket_context);
		*socket_context = NULL;
	}
}

/* libmicrohttpd's own messages, ours in form; none while starting (api_start says why it failed) */
/*
 * libmicrohttpd's notes that a client closed its connection (a browser
 * tab closed, an event stream left, a keep-alive connection dropped): what
 * clients do, not worth a line each in the server's log.
 */
static bool client_went_away(const char *fmt)
{
	static const char *const gone[] = {
		"Connection was closed by remote side",
		"Connection socket is closed when reading request",
		"The connection was forcibly closed by remote peer",
	};
	for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++)
		if (!strncmp(fmt, gone[i], strlen(gone[i])))
			return true;
	return false;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	const struct srv *s = cls;
	if (s->mhd && !client_went_away(fmt))
		srvlog_v(SRVLOG_WARNING, fmt, ap);
}

/*
 * The Unix socket for the local CLI: 0660 and group trainctl when that
 * group exists, else 0600 (only the server's account and root).  A socket
 * left by a server that is gone is replaced; one that answers is another
 * server's.
 */
static int open_unix(struct srv *s, struct tc_err *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *path = s->socket_path;
	if (strlen(path) >= sizeof(sa.sun_path))
		return tc_error(err, TC_EUSAGE, "server: the socket path %s is over %zu bytes (--socket PATH)",
				path, sizeof(sa.sun_path) - 1);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return tc_error_errno(err, TC_ESYS, "server: socket");
	struct stat st;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			close(fd);
			return tc_error(err, TC_EUSAGE, "server: %s exists and is not a socket", path);
		}
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			close(fd);
			return tc_error(err, TC_EUSAGE, "server: another server answers on %s", path);
		}
		unlink(path);
	}
	struct group gr, *g = NULL;
	char buf[4096];
	if (getgrnam_r("trainctl", &gr, buf, sizeof(buf), &g) != 0)
		g = NULL;
	mode_t old = umask(0177); /* no moment with a wider mode */
	int rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc == 0 && g && (chown(path, (uid_t)-1, g->gr_gid) != 0 || chmod(path, 0660) != 0))
		rc = -1;
	if (rc == 0)
		rc = listen(fd, 64);
	if (rc != 0) {
		int e = errno;
		close(fd);
		errno = e;
		return tc_error_errno(err, TC_ESYS, "server: cannot listen on %s", path);
	}
	s->unix_fd = fd;
	s->unix_made = true;
	return 0;
}

/*
 * Every connection is a descriptor: the soft limit goes up towards the
 * hard one (at most 65536, which the children inherit too), so that
 * hundreds of hostile connections cannot leave the operator's socket
 * unable to accept (the listeners poll(): descriptors past FD_SETSIZE
 * serve as well).
 */
static void raise_fd_limit(void)
{
	struct rlimit rl;
	rlim_t want = 65536;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want)
		want = rl.rlim_max;
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur >= want)
		return;
	rl.rlim_cur = want;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		errno = 0; /* the limit stays: connections past it wait in the backlog */
}

int api_start(struct srv *s, char **login, struct tc_err *err)
{
	const char *listen = s->o.listen;
	const char *colon = strrchr(listen, ':');
	long port;
	*login = NULL;
	s->unix_fd = -1;
	if (!colon || !parse_long(colon + 1, 1, 65535, &port))
		return tc_error(err, TC_EUSAGE, "server: --listen must be HOST:PORT, not '%s'", listen);
	s->port = port;
	struct sbuf host = SBUF_INIT;
	sbuf_add(&host, listen, (size_t)(colon - listen));
	if (!strcmp(host.buf, "localhost")) {
		sbuf_reset(&host);
		sbuf_adds(&host, "127.0.0.1");
	}
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (inet_pton(AF_INET, host.buf, &sa.sin_addr) != 1) {
		int rc = tc_error(err, TC_EUSAGE, "server: '%s' is not an IPv4 address", host.buf);
		sbuf_release(&host);
		return rc;
	}
	sbuf_release(&host);
	/* the request bodies of all listeners together (reqbody.h) */
	reqbody_set_budget(s->o.body_memory);
	raise_fd_limit();
	unsigned max_total = s->o.max_connections ? s->o.max_connections : 512;
	unsigned max_client = s->o.max_per_client ? s->o.max_per_client : 32;
	s->guard = guard_new(max_total, max_client, s->o.header_seconds > 0 ? s->o.header_seconds : 10);
	s->sessions = sessions_new();
	s->lis_tcp = (struct api_listener){ s, false };
	s->lis_unix = (struct api_listener){ s, true };
	if (guard_start(s->guard))
		return tc_error(err, TC_ESYS, "server: cannot start a thread");
	int rc = eporigin_start(s, err);
	if (rc)
		return rc;
	/* the socket first: once TCP answers, local clients find it */
	struct sbuf sp = SBUF_INIT;
	if (s->o.socket)
		sbuf_adds(&sp, s->o.socket);
	else
		sbuf_addf(&sp, "%s/" TC_SERVER_SOCKET, s->home);
	s->socket_path = sbuf_detach(&sp);
	rc = open_unix(s, err);
	if (rc)
		return rc;
	s->mhd_unix = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD |
					       MHD_USE_ERROR_LOG | MHD_ALLOW_UPGRADE,
				       0, NULL, NULL, on_request, &s->lis_unix,
				       MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
				       MHD_OPTION_LISTEN_SOCKET, s->unix_fd,
				       MHD_OPTION_NOTIFY_COMPLETED, on_done, &s->lis_unix,
				       MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
				       MHD_OPTION_NOTIFY_CONNECTION, on_connection, &s->lis_unix,
				       MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)120,
				       MHD_OPTION_CONNECTION_LIMIT, (unsigned int)256,
				       MHD_OPTION_END);
	if (!s->mhd_unix)
		return tc_error_errno(err, TC_ESYS, "server: cannot serve %s", s->socket_path);
	/*
	 * One thread per connection (event streams block in their readers).
	 * libmicrohttpd's own limits sit above ours: up to them a connection
	 * gets a 503 with Retry-After rather than a silent close, and one
	 * client's connections cannot take the others' places.
	 */
	s->mhd = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD |
					  MHD_USE_ERROR_LOG | MHD_ALLOW_UPGRADE,
				  (uint16_t)port, NULL, NULL, on_request, &s->lis_tcp,
				  MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
				  MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
				  MHD_OPTION_NOTIFY_COMPLETED, on_done, &s->lis_tcp,
				  MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
				  MHD_OPTION_NOTIFY_CONNECTION, on_connection, &s->lis_tcp,
				  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)120,
				  MHD_OPTION_CONNECTION_LIMIT, max_total + 64,
				  MHD_OPTION_PER_IP_CONNECTION_LIMIT, max_client + 8,
				  MHD_OPTION_END);
	if (!s->mhd && errno == EADDRINUSE)
		return tc_error(err, TC_ESYS,
				"server: cannot listen on %s: the port is in use (another server?"
				" --listen HOST:PORT picks another)", listen);
	if (!s->mhd)
		return tc_error_errno(err, TC_ESYS, "server: cannot listen on %s", listen);
	/* the supervisors this server starts report here (privsep.c), whatever their account */
	struct hub *h = srv_hub(s, err);
	if (!h)
		return err->code;
	sbuf_addf(&sp, "%s/" TC_SERVER_HUB_SOCKET, s->home);
	s->hub_sock = sbuf_detach(&sp);
	if ((rc = hub_daemon_start_unix(h, s->hub_sock, &s->hub_unix, err)))
		return rc;
	/* the operator's one-time login URL (like Jupyter's): the server's own account, admin */
	struct who op = { .user = s->os_user, .admin = true, .local = true };
	char *t = NULL;
	if ((rc = sessions_add(s->sessions, SESS_TICKET, &op, 0, &t, err)))
		return rc;
	struct sbuf u = SBUF_INIT;
	sbuf_addf(&u, "/login?ticket=%s", t);
	free(t);
	*login = sbuf_detach(&u);
	return 0;
}

void api_stop(struct srv *s)
{
	proxy_stop_all(); /* a pumped WebSocket would hold its connection's thread */
	relay_stop_all(); /* and so would a parked relay connection */
	if (s->mhd)
		MHD_stop_daemon(s->mhd);
	s->mhd = NULL;
	hub_daemon_stop(s->hub_unix);
	s->hub_unix = NULL;
	if (s->hub_sock)
		unlink(s->hub_sock);
	free(s->hub_sock);
	s->hub_sock = NULL;
	if (s->mhd_unix) {
		MHD_stop_daemon(s->mhd_unix); /* closes the listening socket it was given */
		s->unix_fd = -1;
	}
	s->mhd_unix = NULL;
	/* after every listener: a hub request on server.sock would make a new one */
	srv_hub_end();
	if (s->unix_fd >= 0)
		close(s->unix_fd);
	if (s->socket_path && s->unix_made)
		unlink(s->socket_path);
	s->unix_made = false;
	s->unix_fd = -1;
	free(s->socket_path);
	s->socket_path = NULL;
	eporigin_stop(s); /* after the API's threads, which may be answering an endpoint host */
	guard_free(s->guard);
	s->guard = NULL;
	sessions_free(s->sessions);
	s->sessions = NULL;
}
