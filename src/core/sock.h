/*
 * sock.h -- the TCP byte pump the endpoint relay (src/endpoint/relay.c) and
 * the server's endpoint proxy (src/gateway/proxy.c) share: dial a port on
 * this host, send a whole buffer, and copy two sockets into each other
 * until one side closes; and the one free-port finder.
 *
 * Nothing here owns a descriptor: the caller opens (except sock_connect_local,
 * whose fd it then owns) and closes them.  Sends use MSG_NOSIGNAL, so a
 * closed peer is an error return, never SIGPIPE.  Failures leave errno set.
 */
#ifndef TC_CORE_SOCK_H
#define TC_CORE_SOCK_H

#include <stdbool.h>
#include <stddef.h>

/* A blocking TCP connection to 127.0.0.1:port (close-on-exec): fd, or -1 with errno. */
int sock_connect_local(int port);
/*
 * A TCP port a listener can bind now, or -1: port itself (0: one the
 * kernel picks), on 127.0.0.1, or on every address when any_addr is set.
 * Only a check: another listener may take it before the caller binds it.
 */
int sock_free_port(int port, bool any_addr);
/* Send all n bytes (EINTR retried): 0, or -1 when the peer is gone or send fails. */
int sock_send_all(int fd, const void *buf, size_t n);
/* Copy what from has now to to: false when from is closed or the write fails. */
bool sock_pass(int from, int to);
/* Copy a to b and b to a until either is closed or a write fails. */
void sock_pump(int a, int b);

#endif
