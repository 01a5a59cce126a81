/*
 * assets.h -- the web UI's files, embedded at build time by web/embed.cmake
 * into web_assets.c (in the build folder).  Private to src/api/.
 */
#ifndef TC_API_ASSETS_H
#define TC_API_ASSETS_H

#include <stddef.h>

struct web_asset {
	const char *url;  /* "/index.html" */
	const char *type; /* Content-Type */
	const unsigned char *data;
	size_t len;
};

/* Terminated by an entry whose url is NULL. */
extern const struct web_asset web_assets[];

#endif
