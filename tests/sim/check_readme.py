#!/usr/bin/env python3
"""sim/README.md documents every scenario key and every JSON output field.

Reads the sources, not a list kept by hand:
  - the key tables of sim/scenario.c (`static const keydef NAME[] = {{"key", fn}, ...}`),
    the option lists of the transports (mh_options in sim/mrp_host.c,
    roce_options and roce_pfc_options in sim/roce.c), and the value names
    (`static const char *const names[...] = {...}`) of sim/scenario.c and sim/sim.c;
  - every field that sim/report.c puts in a JSON object
    (`json_object_set[_new](obj, "field", ...)`) and the drop causes it
    writes by name (sim_drop_name).

Each key must appear in backquotes in the README section that describes its
table (a key of the events table under "### `events`", a collectives key
under "## Collectives"), each JSON field in backquotes in the section that
describes its object, each value name in backquotes anywhere. The reverse
too: every key in the first column of a README table headed "key" must be a
key the code parses in that section, so a key removed from the code cannot
stay documented.

Usage: check_readme.py SOURCE_ROOT        (exit 0 ok, 1 with a list of gaps)
"""
import re
import sys
from pathlib import Path

# keydef table (sim/scenario.c) or option list -> README heading of its section
KEY_SECTIONS = {
    'top_keys': '### Top level',
    'fabric_keys': '### `fabric`',
    'link_keys': '### `link`, `host_link`, `fabric_link`',
    'plane_keys': '### `planes` as a list',
    'cable_keys': '### `links`: per-cable overrides',
    'flow_keys': '### `flows`',
    'event_keys': '### `events`',
    'ts_keys': '### `timeseries`',
    'coll_keys': '## Collectives',
    'range_keys': '## Collectives',
    'pfc_keys': '## PFC and the `roce-pfc` baseline',
    'mh_options': '### `transport`',
    'roce_options': '### `transport`',
    'roce_pfc_options': '## PFC and the `roce-pfc` baseline',
}

# function of sim/report.c that fills a JSON object -> README section(s)
JSON_SECTIONS = {
    'sim_report_json': ['## Output'],
    'run_json': ['## Output'],
    'timeseries_json': ['## Output'],
    'drops_json': ['## Output'],
    'pfc_json': ['## PFC and the `roce-pfc` baseline'],
    'sim_report_coll_json': ['## Collectives'],
    'coll_run_json': ['## Collectives'],
}


def sections(readme):
    """heading line -> text up to the next heading of any level"""
    out, head, buf = {}, None, []
    for line in readme.splitlines():
        if re.match(r'#{1,6} ', line):
            if head is not None:
                out[head] = '\n'.join(buf)
            head, buf = line.strip(), []
        else:
            buf.append(line)
    if head is not None:
        out[head] = '\n'.join(buf)
    return out


def quoted_words(text):
    """every word inside a backquoted span (`runs[i].summary.pfc` gives runs, i, summary, pfc)"""
    words = set()
    for span in re.findall(r'`([^`\n]+)`', text):
        words.update(re.findall(r'[A-Za-z_][\w-]*', span))
    return words


def c_string_list(body):
    return re.findall(r'"([^"]*)"', body)


def key_tables(src):
    """keydef tables: name -> keys"""
    tabs = {}
    for m in re.finditer(r'static const keydef (\w+)\[\] = \{(.*?)\};', src, re.S):
        tabs[m.group(1)] = re.findall(r'\{"(\w+)",\s*\w+\}', m.group(2))
    return tabs


def option_lists(src, names):
    out = {}
    for n in names:
        m = re.search(r'static const char \*const ' + n + r'\[\] = \{(.*?)\};', src, re.S)
        if m:
            out[n] = c_string_list(m.group(1))
    return out


def value_names(src):
    vals = []
    for m in re.finditer(r'static const char \*const names\[[^\]]*\] = \{(.*?)\};', src, re.S):
        vals += c_string_list(m.group(1))
    return vals


def json_fields(src):
    """(function, field) for every json_object_set[_new] with a literal name"""
    out, fn = [], None
    for line in src.splitlines():
        m = re.match(r'^(?:static )?(?:const )?\w[\w\s\*]*?\b(\w+)\(', line)
        if m and not line.startswith(('\t', ' ')) and not line.rstrip().endswith(';'):
            fn = m.group(1)
        for f in re.findall(r'json_object_set(?:_new)?\(\s*\w+,\s*"(\w+)"', line):
            out.append((fn, f))
    return out


def table_first_cells(text):
    """backquoted keys in the first column of tables whose header's first cell is 'key'"""
    keys, in_key_table = [], False
    for line in text.splitlines():
        if not line.startswith('|'):
            in_key_table = False
            continue
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        if not in_key_table:
            in_key_table = cells[0] == 'key'
            continue
        if set(cells[0]) <= set('-: '):
            continue
        for tok in re.findall(r'`([^`]+)`', cells[0]):
            keys.append(tok.split('.')[-1])
    return keys


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    root = Path(sys.argv[1])
    readme = (root / 'sim' / 'README.md').read_text()
    secs = sections(readme)
    scen = (root / 'sim' / 'scenario.c').read_text()
    host = (root / 'sim' / 'mrp_host.c').read_text()
    roce = (root / 'sim' / 'roce.c').read_text()
    simc = (root / 'sim' / 'sim.c').read_text()
    report = (root / 'sim' / 'report.c').read_text()

    tables = key_tables(scen)
    tables.update(option_lists(host, ['mh_options']))
    tables.update(option_lists(roce, ['roce_options', 'roce_pfc_options']))
    # roce-pfc's own key is the one roce does not take (the rest are documented with roce)
    if 'roce_pfc_options' in tables and 'roce_options' in tables:
        tables['roce_pfc_options'] = [k for k in tables['roce_pfc_options']
                                      if k not in tables['roce_options']]
    gaps = []
    nkeys = 0

    for name, head in KEY_SECTIONS.items():
        if name not in tables or not tables[name]:
            gaps.append(f'the code has no key table {name} (update {Path(__file__).name})')
            continue
        if head not in secs:
            gaps.append(f'README has no section "{head}" (for {name})')
            continue
        words = quoted_words(secs[head])
        for k in tables[name]:
            nkeys += 1
            if k not in words:
                gaps.append(f'scenario key {k!r} ({name}) is not documented under "{head}"')
    for name in tables:
        if name not in KEY_SECTIONS:
            gaps.append(f'key table {name} has no README section in {Path(__file__).name}')

    # the reverse: every key in a README key table is parsed in that section
    by_head = {}
    for name, head in KEY_SECTIONS.items():
        by_head.setdefault(head, set()).update(tables.get(name, []))
    if 'roce_options' in tables:  # roce-pfc takes every roce option
        by_head['## PFC and the `roce-pfc` baseline'].update(tables['roce_options'])
    for head, known in by_head.items():
        for k in table_first_cells(secs.get(head, '')):
            if k not in known:
                gaps.append(f'README documents key {k!r} under "{head}", which the code does not parse')

    vals = value_names(scen) + value_names(simc)
    allwords = quoted_words(readme)
    for v in vals:
        if v not in allwords:
            gaps.append(f'value {v!r} is not documented')

    fields = json_fields(report)
    drop_names = re.search(r'sim_drop_name\(unsigned cause\)\s*\{.*?\{(.*?)\};', simc, re.S)
    if not drop_names:
        gaps.append('sim_drop_name not found in sim/sim.c')
    else:
        fields += [('drops_json', d) for d in c_string_list(drop_names.group(1))]
    for fn, f in fields:
        heads = JSON_SECTIONS.get(fn)
        if heads is None:
            gaps.append(f'report.c function {fn} writes JSON ({f!r}) but has no README section '
                        f'in {Path(__file__).name}')
            continue
        if not any(f in quoted_words(secs.get(h, '')) for h in heads):
            gaps.append(f'JSON field {f!r} ({fn}) is not documented under {" or ".join(heads)}')

    for g in gaps:
        print('FAIL:', g)
    print(f'# {nkeys} scenario keys in {len(tables)} tables, {len(vals)} value names, '
          f'{len(fields)} JSON fields checked against sim/README.md: {len(gaps)} gaps')
    return 1 if gaps else 0


if __name__ == '__main__':
    sys.exit(main())
