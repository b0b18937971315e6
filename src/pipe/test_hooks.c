/* test_hooks.c — the planted bugs of the runtime, read from the environment
 * (test_hooks.h). */
#include "pipe/test_hooks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ppdl_test_hooks_read(ppdl_test_hooks *h, int rank)
{
    const char *s = getenv("PPDL_TEST_GRAD_SCALE");
    int r;
    float f;
    h->grad_scale = 1.0f;
    if (s && sscanf(s, "%d:%f", &r, &f) == 2 && r == rank) h->grad_scale = f;

    long k;
    s = getenv("PPDL_TEST_FAIL_STEP");
    h->fail_step = -1;
    if (s && sscanf(s, "%d:%ld", &r, &k) == 2 && r == rank && k >= 1) h->fail_step = k - 1;

    s = getenv("PPDL_TEST_BF16");
    h->bf16_stage_only = s && !strcmp(s, "stage-only");
}
