/* yaml.c -- the tab hint of every YAML loader; see yaml.h. */
#include "core/yaml.h"
#include "core/xalloc.h"

#include <string.h>

bool tc_yaml_tab_problem(const yaml_parser_t *p, const char *text, size_t len)
{
	if (p->problem && strstr(p->problem, "tab"))
		return true;
	const char *line = text, *end = text + len;
	for (size_t l = 0; l < p->problem_mark.line; l++) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		if (!nl)
			return false;
		line = nl + 1;
	}
	/* a tab in the leading blanks of the problem's line */
	for (; line < end && (*line == ' ' || *line == '\t'); line++)
		if (*line == '\t')
			return true;
	return false;
}

int tc_yaml_parse(const char *name, const char *text, size_t len, yaml_document_t *doc,
		  struct tc_err *err)
{
	yaml_parser_t parser;
	if (!yaml_parser_initialize(&parser))
		xdie_oom(sizeof(parser));
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	int rc = 0;
	if (!yaml_parser_load(&parser, doc)) {
		if (tc_yaml_tab_problem(&parser, text, len))
			rc = tc_error(err, TC_ESPEC, "%s:%zu: " TC_YAML_TAB_HINT, name,
				      parser.problem_mark.line + 1);
		else
			rc = tc_error(err, TC_ESPEC, "%s:%zu: syntax error: %s", name,
				      parser.problem_mark.line + 1,
				      parser.problem ? parser.problem : "cannot parse");
	}
	yaml_parser_delete(&parser);
	return rc;
}
