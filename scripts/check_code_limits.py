#!/usr/bin/env python3
"""The code-size limits (issue 27): no C++ function longer than --max-lines (150), counted from its
signature's first line to its closing brace (every body opened at namespace or class scope; lambdas
inside count to their function), and no file longer than --max-file-lines (900), over the library,
the bindings and the binaries (examples too; tests are not held to it). Known debts are listed in scripts/code_limits_debts.txt
("path" for a file, "path:function" for a function), one per line: a listed debt is allowed, a debt
that is no longer one must be removed from the list, and anything else over a limit fails.
Exit status 1 on a failure, with one line per finding."""
import argparse
import os
import re
import sys

def strip(text):
    # comments and string/char literals out, newlines kept
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            i = n if j < 0 else j
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append('\n' * text.count('\n', i, j))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            if m:
                end = text.find(')' + m.group(1) + '"', i)
                end = n if end < 0 else end + len(m.group(1)) + 2
                out.append('""' + '\n' * text.count('\n', i, end))
                i = end
            else:
                out.append(c); i += 1
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return ''.join(out)

def functions(path):
    text = strip(open(path, encoding='utf-8', errors='replace').read())
    stack = []  # kinds of open braces: 'scope' (namespace/class/extern) or 'func' or 'other'
    results = []
    line = 1
    last_stmt_start = 0
    for i, c in enumerate(text):
        if c == '\n':
            line += 1
        elif c == '{':
            head = text[last_stmt_start:i]
            in_scope = all(k == 'scope' for k in stack)
            h = ' '.join(head.split())
            if re.search(r'\b(namespace|class|struct|union|enum)\b[^()]*$', h) or re.search(r'extern\s*""\s*$', h):
                stack.append('scope')
            elif in_scope and re.search(r'\)\s*(const|override|final|noexcept(\([^)]*\))?|->\s*[\w:<>,\s\*&]+|mutable|\s)*$', h) \
                    and not re.search(r'^\s*(if|for|while|switch|catch)\b', h) and '=' not in h.split('(')[0]:
                start = line - head.count('\n') + (len(head) - len(head.lstrip('\n'))) * 0
                # first non-blank line of the head
                lead = len(head) - len(head.lstrip())
                start = line - head[lead:].count('\n')
                name = re.findall(r'([~\w:]+(?:<[^()]*>)?)\s*\(', h)
                stack.append(('func', start, name[0] if name else '?'))
            else:
                stack.append('other')
            last_stmt_start = i + 1
        elif c == '}':
            if stack:
                k = stack.pop()
                if isinstance(k, tuple):
                    results.append((k[2], k[1], line, line - k[1] + 1))
            last_stmt_start = i + 1
        elif c == ';':
            last_stmt_start = i + 1
        elif c == ':' and all(k == 'scope' for k in stack) and re.search(r'\b(public|private|protected)\s*$', text[last_stmt_start:i]):
            last_stmt_start = i + 1
        elif c == '#' and (i == 0 or text[i - 1] == '\n'):
            pass
    return results

ROOTS = ['core', 'memory', 'autograd', 'ops', 'sim', 'models', 'embeddings', 'dist', 'python/src', 'bench', 'examples']
HERE = os.path.dirname(os.path.abspath(__file__))


def findings(repo, roots, max_lines, max_file_lines):
    """{debt key: message} of everything over a limit."""
    out = {}
    for root in roots:
        for d, dirs, files in os.walk(os.path.join(repo, root)):
            dirs[:] = sorted(x for x in dirs if not x.startswith(('build', '.')))
            for f in sorted(files):
                if not f.endswith(('.cpp', '.h', '.cc', '.hpp')):
                    continue
                p = os.path.join(d, f)
                rel = os.path.relpath(p, repo)
                with open(p, encoding='utf-8', errors='replace') as fh:
                    n_lines = sum(1 for _ in fh)
                if n_lines > max_file_lines:
                    out[rel] = f'{rel}: {n_lines} lines (budget {max_file_lines})'
                for name, start, _, n in functions(p):
                    if n > max_lines:
                        out[f'{rel}:{name}'] = f'{rel}:{start}: {name} is {n} lines (budget {max_lines})'
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--repo', default=os.path.dirname(HERE))
    ap.add_argument('--max-lines', type=int, default=150)
    ap.add_argument('--max-file-lines', type=int, default=900)
    ap.add_argument('--debts', default=os.path.join(HERE, 'code_limits_debts.txt'))
    ap.add_argument('--list', action='store_true', help='print every finding, debts included, and exit 0')
    a = ap.parse_args()
    found = findings(a.repo, ROOTS, a.max_lines, a.max_file_lines)
    if a.list:
        for k in sorted(found):
            print(found[k])
        return 0
    debts = set()
    if os.path.exists(a.debts):
        with open(a.debts) as fh:
            debts = {l.strip() for l in fh if l.strip() and not l.startswith('#')}
    failed = False
    for k in sorted(found):
        if k not in debts:
            print(f'over the limit: {found[k]}')
            failed = True
    for k in sorted(debts - set(found)):
        print(f'paid off, remove it from {os.path.relpath(a.debts, a.repo)}: {k}')
        failed = True
    if not failed:
        print(f'code limits: {len(found)} known debt(s), nothing new over the limits')
    return 1 if failed else 0

if __name__ == '__main__':
    sys.exit(main())
