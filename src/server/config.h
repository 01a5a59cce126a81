/*
 * config.h -- the server's settings file (`trainctl server --config FILE`):
 * a YAML mapping whose keys are the command-line options of `trainctl
 * server` without their "--".  The loader knows the keys only through a
 * table its caller hands it (cmd_server.c builds it from its option table,
 * so no option lacks a key), checks each value's type, and turns the file
 * into option words ("--listen=HOST:PORT"), each with the line it came
 * from: the command's one option parser then checks the file and the
 * command line alike, and an error of a word is blamed on its file and line.
 * A section (a mapping of its own, `teams:`) is one more kind in this table:
 * the loader checks only that it is there and makes no word of it; its own
 * loader reads it (server/teams.h), so a reload can read it alone.
 */
#ifndef TC_SERVER_CONFIG_H
#define TC_SERVER_CONFIG_H

#include "core/err.h"

#include <stdarg.h>
#include <stddef.h>
#include <yaml.h>

enum srvconf_kind {
	SRVCONF_FLAG,  /* true or false: "--name" when true */
	SRVCONF_VALUE, /* one scalar: "--name=VALUE" */
	SRVCONF_PATH,  /* one scalar, a path: relative ones against the file's folder */
	SRVCONF_LIST,  /* a scalar or a list of them: one word each (a repeatable option) */
	SRVCONF_PAIRS, /* a list of "K=V", or a mapping K: V: one "--name=K=V" each (--quota) */
	SRVCONF_SECTION, /* a section its own loader reads (teams:): no word */
};

struct srvconf_key {
	const char *name; /* the long option's name */
	enum srvconf_kind kind;
	int val; /* the caller's: its getopt value, to tell which keys a command line gave */
};

struct srvconf_word {
	char *arg;        /* "--name" or "--name=VALUE" */
	const char *name; /* the key's name, as the caller's table holds it */
	int val;          /* the key's val */
	int line;
};

struct srvconf {
	char *file;
	struct srvconf_word *w;
	size_t n, alloc;
};
#define SRVCONF_INIT { NULL, NULL, 0, 0 }

/* Load path against keys (ended by a NULL name); TC_ESPEC with "FILE:LINE: key: ..." */
int srvconf_load(const char *path, const struct srvconf_key *keys, struct srvconf *out,
		 struct tc_err *err);
void srvconf_free(struct srvconf *c);
/* For a section's own loader: path read and parsed (TC_ESPEC; *doc is the caller's to
 * yaml_document_delete on 0), a node's line (from 1), its text when a scalar (else NULL),
 * and TC_ESPEC with "FILE:LINE: KEY: message" (no "KEY: " for a NULL key). */
int srvconf_parse(const char *path, yaml_document_t *doc, struct tc_err *err);
int srvconf_line(const yaml_node_t *n);
const char *srvconf_scalar(const yaml_node_t *n);
int srvconf_error(struct tc_err *err, const char *file, int line, const char *key,
		  const char *fmt, ...) TC_PRINTF(5, 6);
int srvconf_verror(struct tc_err *err, const char *file, int line, const char *key,
		   const char *fmt, va_list ap);
/* Put "FILE:LINE: key: " before err's message: word i of c was refused by the parser. */
void srvconf_blame(const struct srvconf *c, size_t i, struct tc_err *err);

#endif
