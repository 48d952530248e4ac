// SPDX-License-Identifier: Apache-2.0
//
// kop's Grafana dashboard (manifests/components/monitoring/kop-dashboard.json)
// asks only for metrics kop exports:
//
//   node dashboard.js DASHBOARD.json METRICS.txt
//
// METRICS.txt is a scrape of kop's /metrics (Prometheus text format); the
// exported names are its "# TYPE" lines. Every metric name in a panel's or
// a variable's PromQL (a histogram's _bucket/_sum/_count as its family) must
// be one of them, and the panels must cover the webhooks, the reconciler,
// the work queue, the cache, the leader and the certificate. Prints
// PASS/FAIL lines.
'use strict';
const fs = require('fs');

let failures = 0;
function check(name, ok, why) {
    if (ok) console.log(`PASS ${name}`);
    else {
        failures++;
        console.log(`FAIL ${name}${why ? ': ' + why : ''}`);
    }
}

const [, , dashFile, metricsFile] = process.argv;
let dash;
try {
    dash = JSON.parse(fs.readFileSync(dashFile, 'utf8'));
} catch (e) {
    check('dashboard is JSON', false, e.message);
    process.exit(1);
}
check('dashboard is JSON with a title and a uid', !!(dash.title && dash.uid));
const exported = new Set(
    fs.readFileSync(metricsFile, 'utf8').split('\n')
        .filter((l) => l.startsWith('# TYPE '))
        .map((l) => l.split(' ')[2]),
);
check('kop exports metrics', exported.size > 10, `${exported.size} families`);

// PromQL words that are not metric names.
const words = new Set(['sum', 'min', 'max', 'avg', 'count', 'stddev', 'stdvar', 'topk', 'bottomk', 'quantile',
    'rate', 'irate', 'increase', 'delta', 'deriv', 'histogram_quantile', 'time', 'by', 'without', 'on',
    'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'offset', 'bool', 'abs', 'clamp_min',
    'clamp_max', 'label_values', 'vector', 'scalar', 'absent', 'changes', 'resets', 'max_over_time',
    'min_over_time', 'avg_over_time', 'sum_over_time', 'last_over_time', 'inf', 'nan']);
function metricNames(expr) {
    const e = expr
        .replace(/"(?:[^"\\]|\\.)*"/g, '""') // strings
        .replace(/\{[^}]*\}/g, '') // label matchers
        .replace(/\[[^\]]*\]/g, '') // ranges
        .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '') // label lists
        .replace(/\blabel_values\(([^,()]*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)/g, '$1'); // Grafana's label_values(m, label)
    return (e.match(/[A-Za-z_:][A-Za-z0-9_:]*/g) || []).filter((w) => !words.has(w) && !w.startsWith('$'));
}
const family = (n) => (exported.has(n) ? n : n.replace(/_(bucket|sum|count)$/, ''));

const exprs = [];
function walk(panels) {
    for (const p of panels || []) {
        for (const t of p.targets || []) exprs.push({where: `panel "${p.title}"`, expr: t.expr});
        walk(p.panels);
    }
}
walk(dash.panels);
for (const v of ((dash.templating || {}).list || [])) {
    const q = typeof v.query === 'object' && v.query ? v.query.query : v.query;
    if (v.type === 'query' && q) exprs.push({where: `variable $${v.name}`, expr: q});
}
check('dashboard has queries', exprs.length > 0);
const used = new Set();
for (const {where, expr} of exprs) {
    const names = metricNames(String(expr));
    const unknown = names.filter((n) => !exported.has(family(n)));
    names.forEach((n) => used.add(family(n)));
    check(`${where}: ${names.map(family).join(', ') || '(no metric)'}`, names.length > 0 && unknown.length === 0,
        unknown.length ? `not exported by kop: ${unknown.join(', ')}` : 'no metric name');
}
const topics = {
    'webhook rate and errors': 'controller_runtime_webhook_requests_total',
    'webhook latency': 'controller_runtime_webhook_latency_seconds',
    'reconcile rate': 'controller_runtime_reconcile_total',
    'reconcile errors': 'controller_runtime_reconcile_errors_total',
    'reconcile latency': 'controller_runtime_reconcile_time_seconds',
    'work queue depth': 'workqueue_depth',
    'store size': 'kop_store_objects',
    'leader status': 'leader_election_master_status',
    'certificate expiry': 'kop_serving_cert_expiry_seconds',
};
for (const [topic, metric] of Object.entries(topics)) check(`dashboard covers ${topic} (${metric})`, used.has(metric));
process.exit(failures ? 1 : 0);
