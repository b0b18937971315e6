/* core/test_hooks.h — the conditions and bugs the tests plant, read only by the test build.
 *
 * The suite's negative controls plant a bug and see a test fail (a gradient scaled on one
 * rank, a skipped exchange, a second free); other tests emulate what one machine cannot
 * have (another node's clock, a host's core count, a skewed link). Each such hook is an
 * environment variable PPDL_TEST_<NAME>, and this file is the only one that reads them.
 *
 * It is compiled twice: into libppdl.a without PPDL_TEST_HOOKS, where every hook is unset
 * (ppdl_test_hook returns NULL), so the programs users install cannot be made to plant a
 * bug; and with PPDL_TEST_HOOKS into the test build of ppdl that `make check` runs
 * (tests/ppdl, and the GPU double's tests/gpudouble/ppdl). docs/testing.md lists the hooks.
 */
#ifndef PPDL_TEST_HOOKS_H
#define PPDL_TEST_HOOKS_H

#include "core/error.h"

/* The value of hook NAME ("TIE" reads PPDL_TEST_TIE); NULL when unset, and always in
 * the programs users install. */
const char *ppdl_test_hook(const char *name);

/* The hook's variable, for messages: "PPDL_TEST_<NAME>" in the test build. */
const char *ppdl_test_hook_var(const char *name);

/* The test build's one error for a malformed hook: names PPDL_TEST_<NAME>, its value and
 * what was expected, then ends the run (ppdl_die). */
PPDL_NORETURN void ppdl_test_hook_bad(const char *name, const char *value, const char *expected);

#endif
