/* sock.c -- see sock.h. */
#include "core/sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

int sock_connect_local(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int sock_free_port(int port, bool any_addr)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(any_addr ? INADDR_ANY : INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int got = -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		got = ntohs(a.sin_port);
	close(fd);
	return got;
}

int sock_send_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

bool sock_pass(int from, int to)
{
	char buf[16384];
	ssize_t n;
	do
		n = recv(from, buf, sizeof(buf), 0);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return false;
	return sock_send_all(to, buf, (size_t)n) == 0;
}

void sock_pump(int a, int b)
{
	for (;;) {
		struct pollfd pf[2] = { { .fd = a, .events = POLLIN }, { .fd = b, .events = POLLIN } };
		int rc = poll(pf, 2, -1);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return;
		if ((pf[0].revents & (POLLIN | POLLHUP | POLLERR)) && !sock_pass(a, b))
			return;
		if ((pf[1].revents & (POLLIN | POLLHUP | POLLERR)) && !sock_pass(b, a))
			return;
	}
}
