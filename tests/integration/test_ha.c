/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Two kop replicas with leader election, as real processes: one kubesim
 * with the MyResource CRD (v1 only, so no conversion webhook is needed)
 * and `kop --controller-only --leader-elect` started twice with short
 * lease durations, each on its own kernel-chosen metrics port.
 *
 * Covers (docs/reconcile.md §9 leader election, docs/operations.md §5 SIGTERM):
 *  - exactly one replica leads: leader_election_master_status is 1 on one
 *    /metrics and 0 on the other, and the Lease names the leader;
 *  - only the leader reconciles: the follower's reconcile count and its
 *    write requests (rest_client_requests_total POST/PATCH) stay put
 *    while the leader's grow;
 *  - SIGKILL of the leader: the follower waits for the lease to expire
 *    (not earlier), then leads and reconciles a MyResource created while
 *    nobody led;
 *  - SIGTERM of the leader: the lease is handed over at the follower's next
 *    retry, long before it would expire; the last replica releases it
 *    (holderIdentity "") and a fresh replica takes it at once;
 *  - a leader that cannot renew (kubesim answers 500 to every update, so
 *    the follower cannot take over either) stops reconciling when the
 *    renew deadline passes: its reconcile count stays put while
 *    MyResources change, and reconciling resumes once updates work again.
 *
 * Time bounds only check which side of a configured duration an event
 * falls on, with seconds of slack; other waits poll for the condition
 * with generous deadlines, so a slow machine only makes the run longer.
 */
#include "kubetest.h"
#include "testutil.h"

#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TOKEN "ha-test-token"
#define NS "default"
#define LEASE_NS "kop-system"
#define LEASE_PATH "/apis/coordination.k8s.io/v1/namespaces/" LEASE_NS "/leases/kop-leader"
#define MYR_PATH "/apis/mygroup.example.com/v1/namespaces/" NS "/myresources"
#define DEP_PATH "/apis/apps/v1/namespaces/" NS "/deployments"

/* Durations of one run (kop flag values, and the same in ms). */
struct timing {
    const char *lease, *renew, *retry;
    long lease_ms, renew_ms, retry_ms;
};

/* Short: failover and lease loss happen within seconds. */
static const struct timing fast = {"3s", "2s", "500ms", 3000, 2000, 500};
/* Kill: the 2 s between a lease expiry and a retry-period handover show. */
static const struct timing mid = {"5s", "3s", "500ms", 5000, 3000, 500};
/* Long lease, short retry: a release is told apart from an expiry (by
 * far, so a loaded machine cannot blur the two). */
static const struct timing slow_expiry = {"30s", "20s", "500ms", 30000, 20000, 500};
/* Lost renewals: the renew deadline passes long before the lease expires. */
static const struct timing lost = {"6s", "2s", "500ms", 6000, 2000, 500};

struct node {
    struct kop_test_proc proc;
    bool running;
    long metrics_port;
    char identity[400];
};

#define MAX_NODES 3
static struct node nodes[MAX_NODES];
static struct kop_test_kubesim sim;
static bool sim_running;
static struct kop_test_scratch fx;

/* ---- HTTP ---------------------------------------------------------------------------------- */

static const struct kop_test_http_options *api_opts(void)
{
    static struct kop_test_http_options o;
    o = (struct kop_test_http_options){
        .handle = fx.curl,
        .ca = fx.ca,
        .token = TOKEN,
        .timeout_s = 10,
    };
    return &o;
}

static json_t *api(const char *method, const char *path, const char *body, long want)
{
    return kop_test_api(api_opts(), sim.url, method, path, body, want);
}

/* GET; NULL on 404. */
static json_t *get(const char *path)
{
    return kop_test_api_get(api_opts(), sim.url, path);
}

/* Sum of the samples of a metric family whose line contains label (NULL:
 * any); -1 when there is no such sample at all. */
static double metric(const struct node *n, const char *name, const char *label)
{
    return kop_test_scrape_sum(api_opts(), n->metrics_port, name, label);
}

static double master_status(const struct node *n)
{
    return metric(n, "leader_election_master_status", "name=\"kop-leader\"");
}

/* Absent counts as zero: the family appears with the first reconcile. */
static double reconciles(const struct node *n)
{
    double v = metric(n, "controller_runtime_reconcile_total", NULL);
    return v < 0 ? 0 : v;
}

/* Writes this replica sent to the API server (creates and patches). */
static double writes(const struct node *n)
{
    double post = metric(n, "rest_client_requests_total", "method=\"POST\"");
    double patch = metric(n, "rest_client_requests_total", "method=\"PATCH\"");
    return (post < 0 ? 0 : post) + (patch < 0 ? 0 : patch);
}

/* The reconcile count of n reaches at least want within timeout_ms (the
 * counter moves when a reconcile ends, after its writes). */
static bool wait_reconciles(const struct node *n, double want, long timeout_ms)
{
    long end = kop_test_now_ms() + timeout_ms;
    while (reconciles(n) < want) {
        if (kop_test_now_ms() >= end)
            return false;
        kop_test_sleep_ms(50);
    }
    return true;
}

/* The Lease's spec.holderIdentity into buf; false when there is no Lease. */
static bool lease_holder(char *buf, size_t len, json_int_t *ret_transitions)
{
    json_t *l = get(LEASE_PATH);
    if (!l)
        return false;
    json_t *spec = json_object_get(l, "spec");
    const char *h = json_string_value(json_object_get(spec, "holderIdentity"));
    snprintf(buf, len, "%s", h ? h : "");
    if (ret_transitions)
        *ret_transitions = json_integer_value(json_object_get(spec, "leaseTransitions"));
    json_decref(l);
    return true;
}

/* ---- processes --------------------------------------------------------------------------------
 */

static void start_sim(void)
{
    char *args[] = {"--deployment-ready-delay", "100ms", "--bookmark-interval", "500ms", NULL};
    kop_test_scratch_kubesim(&fx, &sim, TOKEN, args);
    sim_running = true;
    json_decref(api("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                    kop_test_myresource_crd, 201));
    json_decref(
        api("POST", "/api/v1/namespaces", "{\"metadata\":{\"name\":\"" LEASE_NS "\"}}", 201));
}

static void start_node(struct node *n, const struct timing *t)
{
    struct kop_test_argv a;
    kop_test_kop_argv(&a, fx.kubeconfig);
    kop_test_argv_add(&a, "--controller-only", "--leader-elect", "--leader-election-namespace",
                      LEASE_NS, "--leader-election-lease-duration", t->lease,
                      "--leader-election-renew-deadline", t->renew,
                      "--leader-election-retry-period", t->retry, "--kube-api-qps", "200",
                      "--kube-api-burst", "400", "--shutdown-timeout", "10s", NULL);
    memset(n, 0, sizeof(*n));
    ck_assert_int_eq(kop_test_spawn(&n->proc, a.v), 0);
    n->running = true;
    char *line = NULL;
    ck_assert_msg(
        kop_test_wait_for(&n->proc, 0, "\"msg\":\"leader election enabled\"", 10000, &line) > 0,
        "kop did not enable leader election");
    kop_test_log_str(line, "identity", n->identity, sizeof(n->identity));
    free(line);
    n->metrics_port = kop_test_logged_port(&n->proc, "serving metrics", 10000);
}

/* Stop with sig; returns the wait status. */
static int stop_node(struct node *n, int sig)
{
    ck_assert(n->running);
    n->running = false;
    return kop_test_stop(&n->proc, sig, 15000);
}

static void setup(void)
{
    kop_test_scratch_init(&fx);
    memset(nodes, 0, sizeof(nodes));
    start_sim();
}

static void teardown(void)
{
    for (int i = 0; i < MAX_NODES; i++)
        if (nodes[i].running)
            stop_node(&nodes[i], SIGKILL);
    if (sim_running) {
        sim_running = false;
        kop_test_kubesim_stop(&sim, SIGTERM, 10000);
    }
    kop_test_scratch_free(&fx);
}

/* Wait until exactly one of the first count nodes reports master status 1
 * (the others 0); returns its index. */
static int wait_one_leader(int count, long timeout_ms)
{
    long end = kop_test_now_ms() + timeout_ms;
    for (;;) {
        int leader = -1, leaders = 0, followers = 0;
        for (int i = 0; i < count; i++) {
            double v = master_status(&nodes[i]);
            if (v == 1) {
                leader = i;
                leaders++;
            } else if (v == 0) {
                followers++;
            }
        }
        ck_assert_msg(leaders <= 1, "%d replicas report leading at once", leaders);
        if (leaders == 1 && followers == count - 1)
            return leader;
        ck_assert_msg(kop_test_now_ms() < end, "no single leader after %ld ms", timeout_ms);
        kop_test_sleep_ms(50);
    }
}

/* Start nodes 0 and 1 with t and wait until one of them leads; returns
 * its index. */
static int start_two(const struct timing *t)
{
    start_node(&nodes[0], t);
    start_node(&nodes[1], t);
    return wait_one_leader(2, 10000);
}

static void create_myr(const char *name, int replicas)
{
    char body[512];
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\",\"metadata\":{"
             "\"name\":\"%s\"},\"spec\":{\"replicas\":%d}}",
             name, replicas);
    json_decref(api("POST", MYR_PATH, body, 201));
}

/* The Deployment of name exists with replicas. */
static bool deployment_is(const char *name, int replicas)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", DEP_PATH, name);
    json_t *d = get(path);
    bool ok = d && json_integer_value(json_object_get(json_object_get(d, "spec"), "replicas")) ==
                       replicas;
    json_decref(d);
    return ok;
}

static bool wait_deployment(const char *name, int replicas, long timeout_ms)
{
    long end = kop_test_now_ms() + timeout_ms;
    while (!deployment_is(name, replicas)) {
        if (kop_test_now_ms() >= end)
            return false;
        kop_test_sleep_ms(50);
    }
    return true;
}

/* A MyResource name with one replica, reconciled by the leader. */
static void create_reconciled(const char *name)
{
    create_myr(name, 1);
    ck_assert(wait_deployment(name, 1, 15000));
}

/* ---- tests
 * ---------------------------------------------------------------------------------------- */

START_TEST(test_ha_exactly_one_leader_reconciles)
{
    int l = start_two(&fast);
    struct node *leader = &nodes[l], *follower = &nodes[1 - l];
    ck_assert_str_ne(leader->identity, follower->identity);
    char holder[400];
    ck_assert(lease_holder(holder, sizeof(holder), NULL));
    ck_assert_str_eq(holder, leader->identity);
    ck_assert_msg(kop_test_wait_for(&leader->proc, 0, "became leader, reconciling", 5000, NULL) > 0,
                  "the leader did not log its election");
    /* Its threads carry names (top -H, perf, gdb), at the process's niceness. */
    static const char *const threads[] = {"lease-elector", "lease-watchdog", "inf-myresources",
                                          "worker-0",      "wq-timer",       "resync",
                                          "event-sender",  "http-ticker"};
    for (size_t i = 0; i < sizeof(threads) / sizeof(threads[0]); i++)
        ck_assert_msg(kop_test_thread_nice(leader->proc.pid, threads[i]) ==
                          kop_test_thread_nice(leader->proc.pid, "kop"),
                      "no thread %s at kop's niceness", threads[i]);

    /* Settle: the follower may have raced to create the Lease; once it
     * has seen the leader's record it only reads and updates the Lease. */
    ck_assert_msg(kop_test_wait_for(&follower->proc, 0, "new leader elected", 10000, NULL) > 0,
                  "the follower did not see the leader");
    double f_writes = writes(follower);
    double l_rec = reconciles(leader);
    for (int i = 0; i < 5; i++) {
        char name[32];
        snprintf(name, sizeof(name), "one-%d", i);
        create_myr(name, 2);
    }
    for (int i = 0; i < 5; i++) {
        char name[32];
        snprintf(name, sizeof(name), "one-%d", i);
        ck_assert_msg(wait_deployment(name, 2, 15000), "%s not reconciled", name);
    }
    /* A change goes through the leader too. */
    json_decref(api("PATCH", MYR_PATH "/one-0", "{\"spec\":{\"replicas\":4}}", 200));
    ck_assert(wait_deployment("one-0", 4, 15000));
    kop_test_sleep_ms(500);

    ck_assert_msg(wait_reconciles(leader, l_rec + 6, 5000), "leader reconciled %g times",
                  reconciles(leader) - l_rec);
    ck_assert_msg(reconciles(follower) == 0, "the follower reconciled %g times",
                  reconciles(follower));
    ck_assert_msg(writes(follower) == f_writes, "the follower wrote %g times",
                  writes(follower) - f_writes);
    ck_assert(writes(leader) >= 10); /* 5 Deployments + 5 Services at least */
    ck_assert(master_status(leader) == 1);
    ck_assert(master_status(follower) == 0);
    /* The follower kept its informers: it knows the objects but leaves them. */
    ck_assert(!kop_test_logged(&follower->proc, "became leader"));
}
END_TEST

START_TEST(test_ha_leader_killed_follower_takes_over_after_expiry)
{
    int l = start_two(&mid);
    struct node *leader = &nodes[l], *follower = &nodes[1 - l];
    create_reconciled("before");
    json_int_t transitions0 = 0;
    char holder[400];
    ck_assert(lease_holder(holder, sizeof(holder), &transitions0));
    ck_assert_str_eq(holder, leader->identity);

    size_t from = kop_test_output_len(&follower->proc);
    long t0 = kop_test_now_ms();
    int st = stop_node(leader, SIGKILL);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    /* Nobody leads now: this one waits for the follower. */
    create_myr("after-crash", 3);

    long r = kop_test_wait_for(&follower->proc, from, "became leader, reconciling",
                               (int)(mid.lease_ms + 25000), NULL);
    long took = kop_test_now_ms() - t0;
    ck_assert_msg(r > 0, "the follower did not take over within %ld ms", mid.lease_ms + 25000);
    /* Not before the lease could expire: the follower dates the lease from
     * the last renewal it saw, at most one jittered poll (2.2 retry periods)
     * plus a renewal period before the kill. (No upper bound: a loaded
     * machine only makes the takeover later.) */
    ck_assert_msg(took >= mid.lease_ms - 4 * mid.retry_ms,
                  "took over after %ld ms: before the lease expired", took);
    ck_assert_msg(wait_deployment("after-crash", 3, 15000),
                  "the new leader did not reconcile the MyResource created meanwhile");
    ck_assert(wait_reconciles(follower, 1, 5000));
    ck_assert(master_status(follower) == 1);
    json_int_t transitions1 = 0;
    ck_assert(lease_holder(holder, sizeof(holder), &transitions1));
    ck_assert_str_eq(holder, follower->identity);
    ck_assert_int_eq(transitions1, transitions0 + 1);
}
END_TEST

START_TEST(test_ha_sigterm_releases_lease)
{
    const struct timing *t = &slow_expiry;
    int l = start_two(t);
    struct node *a = &nodes[l], *b = &nodes[1 - l];
    create_reconciled("handover");

    /* SIGTERM the leader: it exits 0 and the follower leads at its next
     * retry, long before the 30 s lease could expire (an unreleased lease
     * keeps the follower waiting for most of it after the exit). */
    size_t from = kop_test_output_len(&b->proc);
    int st = stop_node(a, SIGTERM);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "leader exit status %d", st);
    long r = kop_test_wait_for(&b->proc, from, "became leader, reconciling", (int)(t->lease_ms / 2),
                               NULL);
    ck_assert_msg(r > 0,
                  "no takeover within %ld ms of the leader's exit: the lease was not released",
                  t->lease_ms / 2);
    json_decref(api("PATCH", MYR_PATH "/handover", "{\"spec\":{\"replicas\":2}}", 200));
    ck_assert_msg(wait_deployment("handover", 2, 15000), "the new leader does not reconcile");

    /* The last replica releases the Lease on SIGTERM: nobody holds it. */
    st = stop_node(b, SIGTERM);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "second leader exit status %d", st);
    char holder[400];
    ck_assert(lease_holder(holder, sizeof(holder), NULL));
    ck_assert_msg(holder[0] == '\0', "lease still held by %s after a clean shutdown", holder);

    /* A restarted replica takes the free Lease at once (an unreleased one
     * would keep it waiting for the 30 s lease duration). */
    long t0 = kop_test_now_ms();
    start_node(&nodes[2], t);
    r = kop_test_wait_for(&nodes[2].proc, 0, "became leader, reconciling", (int)(t->lease_ms / 2),
                          NULL);
    long took = kop_test_now_ms() - t0;
    ck_assert_msg(r > 0, "the restarted replica did not lead within %ld ms of its start", took);
    ck_assert(lease_holder(holder, sizeof(holder), NULL));
    ck_assert_str_eq(holder, nodes[2].identity);
    json_decref(api("PATCH", MYR_PATH "/handover", "{\"spec\":{\"replicas\":3}}", 200));
    ck_assert(wait_deployment("handover", 3, 15000));
}
END_TEST

START_TEST(test_ha_lost_lease_stops_reconciling)
{
    int l = start_two(&lost);
    struct node *leader = &nodes[l], *follower = &nodes[1 - l];
    create_reconciled("steady");

    /* Every Lease update fails from now on (renewals, and the follower's
     * attempts to take over; kubesim filters faults by verb only, and kop
     * writes its children and status with patch and create, never update). */
    size_t from = kop_test_output_len(&leader->proc);
    long t0 = kop_test_now_ms();
    json_decref(api("POST", "/_kubesim/faults",
                    "{\"rules\":[{\"verb\":\"update\",\"code\":500,\"rate\":1}]}", 200));
    /* It stops at the renew deadline (2 s after its last renewal), before
     * the 6 s lease could expire for anyone else. */
    long r = kop_test_wait_for(&leader->proc, from, "lost the lease, reconciling stopped",
                               (int)lost.lease_ms, NULL);
    long took = kop_test_now_ms() - t0;
    ck_assert_msg(r > 0, "the leader kept leading without renewals for %ld ms", took);
    ck_assert_msg(took < lost.lease_ms,
                  "the leader stopped only after %ld ms, past the lease duration", took);
    ck_assert(master_status(leader) == 0);

    /* MyResources change; nobody may reconcile them now. */
    double rec_leader = reconciles(leader), rec_follower = reconciles(follower);
    json_decref(api("PATCH", MYR_PATH "/steady", "{\"spec\":{\"replicas\":5}}", 200));
    create_myr("orphan", 2);
    kop_test_sleep_ms(2000);
    ck_assert_msg(reconciles(leader) == rec_leader, "the deposed leader reconciled %g times",
                  reconciles(leader) - rec_leader);
    ck_assert_msg(reconciles(follower) == rec_follower, "the follower reconciled %g times",
                  reconciles(follower) - rec_follower);
    ck_assert(deployment_is("steady", 1));
    json_t *d = get(DEP_PATH "/orphan");
    ck_assert_ptr_null(d);
    ck_assert(master_status(follower) == 0);

    /* Updates work again: someone leads and catches up. */
    json_decref(api("POST", "/_kubesim/faults", "{\"rules\":[]}", 200));
    l = wait_one_leader(2, lost.lease_ms + 20000);
    ck_assert_msg(wait_deployment("orphan", 2, 15000), "orphan not reconciled after recovery");
    ck_assert(wait_deployment("steady", 5, 15000));
    ck_assert(wait_reconciles(&nodes[l],
                              (l == (int)(leader - nodes) ? rec_leader : rec_follower) + 1, 5000));
}
END_TEST

static Suite *ha_suite(void)
{
    Suite *s = suite_create("ha");
    TCase *tc = tcase_create("two-replicas");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, test_ha_exactly_one_leader_reconciles);
    tcase_add_test(tc, test_ha_leader_killed_follower_takes_over_after_expiry);
    tcase_add_test(tc, test_ha_sigterm_releases_lease);
    tcase_add_test(tc, test_ha_lost_lease_stops_reconciling);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(ha_suite());
}
