/*
 * statedir.c - the default state directory (see statedir.h).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "statedir.h"

char *fs_default_state_dir(void)
{
	const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	char buf[PATH_MAX];
	if (geteuid() == 0)
		snprintf(buf, sizeof(buf), "/var/lib/seamfs");
	else if (xdg && xdg[0] == '/')
		snprintf(buf, sizeof(buf), "%s/seamfs", xdg);
	else if (home && home[0] == '/')
		snprintf(buf, sizeof(buf), "%s/.local/state/seamfs", home);
	else
		snprintf(buf, sizeof(buf), "/tmp/seamfs-%u", (unsigned)geteuid());
	return strdup(buf);
}
