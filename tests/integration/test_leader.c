/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Leader election against a real kubesim process: several electors in this
 * process compete for one Lease through kop_client. Covers: exactly one
 * leader, the Lease fields as client-go writes them, release on clean stop
 * (the next candidate takes over at its next retry), a stop without
 * release (the others wait for the lease to expire), a renewal that fails
 * past the renew deadline (injected 500s: the leader stops at once,
 * before the lease expires for the others), a hung API server (injected
 * latency: the watchdog aborts the renewal at the deadline and stop()
 * still returns promptly), a retired elector (a leader renews on, a
 * follower takes no released Lease), and the leader_election_master_status
 * gauge.
 *
 * Time bounds are generous (seconds of slack over the configured periods)
 * and only check which side of the lease duration an event falls.
 */
#include "kop/leader.h"

#include <errno.h>
#include <regex.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "kop/client.h"
#include "kop/clock.h"
#include "kop/json.h"
#include "kop/kubeconfig.h"
#include "kop/metrics.h"
#include "kubetest.h"
#include "testutil.h"

#define TOKEN "kubesim-test-token"
#define NS "default"
#define MS KOP_NSEC_PER_MSEC

static struct kop_test_kubesim sim;
static struct kop_test_scratch scratch;
static struct kop_client *client;

static const struct kop_resource lease_res = {"coordination.k8s.io", "v1", "leases", true};

static void start_sim(void)
{
    kop_test_scratch_init(&scratch);
    kop_test_scratch_kubesim(&scratch, &sim, TOKEN, NULL);
    struct kop_kubeconfig cfg;
    ck_assert_int_eq(kop_kubeconfig_load_file(scratch.kubeconfig, NULL, &cfg), 0);
    struct kop_client_options co = {.config = &cfg};
    ck_assert_int_eq(kop_client_new(&co, &client), 0);
    kop_kubeconfig_cleanup(&cfg);
}

static void stop_sim(void)
{
    kop_client_free(client);
    client = NULL;
    int st = kop_test_kubesim_stop(&sim, SIGTERM, 15000);
    ck_assert_msg(st == 0, "kubesim exit status %d", st);
    kop_test_scratch_free(&scratch);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static void faults(const char *doc)
{
    json_t *body = json_loads(doc, 0, NULL);
    ck_assert_ptr_nonnull(body);
    struct kop_request rq = {.method = "POST", .path = "/_kubesim/faults", .body = body};
    json_t *ans = NULL;
    ck_assert_int_eq(kop_client_request(client, &rq, NULL, &ans), 0);
    json_decref(ans);
    json_decref(body);
}

static json_t *get_lease(const char *name)
{
    json_t *obj = NULL;
    int r = kop_client_get(client, &lease_res, NS, name, NULL, &obj);
    ck_assert_msg(r == 0, "GET lease %s: %d", name, r);
    return obj;
}

/* One elector and what its callbacks saw. */
struct cand {
    struct kop_leader *l;
    struct kop_metrics *m;
    atomic_int started, stopped, new_leader_calls;
    atomic_bool leader_at_stop; /* is_leader() inside on_stopped_leading */
    atomic_llong started_ns, stopped_ns;
    pthread_mutex_t lock;
    char last_new_leader[KOP_LEADER_HOLDER_MAX];
};

static void on_started(void *ud)
{
    struct cand *c = ud;
    atomic_store(&c->started_ns, kop_clock_now_ns());
    atomic_fetch_add(&c->started, 1);
}

static void on_stopped(void *ud)
{
    struct cand *c = ud;
    atomic_store(&c->leader_at_stop, kop_leader_is_leader(c->l));
    atomic_store(&c->stopped_ns, kop_clock_now_ns());
    atomic_fetch_add(&c->stopped, 1);
}

static void on_new_leader(void *ud, const char *id)
{
    struct cand *c = ud;
    pthread_mutex_lock(&c->lock);
    snprintf(c->last_new_leader, sizeof(c->last_new_leader), "%s", id);
    pthread_mutex_unlock(&c->lock);
    atomic_fetch_add(&c->new_leader_calls, 1);
}

static void cand_init_once(struct cand *c, const char *lease, const char *identity,
                           int64_t lease_ms, int64_t renew_ms, int64_t retry_ms, bool once)
{
    memset(c, 0, sizeof(*c));
    pthread_mutex_init(&c->lock, NULL);
    c->m = kop_metrics_new(false);
    ck_assert_ptr_nonnull(c->m);
    struct kop_leader_options o = {
        .client = client,
        .namespace = NS,
        .name = lease,
        .identity = identity,
        .lease_duration_ms = lease_ms,
        .renew_deadline_ms = renew_ms,
        .retry_period_ms = retry_ms,
        .once = once,
        .on_started_leading = on_started,
        .on_stopped_leading = on_stopped,
        .on_new_leader = on_new_leader,
        .ud = c,
        .metrics = c->m,
    };
    ck_assert_int_eq(kop_leader_new(&o, &c->l), 0);
    ck_assert_int_eq(kop_leader_start(c->l), 0);
    ck_assert_int_eq(kop_leader_start(c->l), -EALREADY);
}

static void cand_init(struct cand *c, const char *lease, const char *identity, int64_t lease_ms,
                      int64_t renew_ms, int64_t retry_ms)
{
    cand_init_once(c, lease, identity, lease_ms, renew_ms, retry_ms, false);
}

static void cand_free(struct cand *c)
{
    kop_leader_free(c->l);
    kop_metrics_free(c->m);
    pthread_mutex_destroy(&c->lock);
}

static double gauge(struct cand *c, const char *lease)
{
    static const char *const labels[] = {"name", NULL};
    struct kop_metric_family *f = kop_metrics_register(
        c->m, KOP_METRIC_GAUGE, "leader_election_master_status", "x", labels, NULL, 0);
    return kop_metric_value(kop_metric_child(f, lease));
}

/* Poll until one of the n candidates leads; returns it (or fails). */
static struct cand *wait_leader(struct cand **cs, size_t n, int timeout_ms)
{
    int64_t end = kop_clock_now_ns() + timeout_ms * MS;
    while (kop_clock_now_ns() < end) {
        for (size_t i = 0; i < n; i++)
            if (kop_leader_is_leader(cs[i]->l))
                return cs[i];
        sleep_ms(10);
    }
    ck_abort_msg("no leader within %d ms", timeout_ms);
    return NULL;
}

/* c alone: it leads within timeout_ms. */
static void wait_leads(struct cand *c, int timeout_ms)
{
    struct cand *cs[] = {c};
    ck_assert_ptr_eq(wait_leader(cs, 1, timeout_ms), c);
}

/* Candidates "cand-a" and "cand-b" for lease with these durations: a
 * leads within 10 s; b, started after that, still follows settle_ms later. */
static void leader_and_follower(struct cand *a, struct cand *b, const char *lease, int64_t lease_ms,
                                int64_t renew_ms, int64_t retry_ms, long settle_ms)
{
    cand_init(a, lease, "cand-a", lease_ms, renew_ms, retry_ms);
    wait_leads(a, 10000);
    cand_init(b, lease, "cand-b", lease_ms, renew_ms, retry_ms);
    sleep_ms(settle_ms);
    ck_assert(!kop_leader_is_leader(b->l));
}

/* Poll until c's stopped-leading callback has run, at the latest at
 * end_ns; it must have run exactly once. */
static void wait_stopped(struct cand *c, int64_t end_ns)
{
    while (atomic_load(&c->stopped) == 0 && kop_clock_now_ns() < end_ns)
        sleep_ms(10);
    ck_assert_int_eq(atomic_load(&c->stopped), 1);
}

/* The Lease name is held by holder ("" released) with this
 * leaseTransitions (-1: not checked). */
static void expect_lease(const char *name, const char *holder, int transitions)
{
    json_t *lease = get_lease(name);
    ck_assert_str_eq(kop_json_path_str(lease, "spec.holderIdentity"), holder);
    if (transitions >= 0)
        ck_assert_int_eq(json_integer_value(kop_json_path(lease, "spec.leaseTransitions")),
                         transitions);
    json_decref(lease);
}

static void assert_micro_time(const json_t *lease, const char *field)
{
    char path[64];
    snprintf(path, sizeof(path), "spec.%s", field);
    const char *s = kop_json_path_str(lease, path);
    ck_assert_msg(s != NULL, "%s missing", field);
    regex_t re;
    ck_assert_int_eq(regcomp(&re,
                             "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6}Z$",
                             REG_EXTENDED | REG_NOSUB),
                     0);
    ck_assert_msg(regexec(&re, s, 0, NULL, 0) == 0, "%s is %s", field, s);
    regfree(&re);
}

/* ---- tests ---------------------------------------------------------------- */

START_TEST(test_leader_exactly_one_and_lease_fields)
{
    struct cand a, b;
    cand_init(&a, "one", NULL, 6000, 4000, 200);
    cand_init(&b, "one", "cand-b", 6000, 4000, 200);
    struct cand *cs[] = {&a, &b};
    struct cand *lead = wait_leader(cs, 2, 10000);
    struct cand *other = lead == &a ? &b : &a;

    /* For a second (several retry periods) exactly one leads. */
    for (int i = 0; i < 50; i++) {
        ck_assert(kop_leader_is_leader(lead->l));
        ck_assert(!kop_leader_is_leader(other->l));
        sleep_ms(20);
    }
    ck_assert_int_eq(atomic_load(&lead->started), 1);
    ck_assert_int_eq(atomic_load(&other->started), 0);
    ck_assert_int_eq(atomic_load(&lead->stopped), 0);
    ck_assert(gauge(lead, "one") == 1);
    ck_assert(gauge(other, "one") == 0);

    const char *lid = kop_leader_identity(lead->l);
    char buf[KOP_LEADER_HOLDER_MAX];
    ck_assert_int_eq(kop_leader_leader(other->l, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, lid);
    pthread_mutex_lock(&other->lock);
    ck_assert_str_eq(other->last_new_leader, lid);
    pthread_mutex_unlock(&other->lock);
    ck_assert_int_ge(atomic_load(&other->new_leader_calls), 1);
    /* The default identity is <host>_<uuid>. */
    ck_assert_ptr_nonnull(strchr(kop_leader_identity(a.l), '_'));

    /* The Lease as client-go writes it. */
    json_t *l1 = get_lease("one");
    ck_assert_str_eq(kop_json_path_str(l1, "spec.holderIdentity"), lid);
    ck_assert_int_eq(json_integer_value(kop_json_path(l1, "spec.leaseDurationSeconds")), 6);
    ck_assert(json_is_integer(kop_json_path(l1, "spec.leaseTransitions")));
    ck_assert_int_eq(json_integer_value(kop_json_path(l1, "spec.leaseTransitions")), 0);
    assert_micro_time(l1, "acquireTime");
    assert_micro_time(l1, "renewTime");
    /* Renewals (every 200 ms) move renewTime, never acquireTime. */
    json_t *l2 = NULL;
    for (int64_t end = kop_clock_now_ns() + 10000 * MS;;) {
        sleep_ms(100);
        l2 = get_lease("one");
        if (strcmp(kop_json_path_str(l2, "spec.renewTime"),
                   kop_json_path_str(l1, "spec.renewTime")) != 0 ||
            kop_clock_now_ns() >= end)
            break;
        json_decref(l2);
    }
    ck_assert_str_eq(kop_json_path_str(l2, "spec.holderIdentity"), lid);
    ck_assert_str_eq(kop_json_path_str(l2, "spec.acquireTime"),
                     kop_json_path_str(l1, "spec.acquireTime"));
    ck_assert_str_ne(kop_json_path_str(l2, "spec.renewTime"),
                     kop_json_path_str(l1, "spec.renewTime"));
    ck_assert_str_ne(kop_json_path_str(l2, "metadata.resourceVersion"),
                     kop_json_path_str(l1, "metadata.resourceVersion"));
    json_decref(l1);
    json_decref(l2);

    ck_assert_int_eq(kop_leader_stop(other->l, true), 0);
    ck_assert_int_eq(atomic_load(&other->stopped), 0); /* never led */
    ck_assert_int_eq(kop_leader_stop(lead->l, true), 0);
    ck_assert_int_eq(atomic_load(&lead->stopped), 1);
    ck_assert(!atomic_load(&lead->leader_at_stop));
    ck_assert(gauge(lead, "one") == 0);
    cand_free(&a);
    cand_free(&b);
}
END_TEST

START_TEST(test_leader_release_hands_over)
{
    /* A long lease, so a take-over before it expires can only come from
     * the release. */
    struct cand a, b, c;
    cand_init(&a, "rel", "cand-a", 30000, 20000, 200);
    wait_leads(&a, 10000);
    ck_assert_int_eq(kop_leader_stop(a.l, true), 0);
    ck_assert_int_eq(atomic_load(&a.stopped), 1);
    ck_assert(!kop_leader_is_leader(a.l));
    /* ReleaseOnCancel: holder "", leaseDurationSeconds 1, count kept. */
    json_t *lease = get_lease("rel");
    ck_assert_str_eq(kop_json_path_str(lease, "spec.holderIdentity"), "");
    ck_assert_int_eq(json_integer_value(kop_json_path(lease, "spec.leaseDurationSeconds")), 1);
    ck_assert_int_eq(json_integer_value(kop_json_path(lease, "spec.leaseTransitions")), 0);
    assert_micro_time(lease, "renewTime");
    json_decref(lease);

    /* A released lease is taken at the first try. */
    cand_init(&b, "rel", "cand-b", 30000, 20000, 200);
    wait_leads(&b, 15000);
    lease = get_lease("rel");
    ck_assert_str_eq(kop_json_path_str(lease, "spec.holderIdentity"), "cand-b");
    ck_assert_int_eq(json_integer_value(kop_json_path(lease, "spec.leaseTransitions")), 1);
    ck_assert_int_eq(json_integer_value(kop_json_path(lease, "spec.leaseDurationSeconds")), 30);
    json_decref(lease);

    /* Leader to waiting candidate: c waits, then takes over soon after b's
     * release, well before the 30 s lease would expire. */
    cand_init(&c, "rel", "cand-c", 30000, 20000, 200);
    sleep_ms(500);
    ck_assert(!kop_leader_is_leader(c.l));
    int64_t t0 = kop_clock_now_ns();
    ck_assert_int_eq(kop_leader_stop(b.l, true), 0);
    wait_leads(&c, 15000);
    ck_assert_int_lt(kop_clock_now_ns() - t0, 15000 * MS);
    expect_lease("rel", "cand-c", 2);
    pthread_mutex_lock(&c.lock);
    ck_assert_str_eq(c.last_new_leader, "cand-c");
    pthread_mutex_unlock(&c.lock);
    ck_assert_int_ge(atomic_load(&c.new_leader_calls), 2); /* cand-b ("" maybe), cand-c */

    cand_free(&c);
    /* Freed without release: the Lease still names c. */
    expect_lease("rel", "cand-c", -1);
    ck_assert_int_eq(atomic_load(&c.stopped), 1);
    cand_free(&a);
    cand_free(&b);
}
END_TEST

/* Release with a stale cache: another write (a renewal a stop cut short
 * that the server applied anyway, or here an annotation) moved the Lease's
 * resourceVersion since the leader last saw it. The release's PUT gets a
 * 409; the leader reads the Lease once more and, still its holder,
 * releases it (it failed with -EBUSY, and the next leader waited for the
 * lease to expire). */
START_TEST(test_leader_release_after_a_foreign_write)
{
    struct cand a;
    cand_init(&a, "stale", "cand-a", 30000, 20000, 5000); /* no renewal for 5 s */
    wait_leads(&a, 10000);
    json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "annotations", "note", "y");
    struct kop_api_status st;
    memset(&st, 0, sizeof(st));
    ck_assert_int_eq(kop_client_patch(client, &lease_res, NS, "stale", patch, &st, NULL), 0);
    json_decref(patch);
    ck_assert_int_eq(kop_leader_stop(a.l, true), 0);
    json_t *lease = get_lease("stale");
    ck_assert_str_eq(kop_json_path_str(lease, "spec.holderIdentity"), "");
    ck_assert_int_eq(json_integer_value(kop_json_path(lease, "spec.leaseDurationSeconds")), 1);
    ck_assert_str_eq(kop_json_path_str(lease, "metadata.annotations.note"), "y");
    json_decref(lease);
    cand_free(&a);
}
END_TEST

START_TEST(test_leader_crash_waits_for_expiry)
{
    struct cand a, b;
    leader_and_follower(&a, &b, "crash", 6000, 4000, 300, 400);

    int64_t t0 = kop_clock_now_ns();
    ck_assert_int_eq(kop_leader_stop(a.l, false), 0);
    expect_lease("crash", "cand-a", -1);
    wait_leads(&b, 20000);
    /* is_leader turns true before the started-leading callback has run */
    for (int i = 0; i < 200 && atomic_load(&b.started_ns) == 0; i++)
        sleep_ms(10);
    ck_assert_int_ne(atomic_load(&b.started_ns), 0);
    int64_t waited = atomic_load(&b.started_ns) - t0;
    /* a's last renewal started at most one retry period before the stop,
     * so b cannot lead earlier than ~5.7 s after it (the long lease and
     * renew deadline keep a leading on a slow, sanitized run; slack 1.2 s). */
    ck_assert_msg(waited >= 4500 * MS, "took over after %lld ms", (long long)(waited / MS));
    expect_lease("crash", "cand-b", 1);
    cand_free(&a);
    cand_free(&b);
}
END_TEST

START_TEST(test_leader_lost_renewal_stops_at_once)
{
    struct cand a, b;
    cand_init(&a, "lost", "cand-a", 8000, 1000, 200);
    wait_leads(&a, 10000);
    cand_init(&b, "lost", "cand-b", 8000, 1000, 200);
    sleep_ms(300);
    ck_assert(gauge(&a, "lost") == 1);

    int64_t t0 = kop_clock_now_ns();
    faults("{\"rules\":[{\"verb\":\"update\",\"code\":500}]}");
    wait_stopped(&a, t0 + 15000 * MS);
    ck_assert(!atomic_load(&a.leader_at_stop));
    ck_assert(!kop_leader_is_leader(a.l));
    ck_assert(gauge(&a, "lost") == 0);
    /* Stopped about the renew deadline (1 s) after the last renewal: well
     * before the 8 s lease could expire for anyone else. */
    int64_t took = atomic_load(&a.stopped_ns) - t0;
    ck_assert_msg(took < 7000 * MS, "stopped leading after %lld ms", (long long)(took / MS));
    ck_assert_int_eq(atomic_load(&b.started), 0);

    /* Service restored: someone leads again, and only one. */
    faults("{\"rules\":[]}");
    struct cand *cs[] = {&a, &b};
    struct cand *lead = wait_leader(cs, 2, 10000);
    sleep_ms(300);
    ck_assert(kop_leader_is_leader(lead->l));
    ck_assert(!kop_leader_is_leader((lead == &a ? &b : &a)->l));
    cand_free(&a);
    cand_free(&b);
}
END_TEST

START_TEST(test_leader_hung_server_aborted_at_deadline)
{
    struct cand a;
    cand_init(&a, "hung", "cand-a", 8000, 1000, 200);
    wait_leads(&a, 10000);

    /* Every API request now takes 5 s. */
    int64_t t0 = kop_clock_now_ns();
    faults("{\"latencyMs\":5000}");
    wait_stopped(&a, t0 + 15000 * MS);
    /* At the 1 s renew deadline, not when the 5 s renewal comes back. */
    int64_t took = atomic_load(&a.stopped_ns) - t0;
    ck_assert_msg(took < 4000 * MS, "stopped leading after %lld ms", (long long)(took / MS));

    /* stop() aborts the hung request instead of waiting for it. */
    sleep_ms(300);
    int64_t s0 = kop_clock_now_ns();
    ck_assert_int_eq(kop_leader_stop(a.l, true), 0);
    ck_assert_int_lt(kop_clock_now_ns() - s0, 3500 * MS);
    faults("{\"latencyMs\":0}");
    cand_free(&a);
}
END_TEST

START_TEST(test_leader_once_stops_competing)
{
    struct cand a;
    cand_init_once(&a, "once", "cand-a", 4000, 1000, 200, true);
    wait_leads(&a, 10000);
    faults("{\"rules\":[{\"verb\":\"update\",\"code\":500}]}");
    wait_stopped(&a, kop_clock_now_ns() + 15000 * MS);
    faults("{\"rules\":[]}");
    /* A normal elector would renew its own record at once; this one quit. */
    sleep_ms(800);
    ck_assert(!kop_leader_is_leader(a.l));
    ck_assert_int_eq(atomic_load(&a.started), 1);
    ck_assert_int_eq(kop_leader_stop(a.l, true), 0);
    ck_assert_int_eq(atomic_load(&a.stopped), 1);
    expect_lease("once", "cand-a", -1); /* not released */
    cand_free(&a);
}
END_TEST

/* kop_leader_retire: a retired follower leaves a released Lease alone; a
 * retired leader keeps renewing until it is stopped, then releases. */
START_TEST(test_leader_retired_does_not_acquire)
{
    struct cand a, b;
    leader_and_follower(&a, &b, "retire", 30000, 20000, 200, 500);

    /* The leader retires: it still leads and renews. */
    kop_leader_retire(a.l);
    json_t *lease = get_lease("retire");
    char *renew1 = strdup(kop_json_path_str(lease, "spec.renewTime"));
    json_decref(lease);
    sleep_ms(1000);
    ck_assert(kop_leader_is_leader(a.l));
    lease = get_lease("retire");
    ck_assert_str_eq(kop_json_path_str(lease, "spec.holderIdentity"), "cand-a");
    ck_assert_str_ne(kop_json_path_str(lease, "spec.renewTime"), renew1);
    json_decref(lease);
    free(renew1);

    /* The follower retires, then the leader releases: the Lease stays
     * free for many of the follower's retry periods (200-440 ms). */
    kop_leader_retire(b.l);
    kop_leader_retire(b.l); /* idempotent */
    ck_assert_int_eq(kop_leader_stop(a.l, true), 0);
    sleep_ms(2500);
    ck_assert(!kop_leader_is_leader(b.l));
    ck_assert_int_eq(atomic_load(&b.started), 0);
    expect_lease("retire", "", -1);
    kop_leader_retire(NULL);
    cand_free(&a);
    cand_free(&b);
}
END_TEST

static Suite *leader_suite(void)
{
    Suite *s = suite_create("integration_leader");
    TCase *tc = tcase_create("kubesim");
    tcase_add_checked_fixture(tc, start_sim, stop_sim);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_leader_exactly_one_and_lease_fields);
    tcase_add_test(tc, test_leader_release_hands_over);
    tcase_add_test(tc, test_leader_release_after_a_foreign_write);
    tcase_add_test(tc, test_leader_crash_waits_for_expiry);
    tcase_add_test(tc, test_leader_lost_renewal_stops_at_once);
    tcase_add_test(tc, test_leader_hung_server_aborted_at_deadline);
    tcase_add_test(tc, test_leader_once_stops_competing);
    tcase_add_test(tc, test_leader_retired_does_not_acquire);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(leader_suite());
}
