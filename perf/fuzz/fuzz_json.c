/* fuzz_json.c — libFuzzer target: the readers of ppdl's JSON inputs.
 *
 * Each input is given, as it is, to all three readers:
 *   COSTS.json    ppdl_costs_parse          (ppdl --costs, ppdl-plan --costs)
 *   CLUSTER.json  ppdl_cluster_model_parse  (ppdl --cluster, --netem, ppdl-plan --cluster;
 *                                            any rank count)
 *   plan JSON     ppdl_plan_read            (ppdl --plan FILE; from a temporary file, for
 *                                            a model of 6 layers on 3 ranks)
 * Besides ASan/UBSan findings, the target traps when a reader breaks its promise:
 *   - a refused input gets a message that starts with the name it was given;
 *   - an accepted one survives a round trip: written back as JSON by the matching
 *     writer and read again, it is accepted and describes the same thing.
 * Build and run: perf/fuzz/build, perf/fuzz/run json SECONDS (perf/fuzz/README.md).
 */
#include "core/error.h"
#include "plan/cluster_model.h"
#include "plan/costs.h"
#include "plan/plan.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WHAT "in.json"
#define L_MODEL 6
#define N_RANKS 3
static const int n_options[L_MODEL] = {2, 3, 3, 3, 3, 2}; /* a gpt: embedding, 4 blocks, head */
static char path[256];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(path, sizeof path, "%s/ppdl-fuzz-plan-%d.json", dir, (int)getpid());
    return 0;
}

static void check(int cond, const char *what, const char *err)
{
    if (cond) return;
    fprintf(stderr, "fuzz_json: %s (message: '%s')\n", what, err ? err : "");
    __builtin_trap();
}

static void write_file(const char *p, const void *data, size_t size)
{
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f)) {
        perror(p);
        abort();
    }
}

static int named(const char *err, const char *what) { return strncmp(err, what, strlen(what)) == 0; }

static void costs(const char *text)
{
    char err[PPDL_ERR_LEN] = "";
    ppdl_costs c, back;
    if (ppdl_costs_parse(text, WHAT, &c, err, sizeof err)) {
        check(named(err, WHAT), "costs: the message does not name the input", err);
        return;
    }
    char *js = ppdl_costs_to_json(&c);
    check(js != NULL, "costs: cannot write accepted costs", "");
    int rc = ppdl_costs_parse(js, "written", &back, err, sizeof err);
    check(rc == 0, "costs: written costs are refused", err);
    check(back.L == c.L, "costs: the round trip changed the layer count", "");
    for (int l = 0; l < c.L; l++) {
        const ppdl_layer_cost *a = &c.layers[l], *b = &back.layers[l];
        check(a->n_opts == b->n_opts && a->param_bytes == b->param_bytes && a->out_bytes == b->out_bytes,
              "costs: the round trip changed a layer's options or bytes", a->name);
        for (int o = 0; o < a->n_opts; o++)
            check(a->stash_bytes[o] == b->stash_bytes[o], "costs: the round trip changed stash bytes", a->name);
    }
    ppdl_costs_free(&back);
    ppdl_costs_free(&c);
    free(js);
}

static void cluster(const char *text)
{
    char err[PPDL_ERR_LEN] = "";
    ppdl_cluster_model c, back;
    if (ppdl_cluster_model_parse(text, WHAT, 0, &c, err, sizeof err)) {
        check(named(err, WHAT), "cluster: the message does not name the input", err);
        return;
    }
    char *js = ppdl_cluster_model_to_json(&c);
    check(js != NULL, "cluster: cannot write an accepted cluster", "");
    int rc = ppdl_cluster_model_parse(js, "written", c.N, &back, err, sizeof err);
    check(rc == 0, "cluster: a written cluster is refused", err);
    check(back.N == c.N && back.n_nodes == c.n_nodes, "cluster: the round trip changed ranks or nodes", "");
    ppdl_cluster_model_free(&back);
    ppdl_cluster_model_free(&c);
    free(js);
}

static void plan(const uint8_t *data, size_t size)
{
    char err[PPDL_ERR_LEN] = "";
    ppdl_plan p, back;
    write_file(path, data, size);
    if (ppdl_plan_read(path, L_MODEL, N_RANKS, n_options, &p, err, sizeof err)) {
        check(named(err, path), "plan: the message does not name the file", err);
        return;
    }
    check(ppdl_plan_ranks_used(&p) == N_RANKS, "plan: an accepted plan does not use every rank", "");
    char *js = ppdl_plan_to_json(&p);
    check(js != NULL, "plan: cannot write an accepted plan", "");
    write_file(path, js, strlen(js));
    int rc = ppdl_plan_read(path, L_MODEL, N_RANKS, n_options, &back, err, sizeof err);
    check(rc == 0, "plan: a written plan is refused", err);
    check(back.S == p.S, "plan: the round trip changed the stage count", "");
    for (int s = 0; s < p.S; s++)
        check(back.stages[s].first == p.stages[s].first && back.stages[s].last == p.stages[s].last &&
              back.stages[s].n_replicas == p.stages[s].n_replicas,
              "plan: the round trip changed a stage", "");
    ppdl_plan_free(&back);
    ppdl_plan_free(&p);
    free(js);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1); /* the parsers take NUL-terminated text */
    memcpy(text, data, size);
    text[size] = 0;
    costs(text);
    cluster(text);
    free(text);
    plan(data, size);
    return 0;
}
