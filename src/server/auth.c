/*
 * auth.c -- bearer tokens: random, shown once, stored as SHA-256 (see
 * server.h); and the decisions on who a request comes from and what they
 * may see (api_int.h), kept free of libmicrohttpd and the store so that
 * the unit tests call them directly.
 */
#include "server/api_int.h"
#include "server/server.h"
#include "core/enc.h"
#include "core/xalloc.h"
#include "store/store.h"

#include <fcntl.h>
#include "core/lazylib.h"
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

void server_token_hash(const char *token, struct sbuf *out)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	char hex[2 * EVP_MAX_MD_SIZE + 1];
	unsigned int n = 0;
	if (!EVP_Digest(token, strlen(token), md, &n, EVP_sha256(), NULL))
		xdie_oom(0); /* only fails when OpenSSL cannot allocate */
	hex_encode(hex, md, n);
	sbuf_adds(out, hex);
}

int server_token_create(const char *home, const char *user, bool admin, char **token,
			struct tc_err *err)
{
	unsigned char raw[24];
	char hex[2 * sizeof(raw) + 1];
	*token = NULL;
	if (!*user || strlen(user) > 64)
		return tc_error(err, TC_EUSAGE, "token: --user must be 1 to 64 characters");
	for (const char *c = user; *c; c++)
		if (!(*c == '-' || *c == '_' || *c == '.' || (*c >= '0' && *c <= '9') ||
		      (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')))
			return tc_error(err, TC_EUSAGE, "token: --user may hold only letters, digits, '.', '_' and '-'");
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return tc_error_errno(err, TC_ESYS, "/dev/urandom");
	ssize_t r = read(fd, raw, sizeof(raw));
	close(fd);
	if (r != (ssize_t)sizeof(raw))
		return tc_error(err, TC_ESYS, "/dev/urandom: short read");
	struct sbuf tok = SBUF_INIT, hash = SBUF_INIT;
	hex_encode(hex, raw, sizeof(raw));
	sbuf_addf(&tok, "tc_%s", hex);
	server_token_hash(tok.buf, &hash);
	struct store *st = NULL;
	int rc = store_open(home, &st, err);
	if (!rc)
		rc = store_token_add(st, hash.buf, user, admin, err);
	store_close(st);
	sbuf_release(&hash);
	if (rc) {
		sbuf_release(&tok);
		return rc;
	}
	*token = sbuf_detach(&tok);
	return 0;
}

unsigned server_auth_decide(const struct auth_req *a, struct who *w)
{
	memset(w, 0, sizeof(*w));
	if (a->need == NEED_NONE)
		return 0;
	if (a->ntokens == 0) {
		/* no tokens: loopback only (server_run checks), everyone is the local admin */
		w->user = xstrdup(a->os_user);
		w->admin = true;
		return 0;
	}
	const char *tok = NULL;
	if (a->authorization && !strncasecmp(a->authorization, "Bearer ", 7))
		tok = a->authorization + 7;
	if (!tok)
		tok = a->token_arg;
	if (!tok || !*tok || a->lookup(a->arg, tok, &w->user, &w->admin) != 0) {
		free(w->user);
		memset(w, 0, sizeof(*w));
		return 401;
	}
	if (a->need == NEED_ADMIN && !w->admin)
		return 403;
	return 0;
}

bool server_may_see(const struct who *w, const char *owner)
{
	return w->admin || (w->user && owner && !strcmp(w->user, owner));
}
