/* options.c — full option names or unique prefixes, the same rule in every program. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/options.h"

#define MAX_CANDIDATES 64

int ppdl_option_lookup(const char *arg, const char *const *names, const char *prog, char *err, size_t errlen)
{
    const char *eq = strchr(arg, '=');
    size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
    int hits[MAX_CANDIDATES], n_hits = 0;
    for (int i = 0; names[i]; i++) {
        if (strncmp(names[i], arg, n)) continue;
        if (names[i][n] == 0) return i; /* the full name wins over longer names it begins */
        if (n > 2 && n_hits < MAX_CANDIDATES) hits[n_hits++] = i;
    }
    if (n_hits == 1) return hits[0];
    if (n_hits == 0) return ppdl_errf(err, errlen, "unknown option %.*s (see %s --help)", (int)n, arg, prog);
    char list[1024] = "";
    size_t len = 0;
    for (int k = 0; k < n_hits && len < sizeof list; k++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", k == 0 ? "" : k + 1 < n_hits ? ", " : " or ",
                                names[hits[k]]);
    return ppdl_errf(err, errlen, "ambiguous option %.*s: %s (see %s --help)", (int)n, arg, list, prog);
}

int ppdl_option_refused(const char *arg, const struct option *longopts, const char *prog, char *err, size_t errlen)
{
    char spelled[MAX_CANDIDATES * 2][48];
    const char *names[MAX_CANDIDATES * 2 + 1];
    int n = 0;
    for (; longopts[n].name && n < MAX_CANDIDATES * 2; n++) {
        snprintf(spelled[n], sizeof spelled[n], "--%s", longopts[n].name);
        names[n] = spelled[n];
    }
    names[n] = NULL;
    if (strncmp(arg, "--", 2)) return ppdl_errf(err, errlen, "unknown option %s (see %s --help)", arg, prog);
    int i = ppdl_option_lookup(arg, names, prog, err, errlen);
    /* getopt_long refused an option the table has: it takes no value but got one */
    if (i >= 0) return ppdl_errf(err, errlen, "%s takes no value (see %s --help)", names[i], prog);
    return -1;
}
