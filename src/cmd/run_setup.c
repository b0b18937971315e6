/* run_setup.c — what a run needs before it can plan: the model description, the
 * device, the network between the ranks (probed, read or emulated), the data, the
 * checkpoint it resumes from, and what each layer costs. */
#include "config.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/run.h"
#include "core/error.h"
#include "core/stop.h"
#include "core/util.h"
#include "io/model_io.h"
#include "io/tokenizer.h"
#include "net/probe.h"
#if HAVE_CUDA
#include "backend/cuda/cuda_api.h"
#include "backend/cuda/nccl_p2p.h"
#endif
#include "pipe/p2p_choice.h"
#include "prof/profile.h"
#include "sched/schedule.h"

/* ---- the network (net/probe.h, net/cluster.h, net/netem.h) ---- */

/* The network the job runs on. --netem: the comm layer emulates a cluster file's links
 * from now on (so the probe below measures them too). --cluster: a saved measurement.
 * Otherwise the probe measures when something uses it (--probe-only, --cluster-out,
 * --report), with messages of the model's largest boundary activation per
 * micro-batch; a plain training run skips it. Either way the cluster knows the job's
 * machines (a --cluster file's "hosts", else the job's own). Rank 0 prints the table
 * and writes --cluster-out. Returns 1 when `cl` holds a cluster. */
static int know_network(const options *o, const ppdl_model *m, ppdl_backend *be, int p2p, ppdl_comm *comm,
                         ppdl_cluster_model *cl, double *probe_s)
{
    *probe_s = -1;
    char err[PPDL_ERR_LEN] = "", msg[PPDL_ERR_LEN + 32] = "";
    int rc;
    if (o->netem) {
        ppdl_cluster_model em;
        rc = ppdl_cluster_model_read(o->netem, comm->size, &em, err, sizeof err);
        snprintf(msg, sizeof msg, "--netem %s", err);
        agree_or_end_job(rc != 0, msg, 1);
        rc = ppdl_comm_set_netem(comm, &em, err, sizeof err);
        agree_or_end_job(rc != 0, err, 1);
        ppdl_cluster_model_free(&em);
    }
    if (o->cluster) {
        rc = ppdl_cluster_model_read(o->cluster, comm->size, cl, err, sizeof err);
        snprintf(msg, sizeof msg, "--cluster %s", err);
        agree_or_end_job(rc != 0, msg, 1);
        /* a file without the machines ("hosts"): this job's, whose cores its ranks share */
        if (cl->hosts.n == 0) ppdl_probe_hosts(comm->comm, be && ppdl_be_device_memory(be), &cl->hosts);
    } else if (o->probe_only || o->cluster_out || o->report || o->plan_mode == PLAN_AUTO) {
        ppdl_probe_opts po;
        ppdl_probe_defaults(&po);
        long b = o->micro_batch_size;
        for (int l = 0; m && l + 1 < m->L; l++)
            if (m->layers[l].out_bytes * (size_t)b > po.act_bytes) po.act_bytes = m->layers[l].out_bytes * (size_t)b;
        rc = run_options_mem_limit(o->mem_limit, comm->rank, &po.mem_bytes, err, sizeof err);
        agree_or_end_job(rc != 0, err, 2);
        po.be = be;
        double t0 = ppdl_now_s();
#if HAVE_CUDA
        /* --p2p nccl: the links are timed on the path the messages will take */
        if (p2p == PPDL_P2P_NCCL) {
            po.nccl = ppdl_nccl_create(comm->comm, be, NULL, err, sizeof err);
            agree_or_end_job(po.nccl == NULL, err, 2);
        }
#else
        (void)p2p; /* NCCL is in CUDA builds only */
#endif
        ppdl_probe_run(comm, &po, cl);
#if HAVE_CUDA
        ppdl_nccl_destroy(po.nccl);
#endif
        *probe_s = ppdl_now_s() - t0;
    } else {
        return 0;
    }
    int failed = 0;
    /* the table, unless the probe ran only for the default plan (whose timing line
     * says how long it took; --cluster-out or --probe-only show it) */
    int quiet = o->plan_defaulted && !o->probe_only && !o->cluster_out && !o->cluster;
    if (comm->rank == 0) {
        if (!quiet) ppdl_cluster_print(cl, stdout);
        fflush(stdout);
        if (o->cluster_out) failed = ppdl_cluster_model_write(o->cluster_out, cl, err, sizeof err) != 0;
        snprintf(msg, sizeof msg, "--cluster-out %s", err);
    }
    agree_or_end_job(failed, msg, 1);
    return 1;
}

/* ---- the layers' costs (prof/profile.h, plan/costs.h) ---- */

/* The data reading per micro-batch of b samples (median of 5 after a warm-up): the
 * first stage reads the inputs, the last the targets (pipe/passes.c's load_batch). In a
 * step the layers' work passes through the CPU's caches between two reads, so each
 * timed read here follows a sweep over a buffer the size of the last-level cache: read
 * back to back, HDF5's own structures stay in cache and a read takes a small fraction
 * of its time inside a step. */
static int profile_reading(const ppdl_model *m, ppdl_data *data, int b, ppdl_costs *c, char *err, size_t errlen)
{
    size_t in_b = (size_t)b * m->layers[0].in_bytes, tg_b = (size_t)b * ppdl_model_loss_rows(m) * sizeof(int32_t);
    void *in = ppdl_xmalloc(in_b ? in_b : 1);
    int32_t *tg = ppdl_xmalloc(tg_b ? tg_b : 1);
    size_t sweep_n = ppdl_llc_bytes();
    unsigned char *sweep = ppdl_xmalloc(sweep_n);
    double t[2][6];
    int rc = 0;
    for (int r = 0; r < 6 && !rc; r++)
        for (int k = 0; k < 2 && !rc; k++) {
            memset(sweep, r + k, sweep_n);
            double t0 = ppdl_now_s();
            rc = ppdl_data_read(data, (long)r * b % data->n, b, k ? NULL : in, k ? tg : NULL, err, errlen);
            t[k][r] = 1e3 * (ppdl_now_s() - t0);
        }
    for (int k = 0; k < 2 && !rc; k++) { /* median of runs 1..5 */
        double *v = &t[k][1];
        for (int a = 0; a < 5; a++)
            for (int q = a + 1; q < 5; q++)
                if (v[q] < v[a]) { double x = v[a]; v[a] = v[q]; v[q] = x; }
        if (k) c->target_ms = v[2];
        else c->input_ms = v[2];
    }
    free(sweep);
    free(in);
    free(tg);
    return rc;
}

/* What each layer costs, the planner's input. --costs: every rank reads the file and
 * checks it against the model and this run's micro-batch size. --costs-out or --plan
 * auto: rank 0 profiles the layers on its device (prof/profile.h) and the reading,
 * while the other ranks wait napping (a spinning rank on the same cores would slow the
 * timings), and writes the file with --costs-out; *profile_s gets the time it took.
 * Returns 1 when `c` holds costs: with --costs on every rank, else on rank 0. */
static int know_costs(const options *o, const ppdl_model *m, ppdl_backend *be, ppdl_comm *comm, ppdl_data *data,
                       ppdl_costs *c, double *profile_s)
{
    char err[PPDL_ERR_LEN] = "", msg[PPDL_ERR_LEN + 32] = "";
    int b = o->micro_batch_size, rc = 0;
    memset(c, 0, sizeof *c);
    *profile_s = -1;
    if (o->costs) {
        rc = ppdl_costs_read(o->costs, c, err, sizeof err);
        if (!rc && ppdl_costs_check_model(c, m, b, o->costs, err, sizeof err)) {
            ppdl_costs_free(c);
            rc = -1;
        }
        snprintf(msg, sizeof msg, "--costs %s", err);
        agree_or_end_job(rc != 0, msg, 1);
        c->bf16_messages = o->precision == PPDL_PREC_BF16; /* this run's messages, whatever made the file */
        return 1;
    }
    /* a zero-bubble schedule (zb-v included) orders its passes by the costs
     * (plan/pass_times.h) */
    int zb = ppdl_schedule_splits_backward(o->schedule) && comm->size > 1;
    if (!o->costs_out && o->plan_mode != PLAN_AUTO && !zb) return 0;
    if (comm->rank == 0) {
        double t0 = ppdl_now_s();
        size_t peak = ppdl_be_peak(be);
        rc = ppdl_profile_layers(m, be, b, NULL, c, err, sizeof err);
        ppdl_be_restore_peak(be, peak); /* the report's peak is the training's, not the profile's */
        if (!rc) c->bf16_messages = o->precision == PPDL_PREC_BF16;
        if (!rc && profile_reading(m, data, b, c, err, sizeof err)) ppdl_costs_free(c), rc = -1;
        if (!rc && o->costs_out && ppdl_costs_write(o->costs_out, c, err, sizeof err)) {
            ppdl_costs_free(c);
            rc = -1;
        }
        *profile_s = ppdl_now_s() - t0;
        if (!rc) {
            double f = 0, bw = 0;
            for (int l = 0; l < c->L; l++) f += c->layers[l].fwd_ms, bw += c->layers[l].bwd_ms;
            printf("costs: %d layers profiled on rank 0 (%s) at micro-batch size %d in %.2f s: forward %.3f ms, "
                   "backward %.3f ms per micro-batch, %s%s%s\n", c->L, ppdl_be_name(be), b, *profile_s,
                   f, bw,
                   c->ordered ? "the layers timed in their order"
                              : "each layer timed alone (the device cannot hold the whole model at once)",
                   o->costs_out ? "; written to " : "", o->costs_out ? o->costs_out : "");
            fflush(stdout);
        }
        snprintf(msg, sizeof msg, "%s %s",
                 o->costs_out                  ? "--costs-out"
                 : o->plan_mode == PLAN_AUTO ? "--plan auto: profiling:"
                                              : "profiling the layers for the order of the zero-bubble passes:",
                 err);
    }
    /* everyone learns whether rank 0 succeeded */
    agree_or_end_job_idle(rc != 0, msg, 1);
    return comm->rank == 0;
}

/* ---- the run to continue (io/checkpoint.h) ---- */

/* The checkpoint to resume from: --resume FILE, or with --resume auto the --checkpoint
 * file when it exists (rank 0 looks, every rank gets its answer). NULL: start fresh. */
static const char *resume_path(const options *o)
{
    if (!o->resume) return NULL;
    if (!o->resume_auto) return o->resume;
    int rank, exists = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) exists = access(o->checkpoint, F_OK) == 0;
    PPDL_CHECK_MPI(MPI_Bcast(&exists, 1, MPI_INT, 0, MPI_COMM_WORLD));
    return exists ? o->checkpoint : NULL;
}

/* --backend auto: CUDA where this build has it and every rank has a usable GPU of its
 * own (by PCI bus id: ppdl_cuda_choose_gpu), or PPDL_CUDA_SHARE=1 lets ranks share,
 * the CPU otherwise. Collective: every rank calls it, and all take the same answer;
 * `why` says why (the header prints it). */
static const char *choose_backend(char *why, size_t len)
{
    int mine[2] = {0, 0}; /* a usable GPU; one it may use (its own, or shared by consent) */
#if HAVE_CUDA
    ppdl_cuda_gpu g;
    if (ppdl_cuda_choose_gpu(&g, why, len)) { /* collective */
        const char *share = getenv("PPDL_CUDA_SHARE");
        mine[0] = 1;
        mine[1] = g.sharing == 1 || (share && !strcmp(share, "1"));
        if (!mine[1])
            ppdl_errf(why, len, "%s share the GPU at PCI bus %s (PPDL_CUDA_SHARE=1 lets ranks share)", g.sharers,
                      g.bus_id);
        else if (g.sharing > 1)
            ppdl_errf(why, len, "a usable GPU on every rank, %s sharing one (PPDL_CUDA_SHARE=1)", g.sharers);
        else
            snprintf(why, len, "a usable GPU on every rank");
    }
#else
    snprintf(why, len, "this ppdl was built without CUDA (configure --with-cuda)");
#endif
    int all[2] = {0, 0};
    PPDL_CHECK_MPI(MPI_Allreduce(mine, all, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (mine[1] && !all[0]) snprintf(why, len, "another rank has no usable GPU");
    else if (mine[1] && !all[1]) snprintf(why, len, "other ranks share a GPU (PPDL_CUDA_SHARE=1 lets them)");
    return all[1] ? "cuda" : "cpu";
}

/* --p2p: NCCL or MPI between the stages (pipe/p2p_choice.h). Collective: every rank
 * has the same backend, and whether every rank has a GPU of its own is agreed, so all
 * take the same path; --p2p nccl that cannot run ends the job with status 2. */
static void choose_p2p(run *r)
{
    int build_has_nccl = 0, own_gpus = 0;
#if HAVE_CUDA
    build_has_nccl = 1; /* the CUDA backend is built with NCCL (configure.ac) */
    char shared_why[PPDL_ERR_LEN];
    if (!strcmp(ppdl_be_name(r->be), "cuda"))
        own_gpus = ppdl_nccl_gpus_own(MPI_COMM_WORLD, r->be, shared_why, sizeof shared_why);
#endif
    r->p2p = ppdl_p2p_choose(r->o.p2p, build_has_nccl, ppdl_be_name(r->be), own_gpus, r->p2p_why, sizeof r->p2p_why);
    agree_or_end_job(r->p2p < 0, r->p2p_why, 2);
}

int run_setup_model(run *r)
{
    const options *o = &r->o;
    char err[PPDL_ERR_LEN] = "";
    int rc = o->model ? ppdl_model_load_desc(o->model, &r->model, err, sizeof err) : 0;
    agree_or_end_job(rc != 0, err, 1);
    if (o->probe_only) return 0;
    /* the run to continue, if any: a checkpoint of this model, whose state and step
     * replace the model file's weights and a fresh optimizer */
    r->resume = resume_path(o);
    rc = r->resume ? ppdl_ckpt_read_info(r->resume, &r->model, &r->ck, err, sizeof err) : 0;
    agree_or_end_job(rc != 0, err, 1);
    /* after the resume file's own checks, so that a bad one is named as such */
    rc = o->checkpoint ? ppdl_ckpt_check_path(o->checkpoint, err, sizeof err) : 0;
    agree_or_end_job(rc != 0, err, 1);
    r->start_step = r->resume ? (long)r->ck.step : 0;
    /* a finished run started again (a batch chain's last resubmission): nothing to
     * probe, plan, train or summarise; the checkpoint stays as it is */
    if (r->resume && r->start_step >= o->steps) {
        if (r->rank == 0)
            printf("nothing to train: %s has %ld steps done, --steps is %ld (give a larger --steps to train "
                   "further)\n", r->resume, r->start_step, o->steps);
        return 1;
    }
    return 0;
}

void run_setup_device_and_network(run *r)
{
    const options *o = &r->o;
    char err[PPDL_ERR_LEN] = "";
    /* the device: compute threads default to the node's cores shared among its ranks */
    int local = ppdl_comm_node_ranks(MPI_COMM_WORLD); /* collective: every rank, always */
    r->threads = o->threads;
    if (!r->threads) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        r->threads = cores > local ? cores / local : 1;
    }
    const char *backend = o->backend;
    if (!strcmp(backend, "auto")) backend = choose_backend(r->backend_why, sizeof r->backend_why);
    r->be = ppdl_backend_create(backend, (int)r->threads, r->rank, err, sizeof err);
    agree_or_end_job(r->be == NULL, err, 1);
    choose_p2p(r);
    snprintf(err, sizeof err, "--precision bf16: the %s backend has no bf16 kernels yet (the CPU backend has "
             "them: --backend cpu), or use --precision fp32", ppdl_be_name(r->be));
    agree_or_end_job(ppdl_be_set_precision(r->be, o->precision) != 0, err, 2);
    /* bf16: the blocks keep their saved tensors packed (sizes the plan, the profile and
     * the runtime all read from the model) */
    ppdl_model_set_precision(&r->model, o->precision == PPDL_PREC_BF16);
    /* the network between the ranks: probed, read or emulated */
    ppdl_comm_init(&r->comm, MPI_COMM_WORLD, o->wait);
    r->have_cluster = know_network(o, o->model ? &r->model : NULL, r->be, r->p2p, &r->comm, &r->cluster, &r->probe_s);
    /* the job's machines even without a cluster: whether ranks share cores (collective) */
    if (!r->have_cluster && r->n_ranks > 1) ppdl_probe_hosts(MPI_COMM_WORLD, ppdl_be_device_memory(r->be), &r->own_hosts);
}

void run_setup_data(run *r)
{
    const options *o = &r->o;
    char err[PPDL_ERR_LEN] = "";
    int rc = ppdl_data_open(o->data, &r->model, &r->data, err, sizeof err);
    agree_or_end_job(rc != 0, err, 1);
    snprintf(err, sizeof err, "--sample-every: %s is %s %s model; samples are text from gpt models", o->model,
             strcmp(r->model.family, "mlp") ? "a" : "an", r->model.family);
    agree_or_end_job(o->sample_every && strcmp(r->model.family, "gpt"), err, 2);
    if (o->tokenizer) { /* every rank checks it; rank 0 keeps it for the samples */
        char terr[PPDL_ERR_LEN - 16] = "";
        ppdl_tokenizer *t = ppdl_tokenizer_load(o->tokenizer, terr, sizeof terr);
        if (t && ppdl_tokenizer_vocab_size(t) > r->model.vocab_size)
            snprintf(terr, sizeof terr, "%s has %ld tokens, more than the model's vocab_size %d: not its tokenizer",
                     o->tokenizer, ppdl_tokenizer_vocab_size(t), r->model.vocab_size);
        else if (t && o->sample_prompt && !ppdl_tokenizer_can_encode(t))
            snprintf(terr, sizeof terr, "%s is llm.c's tokenizer file, which decodes only: --sample-prompt needs "
                     "the tokenizer.json", o->tokenizer);
        snprintf(err, sizeof err, "--tokenizer: %s", terr);
        agree_or_end_job(terr[0] != 0, err, 1);
        if (r->rank == 0) r->tok = t;
        else ppdl_tokenizer_free(t);
    }
    if (o->val_data) { /* held out: checked against the model as the training data is */
        char verr[PPDL_ERR_LEN - 16];
        rc = ppdl_data_open(o->val_data, &r->model, &r->val_data, verr, sizeof verr);
        snprintf(err, sizeof err, "--val-data: %s", verr);
        agree_or_end_job(rc != 0, err, 1);
        long whole = r->val_data.n / o->batch_size;
        r->eval_batches = o->eval_batches ? o->eval_batches : whole < 1 ? 1 : whole > 50 ? 50 : whole;
    }
    /* what each layer costs: profiled on rank 0's device (--costs-out, --plan auto) or
     * read (--costs) */
    r->have_costs = know_costs(o, &r->model, r->be, &r->comm, &r->data, &r->costs, &r->profile_s);
}
