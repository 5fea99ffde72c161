'use strict';
// Reads tests/surface/surface.json (see README.md there): the public names of
// the Python and JS packages, paired. Shared by tests/js/surface.test.cjs; the
// Python test (bindings-python/tests/test_surface.py) reads the JSON itself.

const fs = require('node:fs');
const path = require('node:path');

const FILE = path.join(__dirname, 'surface.json');

/** Splits `text` at the commas outside brackets, braces, parentheses and angle brackets. */
function splitTop(text) {
  const parts = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if ('([{<'.includes(c)) depth++;
    else if (')]}>'.includes(c) && !(c === '>' && text[i - 1] === '=')) depth--;
    else if (c === ',' && depth === 0) {
      parts.push(text.slice(start, i).trim());
      start = i + 1;
    }
  }
  if (text.slice(start).trim() !== '') parts.push(text.slice(start).trim());
  return parts;
}

/**
 * A JS entry of the mapping: `[type |returns ]module.name[(params)]`, each
 * param `name`, `name?`, or an options object `{a, b?}` (optional as `{...}?`).
 * `fields` of an options object: [name, optional].
 */
function parseJs(spec) {
  let rest = spec;
  let kind = 'value';
  for (const prefix of ['type ', 'returns ']) {
    if (rest.startsWith(prefix)) {
      kind = prefix.trim();
      rest = rest.slice(prefix.length);
    }
  }
  const open = rest.indexOf('(');
  const qualified = open < 0 ? rest : rest.slice(0, open);
  const params =
    open < 0
      ? null
      : splitTop(rest.slice(open + 1, rest.lastIndexOf(')'))).map((p) => {
          const optional = p.endsWith('?');
          const bare = optional ? p.slice(0, -1) : p;
          if (bare.startsWith('{')) {
            const fields = splitTop(bare.slice(1, -1)).map((f) => (f.endsWith('?') ? [f.slice(0, -1), true] : [f, false]));
            return { name: null, optional, fields };
          }
          return { name: bare, optional, fields: null };
        });
  const dot = qualified.search(/\.[A-Za-z_$][\w$]*(\[.*)?$/);
  return { spec, kind, module: qualified.slice(0, dot), name: qualified.slice(dot + 1), qualified, params };
}

/** A Python entry: `[async ]module.name[(params)]` (params as inspect shows them). */
function parsePython(spec) {
  const rest = spec.startsWith('async ') ? spec.slice('async '.length) : spec;
  const open = rest.indexOf('(');
  const qualified = open < 0 ? rest : rest.slice(0, open);
  const params =
    open < 0
      ? null
      : splitTop(rest.slice(open + 1, rest.lastIndexOf(')')))
          .filter((p) => p !== '*' && !p.startsWith('*'))
          .map((p) => ({ name: p.split('=')[0], optional: p.includes('=') }));
  const dot = qualified.lastIndexOf('.');
  return { spec, module: qualified.slice(0, dot), name: qualified.slice(dot + 1), qualified, params };
}

/** A JS spec's parameter names, options objects flattened into their fields: [name, optional]. */
function flatJs(params) {
  const out = [];
  for (const p of params) {
    if (p.fields) for (const [name, optional] of p.fields) out.push([name, optional || p.optional]);
    else out.push([p.name, p.optional]);
  }
  return out;
}

/** Python's `snake_case` in JS's camelCase; class names and CONSTANTS stay as they are. */
function camel(name) {
  if (/^[A-Z0-9_]+$/.test(name) || /^[A-Z]/.test(name)) return name;
  return name.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());
}

/** Whether JS's `js` spells Python's `py` by the convention (seconds become `...Ms`). */
function spells(py, js) {
  return js === camel(py) || js === `${camel(py)}Ms`;
}

/** A member row: { python, js, why, py, jsSpecs } (jsSpecs: one per overload). */
function row([python, js, why]) {
  const jsList = js === null ? null : Array.isArray(js) ? js : [js];
  return {
    python,
    js: jsList,
    why: why ?? null,
    py: python === null ? null : parsePython(python.startsWith('async ') ? `async x.${python.slice(6)}` : `x.${python}`),
    jsSpecs: jsList === null ? null : jsList.map((s) => parseJs(`x.${s}`)),
  };
}

function load() {
  const data = JSON.parse(fs.readFileSync(FILE, 'utf8'));
  const types = data.types.map((t) => ({
    ...t,
    py: t.python === null ? null : parsePython(t.python),
    jsSpec: t.js === null ? null : parseJs(t.js),
    rows: t.members.map(row),
    statics: (t.static ?? []).map(row),
  }));
  const byPython = new Map(types.map((t) => [t.py.name, t]));
  // A type's members: its base's (`extends`), then its own, which replace a
  // base's row of the same Python or JS name.
  const resolve = (t, which) => {
    const own = t[which];
    if (!t.extends) return own;
    const base = byPython.get(t.extends);
    if (!base) throw new Error(`${t.python}: extends ${t.extends}, which no type is`);
    const pyNames = new Set(own.map((r) => r.py && r.py.name).filter(Boolean));
    const jsNames = new Set(own.flatMap((r) => (r.jsSpecs ? r.jsSpecs.map((s) => s.name) : [])));
    const inherited = resolve(base, which).filter(
      (r) => !(r.py && pyNames.has(r.py.name)) && !(r.jsSpecs && r.jsSpecs.some((s) => jsNames.has(s.name))),
    );
    return [...inherited, ...own];
  };
  for (const t of types) {
    t.allMembers = resolve(t, 'rows');
    t.allStatics = resolve(t, 'statics');
  }
  const exports = data.exports.map(([python, js, why]) => ({
    python,
    js,
    why: why ?? null,
    py: python === null ? null : parsePython(python),
    jsSpec: js === null ? null : parseJs(js),
  }));
  return { data, types, exports };
}

/** Where a row breaks the mapping's rules, as messages (see README.md). */
function ruleBreaks({ python, js, why, py, jsSpecs }, where) {
  const out = [];
  const needs = [];
  if (py === null || jsSpecs === null) needs.push('one side is null');
  else {
    for (const jsSpec of jsSpecs) {
      if (!spells(py.name, jsSpec.name)) needs.push(`${jsSpec.name} does not spell ${py.name}`);
      if ((py.params === null) !== (jsSpec.params === null)) needs.push('a method on one side, a property on the other');
      if (py.params && jsSpec.params) {
        const jsNames = flatJs(jsSpec.params);
        const unmatched = jsNames.filter(([j]) => !py.params.some((p) => spells(p.name, j)));
        const missing = py.params.filter((p) => !jsNames.some(([j]) => spells(p.name, j)));
        if (unmatched.length || missing.length || jsNames.length !== py.params.length) {
          needs.push(`parameters differ (Python only: ${missing.map((p) => p.name).join(', ') || '-'}; JS only: ${unmatched.map(([j]) => j).join(', ') || '-'})`);
        } else {
          for (const p of py.params) {
            const [j, optional] = jsNames.find(([name]) => spells(p.name, name));
            if (p.optional !== optional) needs.push(`${p.name} is ${p.optional ? '' : 'not '}optional in Python, ${j} is ${optional ? '' : 'not '}in JS`);
          }
        }
      }
    }
  }
  if (needs.length && !why) out.push(`${where}: [${JSON.stringify(python)}, ${JSON.stringify(js)}] needs a why: ${needs.join('; ')}`);
  if (!needs.length && why) out.push(`${where}: [${JSON.stringify(python)}, ${JSON.stringify(js)}] follows the convention: drop its why`);
  return out;
}

module.exports = { FILE, load, parseJs, parsePython, flatJs, splitTop, camel, spells, ruleBreaks };
