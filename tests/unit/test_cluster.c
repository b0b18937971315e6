/* test_cluster.c — CLUSTER.json reading and validation (with the messages users see),
 * the node grouping, and the probe's schedule of pairs. Pure: no MPI ranks. */
#include "core/error.h"
#include "net/cluster.h"
#include "net/probe.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* a 4-rank cluster: nodes {0,1} and {2,3}, 10 GB/s inside, 1 GB/s between */
static const char *two_nodes =
    "{\"ranks\": 4,\n"
    " \"bandwidth_Bps\": [[5e10, 1e10, 1e9, 1e9], [1e10, 5e10, 1e9, 1e9],\n"
    "                     [1e9, 1e9, 5e10, 1e10], [1e9, 1e9, 1e10, 5e10]],\n"
    " \"latency_s\": [[0, 2e-6, 5e-5, 5e-5], [2e-6, 0, 5e-5, 5e-5],\n"
    "                 [5e-5, 5e-5, 0, 2e-6], [5e-5, 5e-5, 2e-6, 0]],\n"
    " \"mem_bytes\": [1073741824, 1073741824, 536870912, 536870912],\n"
    " \"speed\": [1, 1, 0.5, 1]}";

/* replace the first occurrence of `from` in two_nodes by `to` */
static char *edit(const char *from, const char *to)
{
    const char *p = strstr(two_nodes, from);
    if (!p) { fprintf(stderr, "test bug: '%s' not in the sample\n", from); exit(2); }
    size_t n = strlen(two_nodes) - strlen(from) + strlen(to) + 1;
    char *s = malloc(n);
    snprintf(s, n, "%.*s%s%s", (int)(p - two_nodes), two_nodes, to, p + strlen(from));
    return s;
}

/* parsing `text` fails with a message containing `want` */
static void bad(const char *text, int n_expected, const char *want, const char *why)
{
    ppdl_cluster_model cl;
    char err[PPDL_ERR_LEN] = "";
    int rc = ppdl_cluster_model_parse(text, "c.json", n_expected, &cl, err, sizeof err);
    if (!ok(rc != 0 && strstr(err, want) != NULL, "rejected: %s", why))
        diag("  rc %d, message '%s', expected it to contain '%s'", rc, err, want);
    if (rc == 0) ppdl_cluster_model_free(&cl);
}

static void bad_edit(const char *from, const char *to, const char *want, const char *why)
{
    char *s = edit(from, to);
    bad(s, 0, want, why);
    free(s);
}

/* the cluster's table (ppdl_cluster_print) into buf */
static void print_to(const ppdl_cluster_model *cl, char *buf, size_t len)
{
    buf[0] = 0;
    FILE *f = fmemopen(buf, len - 1, "w");
    if (f) {
        ppdl_cluster_print(cl, f);
        fclose(f);
    }
}

/* the nodes of a cluster as a string like "0,1|2,3" */
static const char *groups(const ppdl_cluster_model *cl)
{
    static char buf[256];
    size_t len = 0;
    buf[0] = 0;
    for (int g = 0; g < cl->n_nodes; g++) {
        int first = 1;
        for (int i = 0; i < cl->N; i++)
            if (cl->node[i] == g) {
                len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%d", first ? (g ? "|" : "") : ",", i);
                first = 0;
            }
    }
    return buf;
}

/* a cluster with bandwidth f(i, j) (symmetric), for the grouping tests */
static void group_case(int n, double (*f)(int, int), const char *want, const char *what)
{
    ppdl_cluster_model cl;
    ppdl_cluster_model_alloc(&cl, n);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (i != j) cl.bw[i * n + j] = f(i < j ? i : j, i < j ? j : i);
    ppdl_cluster_group_nodes(&cl, PPDL_NODE_RATIO);
    if (!ok(!strcmp(groups(&cl), want), "nodes of %s: %s", what, want)) diag("  got %s", groups(&cl));
    ppdl_cluster_model_free(&cl);
}

static double ring4(int i, int j) { return (j - i == 1 || (i == 0 && j == 3)) ? 1e9 : 2e8; }
static double slow3(int i, int j) { (void)i; return j == 3 ? 1e8 : 1e9; }
static double noisy(int i, int j) { return 1e9 * (1 + 0.3 * ((i * 7 + j * 3) % 4) / 3.0); }
/* 8 ranks, 2 hosts of 4, inside each host two NVLink pairs: {0,1},{2,3}: the largest gap
 * (host links 20 GB/s vs network 1 GB/s) decides */
static double tiers(int i, int j)
{
    if (i / 4 != j / 4) return 1e9;
    return i / 2 == j / 2 ? 1e11 : 2e10;
}
static double same(int i, int j) { (void)i; (void)j; return 5e9; }

static void schedule_checks(int n)
{
    int rounds = ppdl_probe_rounds(n);
    int *seen = calloc((size_t)(n * n), sizeof(int));
    int a[64], b[64], good = 1, disjoint = 1, count = 0;
    for (int r = 0; r < rounds; r++) {
        int np = ppdl_probe_round_pairs(n, r, a, b);
        if (np != n / 2) good = 0;
        int used[128] = {0};
        for (int k = 0; k < np; k++) {
            if (a[k] < 0 || b[k] >= n || a[k] >= b[k]) good = 0;
            else seen[a[k] * n + b[k]]++;
            if (used[a[k]]++ || used[b[k]]++) disjoint = 0;
            count++;
        }
    }
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (seen[i * n + j] != 1) good = 0;
    is_int(rounds, n < 2 ? 0 : (n % 2 ? n : n - 1), "%d ranks: %d rounds", n, rounds);
    ok(good && count == n * (n - 1) / 2, "%d ranks: every pair exactly once (%d pairs)", n, count);
    ok(disjoint, "%d ranks: the pairs of a round are disjoint", n);
    free(seen);
}

int main(void)
{
    plan(84);
    char err[PPDL_ERR_LEN] = "";
    ppdl_cluster_model cl;

    /* ---- a good file ---- */
    int rc = ppdl_cluster_model_parse(two_nodes, "c.json", 4, &cl, err, sizeof err);
    if (!ok(rc == 0, "a valid 4-rank cluster parses")) diag("  %s", err);
    if (rc == 0) {
        is_int(cl.N, 4, "4 ranks");
        close_f(cl.bw[0 * 4 + 2], 1e9, 0, 0, "bandwidth 0->2 read");
        close_f(cl.lat[2 * 4 + 3], 2e-6, 0, 0, "latency 2->3 read");
        close_f(cl.mem[2], 536870912.0, 0, 0, "memory of rank 2 read");
        close_f(cl.speed[2], 0.5, 0, 0, "speed of rank 2 read");
        ok(!strcmp(groups(&cl), "0,1|2,3"), "grouped into nodes {0,1} {2,3} (got %s)", groups(&cl));

        /* round trip through the writer: %.7g keeps 7 digits -> 1e-6 relative */
        char *js = ppdl_cluster_model_to_json(&cl);
        ppdl_cluster_model back;
        rc = ppdl_cluster_model_parse(js, "written", 4, &back, err, sizeof err);
        if (!ok(rc == 0, "the written JSON reads back")) diag("  %s\n%s", err, js);
        if (rc == 0) {
            int same_v = 1;
            for (int k = 0; k < 16; k++)
                if (fabs(back.bw[k] - cl.bw[k]) > 1e-6 * cl.bw[k] || fabs(back.lat[k] - cl.lat[k]) > 1e-6 * cl.lat[k] + 1e-15)
                    same_v = 0;
            for (int i = 0; i < 4; i++)
                if (back.mem[i] != cl.mem[i] || fabs(back.speed[i] - cl.speed[i]) > 1e-4) same_v = 0;
            ok(same_v, "written and read back: the same matrices, memory and speed");
            ok(strstr(js, "\"nodes\": [[0, 1], [2, 3]]") != NULL, "the file lists the nodes");
            ppdl_cluster_model_free(&back);
        } else {
            skip(2, "no read-back");
        }
        free(js);

        /* to a file and back; and a missing file */
        char path[] = "/tmp/ppdl-test-cluster-XXXXXX";
        int fd = mkstemp(path);
        if (fd >= 0) close(fd);
        rc = fd >= 0 ? ppdl_cluster_model_write(path, &cl, err, sizeof err) : -1;
        ok(rc == 0, "written to a file");
        ppdl_cluster_model f;
        rc = ppdl_cluster_model_read(path, 4, &f, err, sizeof err);
        ok(rc == 0 && f.N == 4 && f.bw[1] == cl.bw[1], "read back from the file");
        if (rc == 0) ppdl_cluster_model_free(&f);
        remove(path);
        rc = ppdl_cluster_model_read(path, 4, &f, err, sizeof err);
        ok(rc != 0 && strstr(err, path) && strstr(err, "cannot read"), "a missing file is named (%s)", err);
        ppdl_cluster_model_free(&cl);
    } else {
        skip(13, "the sample did not parse");
    }

    /* ---- what a user gets wrong, and what the message says ---- */
    bad(two_nodes, 2, "describes 4 ranks but the job has 2", "the job has another number of ranks");
    bad("{\"ranks\": 2, ", 0, "c.json: line", "not JSON: the line is named");
    bad("[1, 2]", 0, "expected a JSON object", "not an object");
    bad_edit("\"ranks\": 4", "\"ranks\": 4.5", "\"ranks\" must be an integer", "ranks not an integer");
    bad_edit("\"ranks\": 4", "\"ranks\": 0", "\"ranks\" must be an integer >= 1", "zero ranks");
    bad_edit("[1e10, 5e10, 1e9, 1e9]", "[1e10, 5e10, 1e9]", "bandwidth_Bps[1] must be an array of 4 numbers",
             "a short row (not square)");
    bad_edit("[[5e10, 1e10, 1e9, 1e9], [1e10, 5e10, 1e9, 1e9],",
             "[[5e10, 1e10, 1e9, 1e9],", "\"bandwidth_Bps\" must be an array of 4 rows", "a missing row");
    bad_edit("[1e10, 5e10, 1e9, 1e9]", "[1e10, 5e10, -1e9, 1e9]", "bandwidth_Bps[1][2] is -1e+09",
             "a negative bandwidth");
    /* the diagonal is never read (a rank sends nothing to itself): a hand-written file
     * may put 0, a negative number or anything there */
    {
        char *s = edit("[5e10, 1e10, 1e9, 1e9]", "[0, 1e10, 1e9, 1e9]");
        char *t = edit("[1e10, 5e10, 1e9, 1e9]", "[1e10, null, 1e9, 1e9]");
        ppdl_cluster_model c0;
        char e0[PPDL_ERR_LEN] = "";
        int r0 = ppdl_cluster_model_parse(s, "c.json", 0, &c0, e0, sizeof e0);
        ok(r0 == 0, "a 0 on the bandwidth's diagonal is accepted (never read) %s", e0);
        if (r0 == 0) ppdl_cluster_model_free(&c0);
        r0 = ppdl_cluster_model_parse(t, "c.json", 0, &c0, e0, sizeof e0);
        ok(r0 == 0 && c0.bw[1 * 4 + 1] == 0, "null on the diagonal is accepted, read as 0 %s", e0);
        if (r0 == 0) ppdl_cluster_model_free(&c0);
        free(s);
        free(t);
    }
    bad_edit("[1e10, 5e10, 1e9, 1e9]", "[0, 5e10, 1e9, 1e9]", "bandwidth_Bps[1][0] is 0",
             "a zero bandwidth off the diagonal (would divide by zero)");
    bad_edit("[1e10, 5e10, 1e9, 1e9]", "[1e10, 5e10, \"fast\", 1e9]", "bandwidth_Bps[1][2] is not a number",
             "a string where a number belongs");
    bad_edit("[5e-5, 5e-5, 0, 2e-6]", "[5e-5, 5e-5, 0, -2e-6]", "latency_s[2][3] is -2e-06", "a negative latency");
    bad_edit("\"latency_s\"", "\"latency\"", "missing \"latency_s\"", "a misspelt key");
    bad_edit("1073741824, 1073741824, 536870912", "1073741824, 0, 536870912", "mem_bytes[1] is 0", "zero memory");
    bad_edit("[1, 1, 0.5, 1]", "[1, 1, 0.5]", "\"speed\" must be an array of 4 numbers", "speed too short");
    bad_edit("[1, 1, 0.5, 1]", "[1, 1, 0, 1]", "speed[2] is 0", "zero speed");
    bad_edit("[1, 1, 0.5, 1]", "[1, 1, 1e999, 1]", "c.json: line", "an overflowing number (JSON has no inf)");
    bad_edit("\"speed\"", "\"mem_bytes\": [1, 2, 3, 4], \"speed\"", "duplicate", "a duplicated key");

    /* ---- the real machines ("hosts", optional): read, written, printed; bad ones ---- */
    char *hs = edit("\"speed\": [1, 1, 0.5, 1]}", "\"speed\": [1, 1, 0.5, 1],\n \"hosts\": [{\"name\": \"vm\", "
                    "\"cores\": 2, \"ranks\": [0, 2, 3]}, {\"name\": \"b\", \"cores\": 4, \"ranks\": [1]}]}");
    rc = ppdl_cluster_model_parse(hs, "c.json", 4, &cl, err, sizeof err);
    if (!ok(rc == 0 && cl.hosts.n == 2 && cl.hosts.of_rank[2] == 0 && cl.hosts.of_rank[1] == 1 &&
                cl.hosts.cores[0] == 2 && cl.hosts.cores[1] == 4 && !strcmp(cl.hosts.name[0], "vm"),
            "hosts read: rank -> host, cores, name"))
        diag("  %s", err);
    if (rc == 0) {
        char *js = ppdl_cluster_model_to_json(&cl);
        ppdl_cluster_model back;
        int rc2 = ppdl_cluster_model_parse(js, "written", 4, &back, err, sizeof err);
        ok(rc2 == 0 && back.hosts.n == 2 && back.hosts.of_rank[3] == 0 && back.hosts.cores[1] == 4 &&
               !strcmp(back.hosts.name[1], "b") && ppdl_hosts_oversubscribed(&back.hosts, 4),
           "hosts written and read back (3 ranks on a 2-core host: oversubscribed)");
        if (rc2 == 0) ppdl_cluster_model_free(&back);
        free(js);
        char buf[4096];
        print_to(&cl, buf, sizeof buf);
        ok(strstr(buf, "vm (2)") && strstr(buf, "shares its cores"), "the table names each rank's host and cores");
        ppdl_cluster_model_free(&cl);
    } else {
        skip(2, "the hosts did not parse");
    }
    free(hs);
    rc = ppdl_cluster_model_parse(two_nodes, "c.json", 4, &cl, err, sizeof err);
    ok(rc == 0 && cl.hosts.n == 0 && !ppdl_hosts_oversubscribed(&cl.hosts, 4), "a file without hosts: none known");
    if (rc == 0) {
        char *js = ppdl_cluster_model_to_json(&cl);
        ok(!strstr(js, "hosts"), "and none written");
        free(js);
        ppdl_cluster_model_free(&cl);
    } else {
        skip(1, "no sample");
    }
    bad_edit("\"speed\": [1, 1, 0.5, 1]}", "\"speed\": [1, 1, 0.5, 1], \"hosts\": [{\"cores\": 0, \"ranks\": [0, 1, 2, 3]}]}",
             "c.json: hosts[0].cores is 0", "a host without cores");
    bad_edit("\"speed\": [1, 1, 0.5, 1]}", "\"speed\": [1, 1, 0.5, 1], \"hosts\": [{\"cores\": 2, \"ranks\": [0, 1, 3]}]}",
             "c.json: hosts: rank 2 is in no host", "a rank on no host");

    /* ---- a host's memory contention (optional, 1..64): read, written, printed; bad ones ---- */
    char *mc = edit("\"speed\": [1, 1, 0.5, 1]}", "\"speed\": [1, 1, 0.5, 1],\n \"hosts\": [{\"name\": \"vm\", "
                    "\"cores\": 2, \"ranks\": [0, 2, 3], \"memory_contention\": 1.5}, {\"name\": \"b\", \"cores\": 4, "
                    "\"ranks\": [1]}]}");
    rc = ppdl_cluster_model_parse(mc, "c.json", 4, &cl, err, sizeof err);
    if (!ok(rc == 0 && cl.hosts.contention && cl.hosts.contention[0] == 1.5 && cl.hosts.contention[1] == 1.0 &&
                ppdl_hosts_contention(&cl.hosts, 3) == 1.5 && ppdl_hosts_contention(&cl.hosts, 1) == 1.0,
            "memory_contention read: 1.5 on host vm, 1 where absent"))
        diag("  %s", err);
    if (rc == 0) {
        char *js = ppdl_cluster_model_to_json(&cl);
        ppdl_cluster_model back;
        int rc2 = ppdl_cluster_model_parse(js, "written", 4, &back, err, sizeof err);
        ok(rc2 == 0 && back.hosts.contention && back.hosts.contention[0] == 1.5 && back.hosts.contention[1] == 1.0 &&
               strstr(js, "\"memory_contention\": 1.5") && !strstr(strstr(js, "memory_contention") + 1, "memory_contention"),
           "memory_contention written for the host that has one, and read back");
        if (rc2 == 0) ppdl_cluster_model_free(&back);
        free(js);
        char buf[4096];
        print_to(&cl, buf, sizeof buf);
        ok(strstr(buf, "host vm: memory contention 1.50") && !strstr(buf, "host b:"),
           "the table prints the host's contention");
        ppdl_cluster_model_free(&cl);
    } else {
        skip(2, "the contention did not parse");
    }
    free(mc);
    ok(ppdl_hosts_contention(&(ppdl_hosts){0}, 0) == 1.0, "no hosts: contention 1");
    bad_edit("\"speed\": [1, 1, 0.5, 1]}", "\"speed\": [1, 1, 0.5, 1], \"hosts\": [{\"cores\": 2, \"ranks\": [0, 1, 2, 3], "
             "\"memory_contention\": 0.5}]}", "c.json: hosts[0].memory_contention: expected a number 1..64",
             "a contention below 1 (a pass cannot run faster with company)");
    bad_edit("\"speed\": [1, 1, 0.5, 1]}", "\"speed\": [1, 1, 0.5, 1], \"hosts\": [{\"cores\": 2, \"ranks\": [0, 1, 2, 3], "
             "\"memory_contention\": \"high\"}]}", "hosts[0].memory_contention: expected a number",
             "a contention that is not a number");
    bad_edit("\"speed\": [1, 1, 0.5, 1]}", "\"speed\": [1, 1, 0.5, 1], \"hosts\": [{\"cores\": 2, \"ranks\": [0, 1, 2, 3], "
             "\"memory_contention\": 100}]}", "hosts[0].memory_contention: expected a number 1..64",
             "a contention over 64");

    /* ---- one rank: a valid file with a diagonal only ---- */
    const char *one = "{\"ranks\": 1, \"bandwidth_Bps\": [[2e10]], \"latency_s\": [[0]], "
                      "\"mem_bytes\": [1e9], \"speed\": [1]}";
    rc = ppdl_cluster_model_parse(one, "one.json", 1, &cl, err, sizeof err);
    ok(rc == 0 && cl.N == 1 && cl.n_nodes == 1, "a 1-rank cluster is valid and one node");
    if (rc == 0) {
        char *js = ppdl_cluster_model_to_json(&cl);
        ok(!strstr(js, "nan") && !strstr(js, "inf"), "the 1-rank JSON has no NaN or inf");
        free(js);
        ppdl_cluster_model_free(&cl);
    } else {
        skip(1, "no 1-rank cluster");
    }
    ppdl_cluster_model_alloc(&cl, 3);
    for (int i = 0; i < 3; i++) cl.mem[i] = 1e9;
    ok(ppdl_cluster_model_validate(&cl, "default", err, sizeof err) == 0, "a freshly allocated cluster (with memory) is valid");
    ppdl_cluster_model_free(&cl);

    /* ---- grouping into nodes ---- */
    group_case(4, ring4, "0,1,2,3", "a ring (fast neighbours join everyone)");
    group_case(4, slow3, "0,1,2|3", "one slow rank");
    group_case(4, noisy, "0,1,2,3", "a homogeneous network with 30% noise");
    group_case(8, tiers, "0,1,2,3|4,5,6,7", "two hosts of two NVLink pairs");
    group_case(4, same, "0,1,2,3", "identical links");
    group_case(2, same, "0,1", "two ranks (no contrast: one node)");
    group_case(1, same, "0", "one rank");

    /* ---- the probe's schedule ---- */
    int ns[] = {1, 2, 3, 4, 5, 8, 9, 64};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) schedule_checks(ns[i]);
    /* slots: 4 ranks on one host: one pair at a time; on 4 hosts: all at once; on two
     * hosts {0,1} {2,3}: pairs crossing between them go one after another */
    int a[2], b[2], slot[2];
    int one_host[4] = {0, 0, 0, 0}, four_hosts[4] = {0, 1, 2, 3}, two_hosts[4] = {0, 0, 2, 2};
    int np = ppdl_probe_round_pairs(4, 0, a, b), total1 = 0, total4 = 0, total2 = 0, total_all = 0;
    (void)np;
    for (int r = 0; r < 3; r++) {
        np = ppdl_probe_round_pairs(4, r, a, b);
        total1 += ppdl_probe_slots(np, a, b, one_host, 0, slot);
        total4 += ppdl_probe_slots(np, a, b, four_hosts, 0, slot);
        total2 += ppdl_probe_slots(np, a, b, two_hosts, 0, slot);
        total_all += ppdl_probe_slots(np, a, b, one_host, 1, slot);
    }
    is_int(total1, 6, "4 ranks on one host: 6 slots (every pair alone)");
    is_int(total4, 3, "4 ranks on 4 hosts: 3 slots (each round at once)");
    is_int(total2, 5, "4 ranks on 2 hosts: 5 slots (the two crossing rounds split, {0,1}+{2,3} together)");
    is_int(total_all, 3, "all_at_once: one slot per round");
    return exit_status();
}
