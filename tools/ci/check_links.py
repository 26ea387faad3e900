#!/usr/bin/env python3
"""Checks every relative link and #anchor in the given markdown files: the file must exist and the
anchor must be a heading of it (slugged as GitHub does). Exits 1 when one does not resolve.

    python3 tools/ci/check_links.py $(git ls-files '*.md')
"""
import os, re, sys

def slugs(path):
    out, seen, fence = set(), {}, False
    for line in open(path, encoding='utf-8'):
        if line.startswith('```'):
            fence = not fence
            continue
        m = None if fence else re.match(r'^(#{1,6})\s+(.*?)\s*#*\s*$', line)
        if not m:
            continue
        text = re.sub(r'`([^`]*)`', r'\1', m.group(2))
        text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', text)
        slug = re.sub(r'[^\w\- ]', '', text.lower()).replace(' ', '-')
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f'{slug}-{n}')
    return out

def links(path):
    fence = False
    for no, line in enumerate(open(path, encoding='utf-8'), 1):
        if line.startswith('```'):
            fence = not fence
            continue
        if fence:
            continue
        line = re.sub(r'`[^`]*`', '', line)
        for m in re.finditer(r'!?\[[^\]]*\]\(([^)\s]+)\)', line):
            yield no, m.group(1)

bad = 0
for md in sys.argv[1:]:
    for no, target in links(md):
        if re.match(r'^[a-z]+:', target):
            continue
        file, _, anchor = target.partition('#')
        dest = os.path.normpath(os.path.join(os.path.dirname(md), file)) if file else md
        if not os.path.exists(dest):
            print(f'{md}:{no}: {target}: {dest} does not exist'); bad += 1
        elif anchor:
            if not dest.endswith('.md'):
                print(f'{md}:{no}: {target}: anchor into a non-markdown file'); bad += 1
            elif anchor not in slugs(dest):
                print(f'{md}:{no}: {target}: no heading #{anchor} in {dest}'); bad += 1
print(f'{bad} broken link(s)')
sys.exit(1 if bad else 0)
