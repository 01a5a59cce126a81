/* yaml.c -- the tab hint of every YAML loader; see yaml.h. */
#include "core/yaml.h"

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
