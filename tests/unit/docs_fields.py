#!/usr/bin/env python3
"""docs_fields.py — docs/ against the code: the keys each documented format names are
exactly the keys the code reads or writes, the options each program's docs/cli.md table
lists are exactly the options it parses, the exit statuses docs/cli.md tabulates are
exactly the statuses the code can end with, the variables docs/environment.md's
"environment" table lists are exactly the PPDL_* names src/ reads with getenv, and the
test hooks docs/testing.md's "test hooks" table lists are exactly those src/ reads.

usage: docs_fields.py [--root DIR] [--where]
       docs_fields.py --root COPY --plant doc|code SECTION
  --root DIR   the tree to check (default: this file's ../..); the test runs it on a
               scratch copy with planted mistakes too (tests/unit/docs_fields.sh)
  --where      print every key found in the code as "FORMAT<TAB>KEY<TAB>FILE:LINE" and
               every documented key as "FORMAT<TAB>KEY<TAB>docs/FILE:LINE", then check
  --plant doc SECTION    (on a copy) delete the table row that alone documents one of
               SECTION's keys; prints "KEY<TAB>docs/FILE" (the check must then name them)
  --plant code SECTION   (on a copy) rename one of SECTION's keys to KEY_planted (a
               status N to N+1000) everywhere the code reads or writes it; prints
               "KEY<TAB>NEW<TAB>FILE"

Exit status 0 when everything agrees; 1 with one line per disagreement naming the key,
the format and the file (the doc that names it, or the source that reads or writes it).

THE DOCUMENTED SIDE. A docs/*.md file marks a format's section with a comment line
    <!-- fields: NAME -->
and the section runs to the next such line (or <!-- /fields -->). Every backticked token
in the FIRST cell of a table row of the section is a documented key. A token is split
on "/" (HDF5 paths: `/train/checksums` documents `train` and `checksums`); a component
in angle brackets (`<index>`, `<param>`) is a placeholder for keys made at run time and
must match a placeholder the code side produces. Options (`--steps K`) and statuses
(`75`) are read the same way: the first word of the token. A section marked
    <!-- fields: NAME placeholder -->
documents a format that no code reads or writes yet: it must have no keys, and no code
may be claimed for it.

THE CODE SIDE (FORMATS below says which files belong to which format). In those files,
comments removed, a key is a string literal
  - in the key argument of a call: jansson's json_object_get/set(_new) (argument 2),
    HDF5's H5Aexists, H5Aopen, H5Acreate2, H5Lexists, H5Gopen2, H5Gcreate2, H5Dopen2,
    H5Dcreate2, H5Oexists_by_name (argument 2), and each file's own wrappers around them
    (listed per file with the argument that holds the name); every literal inside that
    argument counts (`cond ? "images" : "features"`);
  - a key slot of a json_pack format string ("{s:s, s:i}": the 1st and 3rd argument);
  - a key written as text JSON inside a literal ("\\"probe\\": {\\"ms\\": ...");
  - a row of a table the file declares (a regular expression per file: the model's
    hyperparameter table, the layer attribute table).
A key argument that is not a literal is resolved: an identifier assigned literals
anywhere in the same file (file-wide, not per function: it may find more keys, never fewer) (x = "a" or "b"; x[] = {"a", ...}; snprintf(x, n, "%05d", ...)) takes
those literals; otherwise the file's entry must say what it is: a placeholder (the
documented `<...>`), or "from ..." naming where its values are documented literals
(a wrapper's parameter: its callers' literals are extracted). A key argument nobody
explained fails the check: a key made at run time is never silently skipped.
A literal component holding a printf conversion ("%05d") is a placeholder too, mapped
per format (PLACEHOLDERS). Where one source file serves two formats (run_train.c: the
report's entries and the run log's lines), its entry names the functions that belong
to the format ("functions") and the keys that do not ("not", with the reason).

Every source file under src/ that calls one of the key functions above must belong to a
format or be listed in UNCLAIMED with the reason, so that a new file writing a new file
format cannot go unchecked.

Options: the long names of a program's getopt table ({"steps", required_argument, ...})
or of its list of "--name" literals. Exit statuses: the integer codes of every exit
path found by the patterns in EXIT_PATTERNS (agree_or_end_job's last argument,
ppdl_fail's first, exit/_exit/abort_job arguments, `status = N` and `return N;` in a
main(), the PPDL_EXIT_* constants of #defines or enums, nonfinite_exit), across src/;
a PPDL_EXIT_* name is resolved to its number.

Environment variables and test hooks: in those two sections every PPDL_* name inside a
backticked token of a row's first cell is documented (`PPDL_TEST_TIE=one-buffer`
documents PPDL_TEST_TIE). The code side: ENV_WRAPPERS, ENV_DYNAMIC and HOOK_CALLS below.
"""
import os
import re
import sys

# ---- formats: which code, which docs section -----------------------------------------

# per source file: wrappers {function: index of the argument holding the key (0-based)},
# table regexes (group 1 is the key), dynamic key expressions and what they are
FROM = "from"   # marks an explanation: the values are literals documented elsewhere

FORMATS = {
    "model.h5": {
        "src/io/model_io.c": {
            "calls": {"read_int_attr": 3, "read_double_attr": 3, "read_str_attr": 3, "write_attr": 3,
                      "write_int_attr": 3, "write_double_attr": 3, "write_str_attr": 3},
            "tables": [r'\{\s*"(?:gpt|mlp|cnn)"\s*,\s*"(\w+)"',      # hyper: family, key
                       r'\(layer_attr\)\s*\{\s*"(\w+)"'],          # a layer's attributes
            "dynamic": {"name": FROM + " the wrappers' callers: write_*_attr/read_*_attr literals",
                        "h->key": FROM + " the hyperparameter table (hypers[])",
                        "hypers[i].key": FROM + " the hyperparameter table (hypers[])",
                        "a[i].name": FROM + " the layer attribute table (layer_attrs)",
                        "want[i].name": FROM + " the layer attribute table (layer_attrs)",
                        "p->name": FROM + " the parameter names of src/nn/layer.c (add_param)"},
        },
        "src/nn/layer.c": {"calls": {"add_param": 1}, "dynamic": {"name": FROM + " add_param's callers"}},
    },
    "data.h5": {
        "src/io/data_io.c": {
            "calls": {"open_dataset": 2, "read_rows": 2, "write_dataset": 1, "write_root_attr": 1,
                      "has_link": 1, "open_classif": 2},
            "dynamic": {"name": FROM + " the wrappers' callers", "xname": FROM + " its assignment",
                        "names[i]": FROM + " names[] in ppdl_data_open"},
        },
    },
    "checkpoint.h5": {
        "includes": ["model.h5"],
        "src/io/checkpoint.c": {
            "calls": {"put_attr": 1, "put_i64": 1, "put_f64": 1, "put_str": 1, "new_group": 1,
                      "get_int": 3, "get_double": 3, "get_string": 3},
            "tables": [r'\{\s*"(\w+)"\s*,\s*offsetof'],            # hyperparameters compared
            "dynamic": {"name": FROM + " the wrappers' callers and the snprintf formats",
                        "a->name": FROM + " the model file's attributes, copied as they are",
                        "group_of[a]": FROM + " group_of[]",
                        "p->name": ["<param>"]},   # the parameter names of model.h5
        },
    },
    "config.json": {
        # the Hugging Face GPT-2 config ppdl-convert reads and writes (docs/interop.md)
        "src/cmd/ppdl-convert.c": {"functions": ["cfg_num", "cfg_int", "cfg_bool", "read_hf_config",
                                                 "write_hf_config"],
                                   "calls": {"cfg_num": 2, "cfg_int": 2, "cfg_bool": 2},
                                   "dynamic": {"key": FROM + " the wrappers' callers"}},
    },
    "model.safetensors.index.json": {
        # the index of a sharded Hugging Face checkpoint (docs/interop.md)
        "src/cmd/ppdl-convert.c": {"functions": ["hf_open"], "dynamic": {"t": ["<tensor>"]}},
    },
    "safetensors": {
        "src/io/safetensors.c": {"dynamic": {"t->name": ["<tensor>"]}},
    },
    "CLUSTER.json": {
        "src/plan/cluster_model.c": {"calls": {"read_matrix": 1, "read_vector": 1, "put_matrix": 1},
                                     "dynamic": {"key": FROM + " the wrappers' callers"}},
    },
    "COSTS.json": {
        "src/plan/costs.c": {"calls": {"get_num": 1, "check_ms": 3, "check_bytes": 3},
                             "dynamic": {"key": FROM + " get_num's callers"}},
    },
    "plan JSON": {
        "src/plan/plan.c": {"calls": {"get_int": 1}, "dynamic": {"key": FROM + " get_int's callers"}},
    },
    "report": {
        "src/cmd/run_report.c": {
            "dynamic": {"p->names[e]": ["<event>"], "ppdl_papi_kind_name(k)": ["<kind>"]},
        },
        # steps[], checkpoints[] and evals[] entries
        "src/cmd/run_train.c": {"functions": ["run_write_checkpoint", "step_log_finish", "run_evaluate"],
                                "not": {"tokens_per_s": "step_log_finish adds it to the run log's line only"}},
    },
    "trace": {
        "src/prof/timeline.c": {"dynamic": {"key": FROM + " meta_event's callers"},
                                "calls": {"meta_event": 3}},
    },
    "run log": {
        "src/cmd/run_log.c": {},   # reads a resumed run's lines back
        # the lines: a step's report entry and its rates; the evaluation before step 1
        "src/cmd/run_train.c": {"functions": ["step_log_finish", "run_train"]},
    },
}

# a printf conversion in a literal key component, per format: the placeholder it is
PLACEHOLDERS = {"%05d": "<index>", "%s": None}   # None: the component is one of the above

# files that call a key function but hold no format of their own
UNCLAIMED = {
    "src/io/h5util.c": "generic helpers: the attribute name is their caller's (model_io.c, checkpoint.c)",
    "src/io/tokenizer.c": "reads Hugging Face's tokenizer.json, a format ppdl does not define: the fields it "
                          "reads are in docs/data.md (Tokenizers); tests/unit/tokenizer.sh checks it against "
                          "the tokenizers library",
}

COMMON_CALLS = {"json_object_get": 1, "json_object_set_new": 1, "json_object_set": 1, "json_object_del": 1,
                "H5Aexists": 1, "H5Aopen": 1, "H5Acreate2": 1, "H5Lexists": 1, "H5Gopen2": 1,
                "H5Gcreate2": 1, "H5Dopen2": 1, "H5Dcreate2": 1, "H5Oexists_by_name": 1}

# programs: their options (docs/cli.md sections "cli NAME")
PROGRAMS = {
    "ppdl": ("src/cmd/run_options.c", "getopt"),
    "ppdl-plan": ("src/cmd/ppdl-plan.c", "getopt"),
    "ppdl-init": ("src/cmd/ppdl-init.c", "literals"),
    "ppdl-data": ("src/cmd/ppdl-data.c", "literals"),
    "ppdl-sample": ("src/cmd/ppdl-sample.c", "literals"),
    "ppdl-convert": ("src/cmd/ppdl-convert.c", "literals"),
}

# exit statuses: (regex with one group, files glob) — group 1 is an integer or a
# PPDL_EXIT_* name resolved through the #defines
EXIT_PATTERNS = [
    r'agree_or_end_job(?:_idle)?\([^;]*,\s*(\w+)\s*\)\s*;',
    r'\bppdl_fail\(\s*(\w+)\s*,',
    r'\b(_exit|exit)\(\s*(\w+)\s*\)',
    r'\babort_job\(\s*(\w+)\s*\)',
    r'#define\s+PPDL_EXIT_\w+\s+(\d+)',
    r'\bPPDL_EXIT_\w+\s*=\s*(\d+)\b',
    r'\bnonfinite_exit\s*=\s*(\w+)',
    r'\bstatus\s*=\s*(\d+|PPDL_EXIT_\w+)\s*;',
]

# environment variables (docs/environment.md, section "environment"): the PPDL_* names
# src/ reads with getenv("PPDL_...") or through a wrapper named here (function: index of
# the argument holding the name). A getenv whose argument is not a literal must be
# explained in ENV_DYNAMIC, so that a name made at run time is never silently skipped.
# Names of other software (NCCL_BUFFSIZE, CUDA_VISIBLE_DEVICES, PMI_FD) are not ppdl's.
ENV_WRAPPERS = {"env_switch": 0}
ENV_DYNAMIC = {
    ("src/backend/cuda/cuda.c", "name"): FROM + " env_switch's callers",
    ("src/core/test_hooks.c", "ppdl_test_hook_var(name)"): FROM + " the test hooks (section 'test hooks')",
}
# test hooks (docs/testing.md, section "test hooks"): PPDL_TEST_<NAME> for every literal
# NAME passed to these functions (core/test_hooks.h) anywhere in src/ but test_hooks.c,
# which builds the variable's name from its argument
HOOK_CALLS = ("ppdl_test_hook", "ppdl_test_hook_var", "ppdl_test_hook_bad")
ENV_SECTIONS = ("environment", "test hooks")

# ---- C source reading -------------------------------------------------------------------

TOKENS = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|/\*.*?\*/|//[^\n]*', re.S)
_sources = {}


def strip_comments(src):
    """the source with comments replaced by spaces (newlines kept: line numbers stay)"""
    def blank(m):
        t = m.group(0)
        if t[0] != '/':
            return t
        return ' ' * len(t) if '\n' not in t else re.sub(r'[^\n]', ' ', t)
    return TOKENS.sub(blank, src)


def source(root, rel):
    """a source file's text without comments (read once)"""
    key = os.path.join(root, rel)
    if key not in _sources:
        _sources[key] = strip_comments(open(key, encoding='utf-8', errors='replace').read())
    return _sources[key]


def call_args(src, open_paren):
    """the top-level arguments of the call whose '(' is at open_paren, as text"""
    args, depth, start, i, n = [], 0, open_paren + 1, open_paren, len(src)
    while i < n:
        c = src[i]
        if c in '"\'':
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == '\\' else 1
            i = j + 1
            continue
        if c in '([{':
            depth += 1
        elif c in ')]}':
            depth -= 1
            if depth == 0:
                args.append(src[start:i].strip())
                return args
        elif c == ',' and depth == 1:
            args.append(src[start:i].strip())
            start = i + 1
        i += 1
    return args


LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')
DECL = re.compile(r'\b(?:char|int|double|json_t|hid_t|void|size_t|long)\b[\s\*]*\w+\s*$')


def literals(expr):
    return LITERAL.findall(expr)


_compiled = {}


def scan(rx, src):
    """re.finditer(rx, src), quicker where rx starts with \\b and a word or a group of
    alternative words: a file that holds none of them has no match (Python's re tries
    every position of a pattern that starts with \\b)"""
    c = _compiled.get(rx)
    if c is None:
        words = None
        m = re.match(r'\\b\((\w+(?:\|\w+)*)\)', rx) or re.match(r'\\b(\w+)', rx)
        if m and '|' not in rx[m.end():]:   # no alternative outside the words
            words = m.group(1).split('|')
            if rx[m.end():m.end() + 1] in ('?', '*', '+', '{'):
                words = [w[:-1] for w in words]   # the last letter is optional
            if not all(words):
                words = None
        c = _compiled[rx] = (re.compile(rx), words)
    pattern, words = c
    if words is not None and not any(w in src for w in words):
        return iter(())
    return pattern.finditer(src)


def line_of(src, pos):
    return src.count('\n', 0, pos) + 1


def resolve(src, expr):
    """literals an identifier is given in this file (assignment, initializer, snprintf)"""
    if not re.fullmatch(r'\w+', expr):
        return []
    e = re.escape(expr)
    found = []
    for m in scan(r'\b' + e + r'\s*=(?!=)\s*([^;]*);', src):
        if '(' not in m.group(1):   # literals or a choice of them, not a call's result
            found += literals(m.group(1))
    for m in scan(r'\b' + e + r'\s*\[[^\]]*\]\s*=\s*\{([^}]*)\}', src):
        found += literals(m.group(1))
    for m in scan(r'\bsnprintf\(\s*' + e + r'\s*,[^,]*,\s*("(?:[^"\\]|\\.)*")', src):
        found += literals(m.group(1))
    return found


def pack_keys(fmt):
    """indexes (into the arguments after the format) of json_pack's object keys"""
    keys, arg, stack, expect_key = [], 0, [], False
    i = 0
    while i < len(fmt):
        c = fmt[i]
        if c == '{':
            stack.append('{')
            expect_key = True
        elif c == '[':
            stack.append('[')
        elif c in '}]':
            stack.pop()
            expect_key = False
        elif c == ':':
            expect_key = False
        elif c == ',':
            expect_key = bool(stack) and stack[-1] == '{'
        elif c in 'sbiIfoOn':
            if expect_key and stack and stack[-1] == '{':
                keys.append(arg)
            nargs = 0 if c == 'n' else 1
            if i + 1 < len(fmt) and fmt[i + 1] in '#%':
                nargs += 1
                i += 1
            arg += nargs
        i += 1
    return keys


class Finding:
    def __init__(self):
        self.keys = {}        # key -> [where]
        self.problems = []

    def add(self, key, where):
        self.keys.setdefault(key, []).append(where)


def split_key(text):
    """an HDF5 path's groups ("/train/checksums") or a JSON path's keys ("recompute[%d].extra_ms",
    as messages name fields) -> the keys it names"""
    out = []
    for c in text.split('/'):
        out += [x for x in re.split(r'\[%?\w*\]\.?', c) if x]
    return out


def add_literal_key(f, lit, where, fmt_name):
    for comp in split_key(lit):
        if '%' in comp:
            ph = PLACEHOLDERS.get(comp, 'unknown')
            if ph == 'unknown':
                f.problems.append("%s: %s: the key component '%s' of \"%s\" is made at run time and no "
                                  "placeholder says what it is (PLACEHOLDERS in %s)" % (where, fmt_name, comp, lit,
                                                                                      os.path.basename(__file__)))
            elif ph:
                f.add(ph, where)
        else:
            f.add(comp, where)


def key_sites(src, calls):
    """(function, argument text, position) of every key argument of calls in src"""
    names = '|'.join(sorted(map(re.escape, calls)))
    for m in scan(r'\b(' + names + r')\s*\(', src):
        before = src[max(0, m.start() - 40):m.start()]
        # a definition or prototype, not a call: a type word right before the name
        if re.search(r'\b(?:int|void|hid_t|json_t|herr_t|char|double)\s*\**\s*$', before):
            continue
        args = call_args(src, m.end() - 1)
        idx = calls[m.group(1)]
        if idx < len(args):
            yield m.group(1), args[idx], m.start()


def only_functions(src, names, missing):
    """src with everything outside the bodies of the functions `names` blanked (lines
    kept); the names it does not define are appended to missing"""
    keep = [False] * len(src)
    for name in names:
        m = re.search(r'(?m)^[\w \t\*]*\b' + re.escape(name) + r'\s*\([^;{]*\)\s*\{', src)
        if not m:
            missing.append(name)
            continue
        depth = 0
        for br in re.finditer(r'[{}]', src[m.end() - 1:]):
            depth += 1 if br.group(0) == '{' else -1
            if depth == 0:
                for i in range(m.start(), m.end() - 1 + br.end()):
                    keep[i] = True
                break
    return ''.join(c if k or c == '\n' else ' ' for c, k in zip(src, keep))


def scan_file(root, rel, cfg, fmt_name, out):
    try:
        src = source(root, rel)
    except OSError as e:
        out.problems.append("%s: %s: cannot read it (%s)" % (rel, fmt_name, e.strerror))
        return
    if 'functions' in cfg:
        missing = []
        src = only_functions(src, cfg['functions'], missing)
        for name in missing:
            out.problems.append("%s: %s: docs_fields.py reads the keys of its function %s, which it does not "
                                "define any more: update the file's \"functions\"" % (rel, fmt_name, name))
    f = Finding()
    calls = dict(COMMON_CALLS)
    calls.update(cfg.get('calls', {}))
    dynamic = cfg.get('dynamic', {})
    for fn, arg, pos in key_sites(src, calls):
        where = "%s:%d" % (rel, line_of(src, pos))
        if DECL.search(arg):
            continue
        lits = literals(arg)
        if not lits:
            lits = resolve(src, arg)
        if lits:
            for lit in lits:
                add_literal_key(f, lit, where, fmt_name)
            continue
        what = dynamic.get(arg)
        if what is None:
            f.problems.append("%s: %s: %s(... %s ...) names a key made at run time that docs_fields.py does not "
                              "know: add it to the file's \"dynamic\" entry (a documented <placeholder>, or where "
                              "its values come from)" % (where, fmt_name, fn, arg))
        elif isinstance(what, list):
            for ph in what:
                f.add(ph, where)
    for m in scan(r'\bjson_pack\(\s*"([^"]*)"', src):
        args = call_args(src, m.end() - len(m.group(0)) + m.group(0).index('('))
        for k in pack_keys(m.group(1)):
            if 1 + k < len(args):
                for lit in literals(args[1 + k]):
                    add_literal_key(f, lit, "%s:%d" % (rel, line_of(src, m.start())), fmt_name)
    for m in LITERAL.finditer(src):
        for k in re.findall(r'\\"(\w+)\\":', m.group(1)):
            f.add(k, "%s:%d" % (rel, line_of(src, m.start())))
    for rx in cfg.get('tables', []):
        for m in re.finditer(rx, src):
            f.add(m.group(1), "%s:%d" % (rel, line_of(src, m.start())))
    out.problems += f.problems
    for k, where in f.keys.items():
        if k not in cfg.get('not', {}):
            for w in where:
                out.add(k, w)


def code_keys(root, fmt_name):
    f = Finding()
    cfg = FORMATS[fmt_name]
    for rel, fcfg in cfg.items():
        if rel == 'includes':
            continue
        scan_file(root, rel, fcfg, fmt_name, f)
    for inc in cfg.get('includes', []):
        g = code_keys(root, inc)
        for k, w in g.keys.items():
            for x in w:
                f.add(k, x)
    return f


def unclaimed_files(root):
    claimed = {rel for cfg in FORMATS.values() for rel in cfg if rel != 'includes'}
    claimed |= set(UNCLAIMED)
    rx = re.compile(r'\b(' + '|'.join(map(re.escape, COMMON_CALLS)) + r'|json_pack)\s*\(')
    out = []
    for d, _, files in os.walk(os.path.join(root, 'src')):
        for name in sorted(files):
            if not name.endswith('.c'):
                continue
            rel = os.path.relpath(os.path.join(d, name), root)
            if rel in claimed:
                continue
            src = source(root, rel)
            m = rx.search(src)
            if m:
                out.append("%s:%d: calls %s (reads or writes keys of a file) but no format in docs_fields.py "
                           "claims it: add it to FORMATS and document its keys in docs/, or to UNCLAIMED with "
                           "the reason" % (rel, line_of(src, m.start()), m.group(1)))
    return out

# ---- options and exit statuses --------------------------------------------------------------

def option_keys(root, prog):
    rel, kind = PROGRAMS[prog]
    f = Finding()
    src = source(root, rel)
    if kind == 'getopt':
        rx = r'\{\s*"([a-z][a-z0-9-]*)"\s*,\s*(?:required|no|optional)_argument'
        for m in re.finditer(rx, src):
            f.add('--' + m.group(1), "%s:%d" % (rel, line_of(src, m.start())))
    else:
        for m in LITERAL.finditer(src):
            if re.fullmatch(r'--[a-z][a-z0-9-]*|-[a-z]', m.group(1)):
                f.add(m.group(1), "%s:%d" % (rel, line_of(src, m.start())))
    return f


def exit_keys(root):
    f = Finding()
    sources = []
    for d, _, files in os.walk(os.path.join(root, 'src')):
        for name in sorted(files):
            if name.endswith(('.c', '.h')):
                rel = os.path.relpath(os.path.join(d, name), root)
                sources.append((rel, source(root, rel)))
    defines = {}
    for _, src in sources:
        if 'PPDL_EXIT_' not in src:
            continue
        # #define PPDL_EXIT_X 75, or an enum's PPDL_EXIT_X = 75
        for m in re.finditer(r'(?:#define\s+(PPDL_EXIT_\w+)\s+|\b(PPDL_EXIT_\w+)\s*=\s*)(\d+)\b', src):
            defines[m.group(1) or m.group(2)] = m.group(3)
    for rel, src in sources:
        spans = []
        for rx in EXIT_PATTERNS:
            for m in scan(rx, src):   # the value is the last group
                spans.append((m.start(m.lastindex), m.group(m.lastindex)))
        # return N; inside main()
        for m in scan(r'\bint\s+main\s*\(', src):
            body_start, depth, i = src.find('{', m.end()), 0, len(src)
            for br in re.finditer(r'[{}]', src[body_start:]):
                depth += 1 if br.group(0) == '{' else -1
                if depth == 0:
                    i = body_start + br.start()
                    break
            for r in scan(r'\breturn\s+(\d+|PPDL_EXIT_\w+)\s*;', src[body_start:i]):
                spans.append((body_start + r.start(1), r.group(1)))
        for pos, v in spans:
            v = defines.get(v, v)
            if re.fullmatch(r'\d+', v):
                f.add(v, "%s:%d" % (rel, line_of(src, pos)))
            elif v not in ('code', 'exit_code', 'status', 'rc'):
                f.problems.append("%s:%d: exit status %s: not a number or a PPDL_EXIT_* constant docs_fields.py "
                                  "can resolve" % (rel, line_of(src, pos), v))
    return f

def src_files(root):
    for d, _, files in os.walk(os.path.join(root, 'src')):
        for name in sorted(files):
            if name.endswith(('.c', '.h')):
                yield os.path.relpath(os.path.join(d, name), root)


def env_keys(root):
    f = Finding()
    for rel in src_files(root):
        src = source(root, rel)
        for fn, idx in [("getenv", 0)] + sorted(ENV_WRAPPERS.items()):
            for m in scan(r'\b' + fn + r'\s*\(', src):
                args = call_args(src, m.end() - 1)
                if len(args) <= idx:
                    continue
                arg = args[idx].strip()
                lit = re.fullmatch(r'"([^"\\]*)"', arg)
                if lit:
                    if lit.group(1).startswith('PPDL_'):
                        f.add(lit.group(1), "%s:%d" % (rel, line_of(src, m.start())))
                elif fn == "getenv" and (rel, arg) not in ENV_DYNAMIC:
                    f.problems.append("%s:%d: getenv(%s) reads a variable named at run time: add it to "
                                      "ENV_DYNAMIC in docs_fields.py with where its names are documented"
                                      % (rel, line_of(src, m.start()), arg))
    return f


def hook_keys(root):
    f = Finding()
    for rel in src_files(root):
        if rel == os.path.join('src', 'core', 'test_hooks.c'):
            continue
        src = source(root, rel)
        for m in scan(r'\b(' + '|'.join(HOOK_CALLS) + r')\s*\(', src):
            args = call_args(src, m.end() - 1)
            lit = re.fullmatch(r'"(\w+)"', args[0].strip()) if args else None
            if lit:
                f.add('PPDL_TEST_' + lit.group(1), "%s:%d" % (rel, line_of(src, m.start())))
            elif not rel.endswith('test_hooks.h'):
                f.problems.append("%s:%d: %s(%s): a test hook named at run time; name it with a literal"
                                  % (rel, line_of(src, m.start()), m.group(1), args[0].strip() if args else ''))
    return f

# ---- the documented side -------------------------------------------------------------------

def doc_sections(root):
    """{section name: (Finding, placeholder?, file)} from docs/*.md"""
    out = {}
    ddir = os.path.join(root, 'docs')
    for name in sorted(os.listdir(ddir)):
        if not name.endswith('.md'):
            continue
        rel = 'docs/' + name
        cur = None
        for no, line in enumerate(open(os.path.join(ddir, name), encoding='utf-8'), 1):
            m = re.match(r'\s*<!--\s*fields:\s*(.*?)\s*-->', line)
            if m:
                spec = m.group(1)
                placeholder = spec.endswith(' placeholder')
                sec = spec[:-len(' placeholder')] if placeholder else spec
                if sec in out:
                    out[sec][0].problems.append("%s:%d: a second <!-- fields: %s --> section" % (rel, no, sec))
                    cur = None
                else:
                    cur = sec
                    out[sec] = (Finding(), placeholder, rel)
                continue
            if re.match(r'\s*<!--\s*/fields\s*-->', line):
                cur = None
                continue
            if cur is None or not line.lstrip().startswith('|'):
                continue
            cells = re.split(r'(?<!\\)\|', line.strip().strip('|'))   # a cell may hold `a\|b`
            if re.fullmatch(r'[\s:-]*', cells[0]):
                continue   # the separator row
            for tok in re.findall(r'`([^`]+)`', cells[0]):
                if cur in ENV_SECTIONS:   # `PPDL_TEST_TIE=one-buffer` documents PPDL_TEST_TIE
                    for name in re.findall(r'PPDL_[A-Z0-9_]+', tok):
                        out[cur][0].add(name, "%s:%d" % (rel, no))
                    continue
                word = tok.split()[0]
                for comp in split_key(word) if not word.startswith('-') else [word]:
                    out[cur][0].add(comp, "%s:%d" % (rel, no))
    return out

# ---- comparison ---------------------------------------------------------------------------------

def compare(label, code, doc, docfile, problems):
    for k in sorted(set(code.keys) - set(doc.keys)):
        problems.append("%s: %s: `%s` is read or written by the code (%s) but %s does not name it"
                        % (code.keys[k][0], label, k, ', '.join(sorted(set(code.keys[k]))[:3]), docfile))
    for k in sorted(set(doc.keys) - set(code.keys)):
        problems.append("%s: %s: `%s` is documented but no code reads or writes it"
                        % (doc.keys[k][0], label, k))


def section_code_keys(root, sec):
    """the keys the code has for one section: a format, 'cli PROGRAM', 'exit status',
    'environment' or 'test hooks'"""
    if sec in FORMATS:
        return code_keys(root, sec)
    if sec.startswith('cli ') and sec[4:] in PROGRAMS:
        return option_keys(root, sec[4:])
    return {'exit status': exit_keys, 'environment': env_keys, 'test hooks': hook_keys}[sec](root)


def all_code_keys(root):
    secs = list(FORMATS) + ['cli ' + prog for prog in PROGRAMS] + ['exit status', 'environment', 'test hooks']
    return {sec: section_code_keys(root, sec) for sec in secs}


def plant(root, kind, sec):
    """plant one mistake in the tree at root (a scratch copy); prints what it did"""
    if kind == 'doc':
        doc = doc_sections(root)[sec][0]
        code = section_code_keys(root, sec)
        for k in sorted(doc.keys):
            if len(set(doc.keys[k])) == 1 and k in code.keys and not k.startswith('<'):
                rel, no = doc.keys[k][0].rsplit(':', 1)
                lines = open(os.path.join(root, rel), encoding='utf-8').readlines()
                del lines[int(no) - 1]
                open(os.path.join(root, rel), 'w', encoding='utf-8').writelines(lines)
                print("%s\t%s" % (k, rel))
                return 0
    else:
        code = section_code_keys(root, sec)
        for k in sorted(code.keys):
            if k.startswith('<'):
                continue
            where = sorted(set(code.keys[k]))
            if sec in FORMATS and any(w.rsplit(':', 1)[0] not in FORMATS[sec] for w in where):
                continue   # (also) an included format's key: planted in that format's own check
            # the new name is one the extraction still reads: a status stays a number,
            # an option a --name
            new = str(int(k) + 1000) if k.isdigit() else k + ('-planted' if k.startswith('-') else '_planted')
            edits = []
            for w in where:   # every place that reads or writes it: a consistent rename
                rel, no = w.rsplit(':', 1)
                line = open(os.path.join(root, rel), encoding='utf-8').readlines()[int(no) - 1]
                for old, repl in ((k, new), (k.lstrip('-'), new.lstrip('-')),
                                  (k.replace('PPDL_TEST_', '', 1), new.replace('PPDL_TEST_', '', 1))):
                    rx = r'(?<![\w.-])' + re.escape(old) + r'(?![\w.-])'
                    if re.search(rx, line):
                        edits.append((rel, int(no), re.sub(rx, repl, line)))
                        break
            if len(edits) < len(where):
                continue   # a key whose literal is not on its call's first line
            for rel, no, line in edits:
                path = os.path.join(root, rel)
                lines = open(path, encoding='utf-8').readlines()
                lines[no - 1] = line
                open(path, 'w', encoding='utf-8').writelines(lines)
            print("%s\t%s\t%s" % (k, new, edits[0][0]))
            return 0
    print("docs_fields.py --plant %s %s: found no key to plant a mistake on" % (kind, sec))
    return 2


def main(argv):
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
    where = '--where' in argv
    if '--root' in argv:
        root = argv[argv.index('--root') + 1]
    if '--plant' in argv:
        i = argv.index('--plant')
        return plant(root, argv[i + 1], argv[i + 2])
    problems = []
    docs = doc_sections(root)
    for sec, (d, _, _) in docs.items():
        problems += d.problems
    wanted = all_code_keys(root)
    for sec, code in wanted.items():
        problems += code.problems
        if where:
            for k in sorted(code.keys):
                print("%s\t%s\t%s" % (sec, k, code.keys[k][0]))
        if sec not in docs:
            problems.append("docs/: no section <!-- fields: %s --> documents %s (%d keys in the code)"
                            % (sec, sec, len(code.keys)))
            continue
        doc, placeholder, docfile = docs[sec]
        if placeholder:
            if code.keys or doc.keys:
                problems.append("%s: %s is marked placeholder but %s" % (
                    docfile, sec, "the code has keys for it: document them and drop the mark" if code.keys
                    else "it lists keys"))
            continue
        if sec in FORMATS:
            for inc in FORMATS[sec].get('includes', []):
                if inc in docs:
                    for k, w in docs[inc][0].keys.items():
                        for x in w:
                            doc.add(k, x)
        if where:
            for k in sorted(doc.keys):
                print("%s\t%s\t%s" % (sec, k, doc.keys[k][0]))
        compare(sec, code, doc, docfile, problems)
    for sec in docs:
        if sec not in wanted:
            problems.append("%s: <!-- fields: %s -->: no such format, program or list in docs_fields.py"
                            % (docs[sec][2], sec))
    problems += unclaimed_files(root)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
