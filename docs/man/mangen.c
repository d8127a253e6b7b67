/*
 * mangen.c - writes a man page from its hand-written template, filling in
 * what the code knows, so that the page cannot drift from the program:
 *
 *   mangen TEMPLATE OUTPUT VERSION
 *
 * In TEMPLATE, "@VERSION@" becomes VERSION and a line "@OPTIONS@" becomes
 * one .TP entry per px_config_options row (the table `seamfs --help`
 * prints), in roff with its special characters escaped.
 *
 *   mangen --list
 *
 * prints "name<TAB>ARG" per option ("-" for a flag): what tests compare
 * the README's option table with.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

/* Text for a roff line: '\' as \e, '-' as \-, and a leading '.' or '\''
 * guarded with \&, so no option's help can be read as a request. */
static void roff(FILE *out, const char *s)
{
	if (*s == '.' || *s == '\'')
		fputs("\\&", out);
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\e", out);
		else if (*s == '-')
			fputs("\\-", out);
		else
			fputc(*s, out);
	}
}

static void options(FILE *out)
{
	for (const struct px_config_option *o = px_config_options; o->name; o++) {
		fputs(".TP\n.B \\-o ", out);
		roff(out, o->name);
		if (o->arg) {
			fputs("=\\fI", out);
			roff(out, o->arg);
			fputs("\\fR", out);
		}
		fputc('\n', out);
		roff(out, o->help);
		fputs(".\n", out);
	}
}

int main(int argc, char **argv)
{
	char line[4096];
	int rc = 1;

	if (argc == 2 && strcmp(argv[1], "--list") == 0) {
		for (const struct px_config_option *o = px_config_options; o->name; o++)
			printf("%s\t%s\n", o->name, o->arg ? o->arg : "-");
		return 0;
	}
	if (argc != 4) {
		fprintf(stderr, "usage: mangen TEMPLATE OUTPUT VERSION | mangen --list\n");
		return 2;
	}
	FILE *in = fopen(argv[1], "r"), *out = fopen(argv[2], "w");
	if (!in || !out) {
		perror(!in ? argv[1] : argv[2]);
		goto done;
	}
	while (fgets(line, sizeof(line), in)) {
		if (strcmp(line, "@OPTIONS@\n") == 0) {
			options(out);
			continue;
		}
		for (char *p = line, *at; *p; p = at + 9) {
			if (!(at = strstr(p, "@VERSION@"))) {
				fputs(p, out);
				break;
			}
			fwrite(p, 1, (size_t)(at - p), out);
			fputs(argv[3], out);
		}
	}
	rc = ferror(in) || ferror(out) ? 1 : 0;
done:
	if (in)
		fclose(in);
	if (out && fclose(out))
		rc = 1;
	if (rc && argc == 4)
		remove(argv[2]);
	return rc;
}
