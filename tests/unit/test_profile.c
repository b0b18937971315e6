/* test_profile.c — the layer profile (prof/profile.c): with room for the whole model it
 * times the layers in their order, without room it falls back to timing each layer
 * alone; either way every time is a positive, finite number (the split backward's B
 * and W too, on every layer, the twins of a profiled layer included), the bytes are the model's,
 * and the device's memory is all given back. The bytes are also checked against the
 * shapes written out here from the hyperparameters (docs/formats.md's parameter shapes), not
 * only against ppdl_costs_from_model, which the profiler itself calls. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"
#include "nn/model.h"
#include "prof/profile.h"
#include "tap.h"

/* every layer's times > 0 and finite, the bytes as ppdl_costs_from_model gives them */
static int costs_sane(const ppdl_costs *c, const ppdl_model *m, int b)
{
    ppdl_costs ref;
    ppdl_costs_from_model(m, b, &ref);
    int good = c->L == m->L && c->micro_batch_size == b;
    for (int l = 0; good && l < c->L; l++) {
        const ppdl_layer_cost *x = &c->layers[l], *r = &ref.layers[l];
        good = isfinite(x->fwd_ms) && x->fwd_ms > 0 && isfinite(x->bwd_ms) && x->bwd_ms > 0 &&
               x->param_bytes == r->param_bytes && x->out_bytes == r->out_bytes && x->n_opts == r->n_opts;
        for (int o = 1; good && o < x->n_opts; o++) good = isfinite(x->extra_ms[o]) && x->extra_ms[o] > 0;
        /* the split backward (zero-bubble schedules): W > 0 wherever there are
         * parameters, B > 0 but on the first layer (it computes no input gradient):
         * on every layer, a profiled one's twins too (they had 0 for both once, and
         * the zero-bubble cost model saw their stages as nearly free). Not compared
         * with the fused backward: sub-millisecond times are the timer's noise here */
        double bi = x->bwd_input_ms, bw = x->bwd_weight_ms;
        if (good)
            good = isfinite(bi) && isfinite(bw) && bi >= 0 && bw >= 0 && (l == 0 || bi > 0) &&
                   (x->param_bytes == 0 || bw > 0);
        if (!good) diag("layer %d (%s): fwd %g bwd %g ms, B %g W %g", l, x->name, x->fwd_ms, x->bwd_ms, bi, bw);
    }
    ppdl_costs_free(&ref);
    return good;
}

/* param_bytes and out_bytes from the hyperparameters alone, for gpt and mlp: 0 when
 * every layer has the bytes its shapes give */
static int bytes_by_hand(const ppdl_costs *c, const ppdl_model *m, int b)
{
    int bad = 0;
    for (int l = 0; l < c->L; l++) {
        double params = -1, out = -1;
        if (!strcmp(m->family, "gpt")) {
            double V = m->vocab_size, T = m->seq_len, C = m->d_model;
            if (l == 0) params = V * C + T * C, out = b * T * C;                      /* wte, wpe */
            else if (l < c->L - 1) params = 12 * C * C + 13 * C, out = b * T * C;     /* a block */
            else params = 2 * C + V * C;                                              /* ln_f, lm_head */
        } else if (!strcmp(m->family, "mlp")) {
            double in = l == 0 ? m->in_features : m->hidden, o = l == c->L - 1 ? m->n_classes : m->hidden;
            params = in * o + o, out = b * o;                                         /* weight, bias */
        }
        if (params >= 0 && c->layers[l].param_bytes != 4 * params) {
            diag("layer %d: param_bytes %.0f, the shapes give %.0f", l, c->layers[l].param_bytes, 4 * params);
            bad = 1;
        }
        if (out >= 0 && c->layers[l].out_bytes != 4 * out) {
            diag("layer %d: out_bytes %.0f, the shapes give %.0f", l, c->layers[l].out_bytes, 4 * out);
            bad = 1;
        }
    }
    return bad;
}

static void one_family(ppdl_backend *be, const char *preset, int b)
{
    char err[PPDL_ERR_LEN] = "";
    ppdl_model m;
    ppdl_model_preset(&m, preset, err, sizeof err);
    ok(ppdl_model_build(&m, err, sizeof err) == 0, "%s built %s", preset, err);
    ppdl_profile_opts o;
    ppdl_profile_opts_default(&o);
    o.reps = 2; /* the ordered pass still runs 0.1 s */

    /* room for everything: the layers in their order */
    ppdl_be_set_limit(be, 0);
    ppdl_costs c;
    int rc = ppdl_profile_layers(&m, be, b, &o, &c, err, sizeof err);
    ok(rc == 0, "%s: profiled with no memory limit %s", preset, err);
    if (rc == 0) {
        ok(c.ordered == 1, "%s: the device holds the model, so the layers were timed in their order", preset);
        ok(costs_sane(&c, &m, b), "%s: every time positive and finite, the bytes the model's", preset);
        if (strcmp(m.family, "cnn"))
            ok(bytes_by_hand(&c, &m, b) == 0, "%s: param_bytes and out_bytes as the shapes give them", preset);
        ppdl_costs_free(&c);
    }
    ok(ppdl_be_in_use(be) == 0, "%s: all device memory given back (%zu bytes left)", preset, ppdl_be_in_use(be));
    ppdl_model_free(&m);
}

/* an MLP of 8 layers of 512 x 512 (1 MiB of parameters each), under a limit of 1.9x its
 * parameters: each layer's profile needs ~5 MiB (values, gradients, AdamW m and v of
 * one layer, small buffers), the ordered pass at least 2x the parameters (values and
 * gradients of every layer): each layer alone */
static void fallback(ppdl_backend *be)
{
    char err[PPDL_ERR_LEN] = "";
    ppdl_model m;
    ppdl_model_preset(&m, "mlp", err, sizeof err);
    const char *set[][2] = {{"in_features", "512"}, {"hidden", "512"}, {"n_layers", "8"}, {"n_classes", "512"}};
    int rc = 0;
    for (size_t k = 0; k < sizeof set / sizeof set[0] && !rc; k++) rc = ppdl_model_set(&m, set[k][0], set[k][1], err, sizeof err);
    ok(rc == 0 && ppdl_model_build(&m, err, sizeof err) == 0, "mlp 8 x 512 built %s", err);
    double params = 0;
    for (int l = 0; l < m.L; l++) params += 4.0 * (double)ppdl_layer_param_count(&m.layers[l]);
    ppdl_profile_opts o;
    ppdl_profile_opts_default(&o);
    o.reps = 2;
    ppdl_costs c;
    ppdl_be_set_limit(be, (size_t)(1.9 * params));
    rc = ppdl_profile_layers(&m, be, 4, &o, &c, err, sizeof err);
    ok(rc == 0, "profiled under a limit of 1.9x the parameters (%zu bytes) %s", ppdl_be_limit(be), err);
    if (rc == 0) {
        ok(c.ordered == 0, "no room for the whole model: each layer was timed alone");
        ok(costs_sane(&c, &m, 4), "every time positive and finite under the limit");
        ok(bytes_by_hand(&c, &m, 4) == 0, "mlp 8 x 512: param_bytes and out_bytes as the shapes give them");
        ppdl_costs_free(&c);
    }
    ok(ppdl_be_in_use(be) == 0, "all device memory given back (%zu bytes left)", ppdl_be_in_use(be));
    ppdl_be_set_limit(be, 0);
    rc = ppdl_profile_layers(&m, be, 4, &o, &c, err, sizeof err);
    ok(rc == 0 && c.ordered == 1, "without the limit the same model is timed in order %s", err);
    if (rc == 0) ppdl_costs_free(&c);
    ppdl_model_free(&m);
}

/* a tied gpt's costs carry the tie (4 V C bytes, by hand), and --costs checks it:
 * the costs of the tied model are refused for the untied one and the reverse */
static void tied_costs(void)
{
    char err[PPDL_ERR_LEN] = "";
    ppdl_model t, u;
    ppdl_model_preset(&t, "gpt-tiny", err, sizeof err);
    ppdl_model_preset(&u, "gpt-tiny", err, sizeof err);
    ppdl_model_set(&u, "tie_embeddings", "0", err, sizeof err);
    ppdl_model_build(&t, err, sizeof err);
    ppdl_model_build(&u, err, sizeof err);
    ppdl_costs ct, cu;
    ppdl_costs_from_model(&t, 2, &ct);
    ppdl_costs_from_model(&u, 2, &cu);
    ok(ct.tied_bytes == 4.0 * t.vocab_size * t.d_model && cu.tied_bytes == 0,
       "the tied gpt's costs carry a tie of 4 V C = %.0f bytes, the untied one's none", ct.tied_bytes);
    char *js = ppdl_costs_to_json(&ct);
    ppdl_costs back;
    int rc = ppdl_costs_parse(js, "costs.json", &back, err, sizeof err);
    ok(rc == 0 && back.tied_bytes == ct.tied_bytes && strstr(js, "\"tied\""), "\"tied\" survives the file (%s)", err);
    if (rc == 0) ppdl_costs_free(&back);
    free(js);
    ok(ppdl_costs_check_model(&ct, &t, 2, "c.json", err, sizeof err) == 0, "the tied costs fit the tied model (%s)", err);
    rc = ppdl_costs_check_model(&ct, &u, 2, "c.json", err, sizeof err);
    ok(rc != 0 && strstr(err, "c.json") && strstr(err, "tied bytes"), "... and are refused for the untied one: %s", err);
    rc = ppdl_costs_check_model(&cu, &t, 2, "c.json", err, sizeof err);
    ok(rc != 0 && strstr(err, "ties its embeddings"), "the untied costs are refused for the tied model: %s", err);
    ppdl_costs_free(&ct);
    ppdl_costs_free(&cu);
    ppdl_model_free(&t);
    ppdl_model_free(&u);
}

int main(void)
{
    char err[PPDL_ERR_LEN] = "";
    ppdl_backend *be = ppdl_backend_create("cpu", 1, 0, err, sizeof err);
    if (!be) {
        diag("no CPU backend: %s", err);
        return 1;
    }
    one_family(be, "gpt-tiny", 2);
    one_family(be, "mlp", 4);
    one_family(be, "cnn", 2);
    fallback(be);
    tied_costs();
    ppdl_backend_destroy(be);
    done_testing();
    return exit_status();
}
