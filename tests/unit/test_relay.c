/* test_relay.c -- the endpoint relay: the node's handshake (src/endpoint/relay.c:
 * the hub's URL, the upgrade request, the server's answer), the server's pool of
 * parked connections (src/gateway/parking.c: limits, take, release, a node that
 * closes, a stop), and one node relay against a fake server and endpoint */
#include "test.h"

#include "endpoint/relay.h"
#include "gateway/parking.h"
#include "core/sbuf.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

TEST(relay_parse_url)
{
	char *h, *p;
	CHECK_INT(ep_relay_parse_url("http://10.87.0.10:8470", &h, &p), 0);
	CHECK_STR(h, "10.87.0.10");
	CHECK_STR(p, "8470");
	free(h);
	free(p);
	CHECK_INT(ep_relay_parse_url("http://login:99/x", &h, &p), 0);
	CHECK_STR(h, "login");
	CHECK_STR(p, "99");
	free(h);
	free(p);
	CHECK_INT(ep_relay_parse_url("http://login", &h, &p), -1);
	CHECK_INT(ep_relay_parse_url("http://:80", &h, &p), -1);
	CHECK_INT(ep_relay_parse_url("http://h:0", &h, &p), -1);
	CHECK_INT(ep_relay_parse_url("http://h:70000", &h, &p), -1);
	CHECK_INT(ep_relay_parse_url("https://h:80", &h, &p), -1);
	CHECK_INT(ep_relay_parse_url(NULL, &h, &p), -1);
	CHECK(!h && !p);
}

TEST(relay_request_and_answer)
{
	struct sbuf sb = SBUF_INIT;
	ep_relay_request(&sb, "h:1", "j-1", "web", "s3cret");
	CHECK_STR(sb.buf, "GET /api/v1/hub/j-1/relay/web HTTP/1.1\r\nHost: h:1\r\n"
			  "X-Trainctl-Hub-Secret: s3cret\r\nConnection: Upgrade\r\n"
			  "Upgrade: trainctl-relay\r\n\r\n");
	sbuf_release(&sb);
	unsigned st;
	size_t head;
	const char *ok = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: trainctl-relay\r\n\r\nGET";
	CHECK_INT(ep_relay_parse_answer(ok, 10, &st, &head), 0);
	CHECK_INT(ep_relay_parse_answer(ok, strlen(ok), &st, &head), 1);
	CHECK_INT(st, 101);
	CHECK_INT(head, strlen(ok) - 3); /* what follows is the first request's */
	const char *no = "HTTP/1.1 429 Too Many Requests\r\n\r\n";
	CHECK_INT(ep_relay_parse_answer(no, strlen(no), &st, &head), 1);
	CHECK_INT(st, 429);
	CHECK_INT(ep_relay_parse_answer("SSH-2.0-x\r\n\r\n", 13, &st, &head), -1);
	CHECK_INT(ep_relay_parse_answer("HTTP/1.1 abc\r\n\r\n", 16, &st, &head), -1);
	/* a head that never ends is refused */
	size_t big = 20000;
	char *b = malloc(big);
	memset(b, 'a', big);
	memcpy(b, "HTTP/1.1 101 x\r\n", 16);
	CHECK_INT(ep_relay_parse_answer(b, big, &st, &head), -1);
	free(b);
}

struct holder {
	struct relay_pool *p;
	const char *job, *name;
	int fd;
	int rc;
	pthread_t t;
};

static void *hold(void *arg)
{
	struct holder *h = arg;
	h->rc = relay_pool_hold(h->p, h->job, h->name, h->fd, NULL, NULL);
	return NULL;
}

static void start_holder(struct holder *h, struct relay_pool *p, const char *job,
			 const char *name, int *peer)
{
	int sv[2];
	CHECK_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	*h = (struct holder){ p, job, name, sv[0], 99, 0 };
	*peer = sv[1];
	CHECK_INT(pthread_create(&h->t, NULL, hold, h), 0);
}

static void wait_parked(struct relay_pool *p, const char *job, const char *name, int want)
{
	for (int i = 0; i < 500; i++) {
		int parked, used;
		relay_pool_count(p, job, name, &parked, &used);
		if (parked == want)
			return;
		usleep(10000);
	}
	CHECK(!"parked count not reached");
}

TEST(relay_pool_limits_take_release)
{
	struct relay_pool *p = relay_pool_new(2, 3);
	struct holder h[3];
	int peer[3];
	start_holder(&h[0], p, "j", "web", &peer[0]);
	start_holder(&h[1], p, "j", "web", &peer[1]);
	wait_parked(p, "j", "web", 2);
	/* two parked for (j, web): a third is refused; another name of the job is not */
	CHECK_INT(relay_pool_admit(p, "j", "web"), 429);
	CHECK_INT(relay_pool_admit(p, "j", "nb"), 0);
	CHECK_INT(relay_pool_admit(p, "k", "web"), 0);
	start_holder(&h[2], p, "j", "nb", &peer[2]);
	wait_parked(p, "j", "nb", 1);
	/* three for job j: its limit */
	CHECK_INT(relay_pool_admit(p, "j", "other"), 429);
	/* nothing parked for another job or name: -1 after the wait */
	CHECK_INT(relay_pool_take(p, "k", "web", 50), -1);
	int fd = relay_pool_take(p, "j", "nb", 1000);
	CHECK(fd == h[2].fd);
	int parked, used;
	relay_pool_count(p, "j", NULL, &parked, &used);
	CHECK_INT(parked, 2);
	CHECK_INT(used, 1);
	/* the taker uses it as its own socket: bytes reach the node */
	CHECK_INT(write(fd, "GET", 3), 3);
	char buf[8];
	CHECK_INT(read(peer[2], buf, sizeof(buf)), 3);
	/* the node answers while it is taken: the holder does not drop it */
	CHECK_INT(write(peer[2], "HTTP", 4), 4);
	usleep(700000);
	relay_pool_count(p, "j", "nb", &parked, &used);
	CHECK_INT(used, 1);
	CHECK_INT(read(fd, buf, sizeof(buf)), 4);
	/* given back: shut down (the node sees its end), the holder returns */
	CHECK(relay_pool_release(p, fd));
	CHECK(!relay_pool_release(p, fd));
	CHECK_INT(read(peer[2], buf, sizeof(buf)), 0);
	CHECK_INT(pthread_join(h[2].t, NULL), 0);
	CHECK_INT(h[2].rc, 0);
	close(h[2].fd);
	/* a node that closes a parked one: the holder drops it */
	close(peer[0]);
	CHECK_INT(pthread_join(h[0].t, NULL), 0);
	wait_parked(p, "j", "web", 1);
	/* the server stops: the rest go, and nothing parks any more */
	relay_pool_stop(p);
	CHECK_INT(pthread_join(h[1].t, NULL), 0);
	CHECK_INT(relay_pool_admit(p, "j", "web"), 503);
	CHECK_INT(relay_pool_take(p, "j", "web", 50), -1);
	close(h[0].fd);
	close(h[1].fd);
	close(peer[1]);
	close(peer[2]);
	relay_pool_free(p);
}

static int ended_flag;

static bool job_ended(void *ctx, const char *job)
{
	(void)ctx;
	return __atomic_load_n(&ended_flag, __ATOMIC_SEQ_CST) && !strcmp(job, "j");
}

struct gone_holder {
	struct relay_pool *p;
	int fd;
};

static void *hold_gone(void *arg)
{
	struct gone_holder *g = arg;
	relay_pool_hold(g->p, "j", "web", g->fd, job_ended, NULL);
	return NULL;
}

TEST(relay_pool_drops_an_ended_jobs_connections)
{
	struct relay_pool *p = relay_pool_new(4, 16);
	int sv[2];
	CHECK_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	struct gone_holder g = { p, sv[0] };
	pthread_t t;
	CHECK_INT(pthread_create(&t, NULL, hold_gone, &g), 0);
	wait_parked(p, "j", "web", 1);
	__atomic_store_n(&ended_flag, 1, __ATOMIC_SEQ_CST);
	/* within a second or two the holder lets it go, and the node sees its end */
	CHECK_INT(pthread_join(t, NULL), 0);
	char c;
	CHECK_INT(read(sv[1], &c, 1), 0);
	wait_parked(p, "j", "web", 0);
	close(sv[0]);
	close(sv[1]);
	relay_pool_stop(p);
	relay_pool_free(p);
}

static int listen_local(int *port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	CHECK_INT(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	CHECK_INT(listen(fd, 16), 0);
	CHECK_INT(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

/* Read until the empty line (the request's head). */
static void read_head(int fd, struct sbuf *out)
{
	char c;
	while (!out->len || !strstr(out->buf, "\r\n\r\n")) {
		CHECK_INT(read(fd, &c, 1), 1);
		sbuf_add(out, &c, 1);
	}
}

TEST(relay_node_parks_pumps_and_stops)
{
	int hub_port, ep_port;
	int hub = listen_local(&hub_port), ep = listen_local(&ep_port);
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", hub_port);
	struct ep_relay_target t = { "web", ep_port };
	struct ep_relay_opts o = { .url = url, .secret = "s3cret", .job_id = "j-1", .targets = &t,
				   .ntargets = 1, .pool = 1, .max = 4 };
	struct ep_relay *r = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(ep_relay_start(&o, &r, &err), 0);
	/* the node asks to park, with the job's secret */
	int c = accept(hub, NULL, NULL);
	CHECK(c >= 0);
	struct sbuf req = SBUF_INIT;
	read_head(c, &req);
	CHECK_CONTAINS(req.buf, "GET /api/v1/hub/j-1/relay/web HTTP/1.1\r\n");
	CHECK_CONTAINS(req.buf, "X-Trainctl-Hub-Secret: s3cret\r\n");
	const char *ans = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: trainctl-relay\r\n\r\n";
	CHECK_INT(write(c, ans, strlen(ans)), (long long)strlen(ans));
	/* the first bytes: it connects to its endpoint and pumps both ways */
	CHECK_INT(write(c, "ping", 4), 4);
	int e = accept(ep, NULL, NULL);
	CHECK(e >= 0);
	char buf[16] = "";
	CHECK_INT(read(e, buf, 4), 4);
	CHECK(!memcmp(buf, "ping", 4));
	CHECK_INT(write(e, "pong", 4), 4);
	close(e);
	CHECK_INT(read(c, buf, 4), 4);
	CHECK(!memcmp(buf, "pong", 4));
	/* the endpoint closed: so does the relay's connection */
	CHECK_INT(read(c, buf, 4), 0);
	close(c);
	/* and another is parked in its place */
	int c2 = accept(hub, NULL, NULL);
	CHECK(c2 >= 0);
	sbuf_reset(&req);
	read_head(c2, &req);
	CHECK_CONTAINS(req.buf, "/relay/web ");
	CHECK_INT(write(c2, ans, strlen(ans)), (long long)strlen(ans));
	for (int i = 0; i < 500 && ep_relay_parked(r) != 1; i++)
		usleep(10000);
	CHECK_INT(ep_relay_parked(r), 1);
	/* the job ends: every connection closed, every thread joined */
	ep_relay_stop(r);
	CHECK_INT(read(c2, buf, 4), 0);
	close(c2);
	close(hub);
	close(ep);
	sbuf_release(&req);
	tc_err_release(&err);
}

TEST(relay_node_stops_at_a_hub_without_the_route)
{
	int hub_port;
	int hub = listen_local(&hub_port);
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", hub_port);
	struct ep_relay_target t = { "web", 1 };
	struct ep_relay_opts o = { .url = url, .secret = "s", .job_id = "j-1", .targets = &t,
				   .ntargets = 1, .pool = 1 };
	struct ep_relay *r = NULL;
	struct tc_err err = TC_ERR_INIT;
	CHECK_INT(ep_relay_start(&o, &r, &err), 0);
	int c = accept(hub, NULL, NULL);
	struct sbuf req = SBUF_INIT;
	read_head(c, &req);
	const char *ans = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
	CHECK_INT(write(c, ans, strlen(ans)), (long long)strlen(ans));
	close(c);
	/* `trainctl run`'s hub: no retry (one would come within its 1 s back-off) */
	struct pollfd pf = { .fd = hub, .events = POLLIN };
	CHECK_INT(poll(&pf, 1, 2500), 0);
	ep_relay_stop(r);
	close(hub);
	sbuf_release(&req);
	tc_err_release(&err);
}
