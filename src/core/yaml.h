/*
 * yaml.h -- what every YAML loader says when libyaml refuses a document.
 *
 * libyaml's own words for a tab in the indentation ("found character that
 * cannot start any token") name neither the tab nor the rule; every loader
 * (job specs, plan models and clusters, zoo model.yaml) asks here first and
 * gives the same hint, naming the line.  Text is (ptr, len): it need not end
 * in a NUL.  Nothing is allocated; the parser stays the caller's.
 */
#ifndef TC_CORE_YAML_H
#define TC_CORE_YAML_H

#include "core/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <yaml.h>

/* The hint for a tab, "a tab: YAML forbids tabs for indentation (indent with spaces)". */
#define TC_YAML_TAB_HINT "a tab: YAML forbids tabs for indentation (indent with spaces)"

/* Did parser p fail (after yaml_parser_load) because of a tab in the
 * indentation of text's failing line, or because libyaml named a tab? */
bool tc_yaml_tab_problem(const yaml_parser_t *p, const char *text, size_t len);

/*
 * Parse text (named name in errors) into *doc: 0, and *doc is the caller's
 * to yaml_document_delete; or TC_ESPEC with "NAME:LINE: syntax error: ..."
 * (the tab hint where a tab is the problem) and nothing to delete.
 */
int tc_yaml_parse(const char *name, const char *text, size_t len, yaml_document_t *doc,
		  struct tc_err *err);

#endif
