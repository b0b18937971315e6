/* core/test_hooks.c — the test hooks (test_hooks.h): environment variables in the test
 * build, nothing in the programs users install. */
#include "core/test_hooks.h"

#include <stdio.h>
#include <stdlib.h>

#ifdef PPDL_TEST_HOOKS
#define PREFIX "PPDL_TEST_"
#else
#define PREFIX "" /* no variable of this name is ever read */
#endif

const char *ppdl_test_hook_var(const char *name)
{
    static _Thread_local char var[64];
    snprintf(var, sizeof var, PREFIX "%s", name);
    return var;
}

const char *ppdl_test_hook(const char *name)
{
#ifdef PPDL_TEST_HOOKS
    return getenv(ppdl_test_hook_var(name));
#else
    (void)name;
    return NULL;
#endif
}

void ppdl_test_hook_bad(const char *name, const char *value, const char *expected)
{
    ppdl_die("%s=%s: expected %s (a test hook)", ppdl_test_hook_var(name), value, expected);
}
