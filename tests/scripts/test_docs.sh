#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The docs suite (docs/testing.md §3.7): every relative link in README.md
# and docs/*.md resolves: the file or folder exists, and an #anchor names a
# heading of the target page as GitHub renders it (lowercase, spaces to
# '-', punctuation other than '-' and '_' dropped, a repeated heading gets
# -1, -2, ...). Links inside code are not links. And the one module list
# (docs/architecture.md §2.1) names every src/<layer>/<module>.c, and the
# README's picture is its source, docs/architecture.txt, unchanged.
# A FAIL line for each broken link or missing module; the last line is
# "N passed, M failed" (N: links and modules that hold).
set -uo pipefail
root=${KOP_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root" || exit 1

command -v python3 >/dev/null || {
  echo "docs: python3 is missing (scripts/install-deps.sh installs it)"
  echo "0 passed, 1 failed"
  exit 1
}

python3 - README.md docs/*.md <<'EOF'
import os, re, sys, glob

FENCE = re.compile(r'^\s*(```|~~~)')
HEADING = re.compile(r'^(#{1,6})\s+(.*?)\s*#*\s*$')
LINK = re.compile(r'!?\[([^\]]*)\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
HTML_ID = re.compile(r'<a\s+(?:name|id)="([^"]+)"', re.I)
SCHEME = re.compile(r'^[a-zA-Z][a-zA-Z0-9+.-]*:')

def prose(text):
    """The text without fenced code blocks; inline code spans blanked."""
    out, fenced = [], False
    for line in text.split('\n'):
        if FENCE.match(line):
            fenced = not fenced
            out.append('')
            continue
        out.append('' if fenced else line)
    s = '\n'.join(out)
    return re.sub(r'(`+)(?:(?!\1).)+?\1', lambda m: ' ' * len(m.group(0)), s, flags=re.S)

def slug(title):
    t = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', title)  # links: their text
    t = re.sub(r'<[^>]+>', '', t)                          # inline HTML
    t = t.replace('`', '').lower()
    t = ''.join(c for c in t if c.isalnum() or c in '-_ ')
    return t.replace(' ', '-')

anchors_cache = {}
def anchors(path):
    if path not in anchors_cache:
        seen, result, fenced = {}, set(), False
        with open(path, encoding='utf-8') as f:
            for line in f:
                if FENCE.match(line):
                    fenced = not fenced
                    continue
                if fenced:
                    continue
                for a in HTML_ID.findall(line):
                    result.add(a)
                m = HEADING.match(line.rstrip('\n'))
                if not m:
                    continue
                base = slug(m.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                result.add(base if n == 0 else '%s-%d' % (base, n))
        anchors_cache[path] = result
    return anchors_cache[path]

passed = failed = 0
for page in sys.argv[1:]:
    with open(page, encoding='utf-8') as f:
        text = prose(f.read())
    ok = bad = 0
    for m in LINK.finditer(text):
        target = m.group(2)
        if SCHEME.match(target):
            continue  # not a relative link
        line = text.count('\n', 0, m.start()) + 1
        path, _, anchor = target.partition('#')
        dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        why = None
        if not os.path.exists(dest):
            why = 'no such file %s' % dest
        elif anchor and not (dest.endswith('.md') and os.path.isfile(dest)):
            why = '#%s points into %s, which has no headings' % (anchor, dest)
        elif anchor and anchor not in anchors(dest):
            why = 'no heading #%s in %s' % (anchor, dest)
        if why:
            bad += 1
            print('FAIL %s:%d: (%s): %s' % (page, line, target, why))
        else:
            ok += 1
    if bad == 0:
        print('PASS %s: %d relative links resolve' % (page, ok))
    passed += ok
    failed += bad

# The one module list: each src/<layer>/<module>.c in its layer's row.
rows = {}
with open('docs/architecture.md', encoding='utf-8') as f:
    for line in f:
        m = re.match(r'^\|\s*`src/(\w+)`\s*\|\s*([^|]*)\|', line)
        if m:
            rows[m.group(1)] = {x.strip() for x in m.group(2).split(',') if x.strip()}
mods = sorted(glob.glob('src/*/*.c'))
missing = 0
for c in mods:
    layer, mod = c.split('/')[1], os.path.basename(c)[:-2]
    if mod in rows.get(layer, set()):
        passed += 1
    else:
        missing += 1
        print('FAIL %s is not in the src/%s row of docs/architecture.md §2.1' % (c, layer))
if missing == 0:
    print('PASS docs/architecture.md §2.1 names all %d modules under src/' % len(mods))
failed += missing

# The picture in the README is docs/architecture.txt, its source, as it is.
with open('docs/architecture.txt', encoding='utf-8') as f:
    picture = f.read()
with open('README.md', encoding='utf-8') as f:
    readme = f.read()
if '```\n' + picture + '```\n' in readme:
    passed += 1
    print('PASS README.md shows docs/architecture.txt as it is')
else:
    failed += 1
    print('FAIL README.md does not show docs/architecture.txt as it is (copy it into the code block)')

print('%d passed, %d failed' % (passed, failed))
sys.exit(1 if failed else 0)
EOF
