/* runtime_hooks.h — the bugs and errors the tests plant in the runtime, for their
 * negative controls: four test hooks (core/test_hooks.h: read only by the test build),
 * read here once, when a runtime is created. Unset, and always in the ppdl users
 * install, every field has the value that changes nothing. */
#ifndef PPDL_RUNTIME_HOOKS_H
#define PPDL_RUNTIME_HOOKS_H

typedef struct ppdl_runtime_hooks {
    /* PPDL_TEST_GRAD_SCALE=RANK:FACTOR: rank RANK multiplies every gradient of its
     * stage by FACTOR after the step's last backward, before the replicas sum them
     * (tests/oracle, tests/mpi/hybrid.sh show that their comparisons see a wrong
     * gradient scale). Unset, or another rank: 1. */
    float grad_scale;
    /* PPDL_TEST_FAIL_STEP=RANK:STEP: rank RANK dies with an internal error in the
     * middle of step STEP (counting from 1), as a failed check would, so that the
     * tests see one rank's error mid-step reach the user and end the job. Holds STEP
     * counted from 0; unset, or another rank: -1 (never). */
    long fail_step;
    /* PPDL_TEST_BF16=stage-only: under bf16 a layer's output is rounded only where it
     * is sent, not at every layer boundary (its bits then depend on where the stages
     * are cut: tests/mpi/bf16_equiv.sh sees it). 0 when unset. */
    int bf16_stage_only;
    /* PPDL_TEST_SHARD=norm-one-shard: with the optimizer state sharded (nn/stage.h), the
     * clipping norm sums each replica's own slice of the gradients only, a norm over one
     * shard (tests/mpi/hybrid.sh: sharded is then not bitwise unsharded);
     * PPDL_TEST_SHARD=no-gather: the replicas skip the all-gather of the updated weights.
     * 0 when unset. */
    int shard_norm_one, shard_no_gather;
} ppdl_runtime_hooks;

/* the hooks as the test build's environment sets them for rank `rank` of the comm layer */
void ppdl_runtime_hooks_read(ppdl_runtime_hooks *h, int rank);

#endif
