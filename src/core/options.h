/* options.h — long options as every ppdl program takes them: the full name, or a prefix
 * that names one option alone (--micro for --micro-batches), followed by its value as
 * the next argument or after '=' (--steps 5, --steps=5). A prefix that fits several
 * options is refused with their names (--step: --steps or --step-delay), so that an
 * abbreviation never silently picks one of them. */
#ifndef PPDL_CORE_OPTIONS_H
#define PPDL_CORE_OPTIONS_H

#include <stddef.h>

struct option;

/* The index in names[] (NULL-terminated, each spelled "--name") of the option `arg`
 * ("--name" or "--name=value") stands for, or -1 with err saying why it stands for none
 * ("unknown option --x (see PROG --help)", "ambiguous option --step: --steps or
 * --step-delay (see PROG --help)"). */
int ppdl_option_lookup(const char *arg, const char *const *names, const char *prog, char *err, size_t errlen);

/* The same message for an argument getopt_long refused (it returned '?'), from its table. */
int ppdl_option_refused(const char *arg, const struct option *longopts, const char *prog, char *err, size_t errlen);

#endif
