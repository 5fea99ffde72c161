'use strict';
// The JS API is the one tests/surface/surface.json pairs with Python's, name
// for name: what the build under test exposes at run time (napi or wasm,
// impl.cjs) and what the typings declare (index.d.ts, redis.d.ts,
// paced-fetch.d.ts, read by tsc). The Python half is
// bindings-python/tests/test_surface.py; a name added to one binding and not
// to the mapping, or to the mapping and not to a binding, fails one of them.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const api = require('./impl.cjs');
const surface = require('../surface/surface.cjs');

const ROOT = path.join(__dirname, '..', '..');
const NAPI = (process.env.RATEKEEPER_IMPL || 'napi') === 'napi';
const { types, exports: exported } = surface.load();

// The modules each binding's names live in, paired.
const MODULES = { ratekeeper: 'ratekeeper', 'ratekeeper.asgi': 'ratekeeper', 'ratekeeper.redis': 'ratekeeper/redis' };
// What the package's entries (main.cjs, wasm/browser.cjs, wasm/workerd.mjs)
// add to the API both builds share (impl.cjs); tests/package checks each entry.
const ENTRY_ONLY = ['init', 'initSync', 'pacedFetch'];

/** The names the mapping gives one JS module, split by their kind. */
function mapped(module) {
  return exported.filter((e) => e.jsSpec && e.jsSpec.module === module).map((e) => e.jsSpec.name);
}

/** Public members along an object's prototype chain, up to (not including) `stop`: name -> 'method' | 'property'. */
function membersOf(object, stops) {
  const out = new Map();
  for (let o = object; o && !stops.includes(o); o = Object.getPrototypeOf(o)) {
    for (const key of Object.getOwnPropertyNames(o)) {
      if (key === 'constructor' || key.startsWith('_') || out.has(key)) continue;
      const d = Object.getOwnPropertyDescriptor(o, key);
      out.set(key, !d.get && typeof d.value === 'function' ? 'method' : 'property');
    }
  }
  return out;
}

/** A map of expected members, name -> kind, from mapping rows (JS side). */
function expected(rows) {
  const out = new Map();
  for (const r of rows) {
    if (!r.jsSpecs) continue;
    for (const s of r.jsSpecs) out.set(s.name, s.params ? 'method' : 'property');
  }
  return out;
}

function assertMembers(actual, rows, what) {
  const want = expected(rows);
  const missing = [...want.keys()].filter((k) => !actual.has(k));
  const extra = [...actual.keys()].filter((k) => !want.has(k));
  assert.deepStrictEqual({ missing, extra }, { missing: [], extra: [] }, `${what}: members the runtime lacks (missing) or the mapping lacks (extra)`);
  for (const [k, kind] of want) assert.equal(actual.get(k), kind, `${what}.${k} is a ${kind} in the mapping`);
}

/** Builds a mapping `example` argument: `{ example: Type }` stands for an instance built from that type's example. */
function exampleArg(value) {
  if (Array.isArray(value)) return value.map(exampleArg);
  if (value && typeof value === 'object') {
    if ('example' in value) return instance(types.find((t) => t.py.name === value.example));
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, exampleArg(v)]));
  }
  return value;
}

function instance(t) {
  const C = api[t.jsSpec.name];
  return new C(...exampleArg(t.example.js));
}

// Values of the types JS has no class for (plain objects), as the API hands them out.
function samples() {
  const bucket = new api.TokenBucket({ capacity: 3, refillTokens: 1, refillPeriodMs: 1000 });
  const policy = new api.Policy();
  policy.add('per-user', new api.Gcra({ burst: 1, emissionIntervalMs: 1000 }), { by: ['user'] });
  return {
    'ratekeeper.Decision': bucket.tryAcquire(1, 0),
    'ratekeeper.Bandwidth': bucket.bandwidths[0],
    'ratekeeper.Reservation': bucket.reserve(1, Infinity, 0),
    'ratekeeper.PolicyDecision': policy.tryAcquire({ user: 'a' }, 1, 0),
    "ratekeeper.Policy['limits'][number]": policy.limits[0],
  };
}

describe('the mapping', () => {
  it('pairs names by the convention, or says why not', () => {
    const breaks = [];
    for (const e of exported) {
      breaks.push(...surface.ruleBreaks({ python: e.python, js: e.js, why: e.why, py: e.py, jsSpecs: e.jsSpec && [e.jsSpec] }, 'exports'));
      if (e.py && e.jsSpec && MODULES[e.py.module] !== e.jsSpec.module) breaks.push(`exports: ${e.python} is in ${e.py.module}, whose JS module is ${MODULES[e.py.module]}`);
    }
    for (const t of types) {
      const where = t.python ?? t.js;
      breaks.push(...surface.ruleBreaks({ python: t.python, js: t.js, why: t.why ?? null, py: t.py, jsSpecs: t.jsSpec && [t.jsSpec] }, where));
      for (const r of [...t.rows, ...t.statics]) breaks.push(...surface.ruleBreaks(r, where));
    }
    assert.deepStrictEqual(breaks, []);
  });

  it('has a type for every class exported by both bindings', () => {
    const typed = new Set(types.map((t) => t.py.qualified));
    const untyped = exported.filter((e) => e.py && e.jsSpec && e.py.params === null && /^[A-Z][a-z]/.test(e.py.name) && !typed.has(e.py.qualified));
    assert.deepStrictEqual(untyped.map((e) => e.python), []);
  });
});

describe('the runtime', () => {
  it("'ratekeeper' exports the mapped names", () => {
    const actual = [...Object.keys(api), ...ENTRY_ONLY].sort();
    assert.deepStrictEqual(actual, mapped('ratekeeper').sort());
  });

  if (NAPI) {
    it("the package's Node entry adds init, initSync and pacedFetch to the addon's API", () => {
      const main = require('../../bindings-node/main.cjs');
      assert.deepStrictEqual(Object.keys(main).sort(), [...Object.keys(api), ...ENTRY_ONLY].sort());
    });

    it("'ratekeeper/redis' exports the mapped names, and its classes the mapped members", () => {
      const redis = require('../../bindings-node/lib/redis.cjs');
      assert.deepStrictEqual(Object.keys(redis).sort(), mapped('ratekeeper/redis').sort());
      for (const t of types.filter((x) => x.jsSpec && x.jsSpec.module === 'ratekeeper/redis' && x.jsSpec.kind === 'value')) {
        assertMembers(membersOf(redis[t.jsSpec.name].prototype, [Object.prototype]), t.allMembers, `${t.py.name} (${t.js})`);
      }
    });
  }

  for (const t of types.filter((x) => x.jsSpec && x.jsSpec.module === 'ratekeeper')) {
    const name = `${t.js} (Python ${t.py.qualified})`;
    if (t.jsSpec.kind === 'value') {
      it(`${name}: members and statics`, () => {
        const C = api[t.jsSpec.name];
        const members = membersOf(C.prototype, [Object.prototype, Error.prototype]);
        // An error's own fields are set by its constructor; those of every Error are not the mapping's.
        if (C.prototype instanceof Error) {
          for (const k of Object.keys(new C('x', 1))) members.set(k, 'property');
          for (const k of Object.getOwnPropertyNames(Error.prototype)) members.delete(k);
        }
        assertMembers(members, t.allMembers, name);
        const statics = membersOf(C, [Function.prototype, Error]);
        for (const k of ['length', 'name', 'prototype']) statics.delete(k);
        assertMembers(statics, t.allStatics, `${name} statics`);
      });
    } else if (t.jsSpec.kind === 'type') {
      it(`${name}: the fields of the objects it stands for`, () => {
        const sample = samples()[t.jsSpec.qualified];
        assert.ok(sample, `no sample of ${t.jsSpec.qualified}`);
        assertMembers(membersOf(sample, [Object.prototype]), t.allMembers, name);
      });
    } else {
      it(`${name}: the members of what it returns`, () => {
        const made = api[t.jsSpec.name](...exampleArg(t.example.js));
        const members = membersOf(made, [Function.prototype]);
        for (const k of ['length', 'name', 'prototype']) members.delete(k);
        assertMembers(members, t.allMembers, name);
      });
    }
    const options = t.jsSpec.params && t.jsSpec.params.findIndex((p) => p.fields);
    if (t.example && t.example.js && options >= 0) {
      it(`${name}: takes the mapped options (each other one refused, naming those it takes)`, () => {
        const args = exampleArg(t.example.js);
        args[options] = { ...args[options], notAnOption: 1 };
        const call = () => (t.jsSpec.kind === 'value' ? new api[t.jsSpec.name](...args) : api[t.jsSpec.name](...args));
        let taken;
        assert.throws(call, (e) => {
          taken = /which takes (.*)$/.exec(e.message);
          return e.code === 'invalid_type' && taken !== null;
        });
        assert.deepStrictEqual(taken[1].split(', ').sort(), t.jsSpec.params[options].fields.map(([f]) => f).sort());
      });
    }
    if (t.defaults && t.example && t.example.js) {
      it(`${name}: the defaults Python's has (seconds as milliseconds)`, () => {
        const made = instance(t);
        for (const [py, value] of Object.entries(t.defaults)) {
          const r = t.allMembers.find((m) => m.py && m.py.name === py);
          assert.ok(r && r.jsSpecs, `${py} is a member of ${t.python} both bindings have`);
          const js = r.jsSpecs[0].name;
          const want = js === `${surface.camel(py)}Ms` ? value * 1000 : value;
          assert.deepStrictEqual(made[js], want, `${t.js}.${js}`);
        }
      });
    }
  }
});

// --- the typings, through tsc -----------------------------------------------

/** tsc from the packages scripts/node.sh or scripts/wasm.sh set up. */
function findTsc() {
  for (const dir of ['bindings-node', 'tests/browser']) {
    const tsc = path.join(ROOT, dir, 'node_modules', '.bin', 'tsc');
    if (fs.existsSync(tsc)) return tsc;
  }
  throw new Error('no tsc in bindings-node/node_modules or tests/browser/node_modules: run bash scripts/node.sh setup');
}

/** The TypeScript expression of a JS spec's module member (a type with `type`). */
function tsOf(spec) {
  const alias = spec.module === 'ratekeeper/redis' ? 'rr' : 'rk';
  return `${alias}.${spec.name}`;
}

const union = (names) => (names.length ? names.map((n) => JSON.stringify(n)).join(' | ') : 'never');

/**
 * The check program: `same<A, B>('same')` fails to compile where the name
 * sets A (declared) and B (mapped) differ, saying which names; each
 * `const x: never = <expr>` fails on purpose, its message printing the
 * declared type of <expr>, whose parameters are compared below.
 */
function program() {
  const lines = [
    "import * as rk from 'ratekeeper'",
    "import * as rr from 'ratekeeper/redis'",
    'type AllKeys<T> = T extends unknown ? keyof T : never',
    'type RequiredAll<T> = { [K in AllKeys<T>]: [T] extends [{ [P in K]: unknown }] ? K : never }[AllKeys<T>]',
    'type Methods<T> = { [K in keyof T]-?: NonNullable<T[K]> extends (...args: never[]) => unknown ? K : never }[keyof T]',
    'declare function same<A, B>(check: [Exclude<A, B>, Exclude<B, A>] extends [never, never] ? "same" : { declaredOnly: Exclude<A, B>; mappedOnly: Exclude<B, A> }): void',
  ];
  const labels = new Map(); // line number -> what it checks
  const printed = new Map(); // line number -> { what, specs }
  const add = (line, label) => {
    lines.push(line);
    labels.set(lines.length, label);
  };
  const sames = (declared, names, label) => add(`same<${declared}, ${union(names)}>('same')`, label);
  const show = (expr, specs, what) => {
    add(`export const x${lines.length}: never = ${expr}`, what);
    printed.set(lines.length, { what, specs });
  };
  /** Checks the options objects of `specs`' last overload, params of `paramsType`. */
  const options = (paramsType, spec, what) => {
    spec.params.forEach((p, i) => {
      if (!p.fields) return;
      const type = `NonNullable<${paramsType}[${i}]>`;
      sames(`AllKeys<${type}>`, p.fields.map(([f]) => f), `${what}: the fields of its options (argument ${i})`);
      sames(`RequiredAll<${type}>`, p.fields.filter(([, o]) => !o).map(([f]) => f), `${what}: the required fields of its options (argument ${i})`);
    });
  };

  for (const module of ['ratekeeper', 'ratekeeper/redis']) {
    const alias = module === 'ratekeeper' ? 'rk' : 'rr';
    sames(`Exclude<keyof typeof ${alias}, 'default'>`, mapped(module), `the value exports of '${module}'`);
  }
  for (const e of exported) {
    if (!e.jsSpec || !e.jsSpec.params) continue;
    show(tsOf(e.jsSpec), [e.jsSpec], e.js);
    options(`Parameters<typeof ${tsOf(e.jsSpec)}>`, e.jsSpec, e.js);
  }
  for (const t of types.filter((x) => x.jsSpec)) {
    const s = t.jsSpec;
    const what = `${t.js} (Python ${t.py.qualified})`;
    let instance;
    const members = t.allMembers.filter((r) => r.jsSpecs);
    const names = members.flatMap((r) => r.jsSpecs.map((x) => x.name));
    const methods = members.flatMap((r) => r.jsSpecs.filter((x) => x.params).map((x) => x.name));
    if (s.kind === 'type') {
      instance = s.module === 'ratekeeper/redis' ? `rr.${s.name}` : `rk.${s.name}`;
    } else if (s.kind === 'returns') {
      instance = `ReturnType<typeof ${tsOf(s)}>`;
      show(tsOf(s), [s], `${what}: the function`);
      options(`Parameters<typeof ${tsOf(s)}>`, s, what);
    } else {
      instance = tsOf(s);
      if (s.params) {
        show(`null as unknown as ConstructorParameters<typeof ${tsOf(s)}>`, [s], `${what}: the constructor`);
        options(`ConstructorParameters<typeof ${tsOf(s)}>`, s, `${what}: the constructor`);
      }
      const untyped = t.untyped ? t.untyped.names : [];
      const statics = t.allStatics.filter((r) => r.jsSpecs && !r.jsSpecs.some((x) => untyped.includes(x.name)));
      sames(`Exclude<keyof typeof ${tsOf(s)}, 'prototype'>`, statics.flatMap((r) => r.jsSpecs.map((x) => x.name)), `${what}: statics`);
      for (const r of statics) {
        const name = r.jsSpecs[0].name;
        show(`${tsOf(s)}.${name}`, r.jsSpecs, `${what}: static ${name}`);
        options(`Parameters<typeof ${tsOf(s)}.${name}>`, r.jsSpecs[r.jsSpecs.length - 1], `${what}: static ${name}`);
      }
    }
    const own = instance.includes('RateLimited') ? `Exclude<keyof ${instance}, keyof Error>` : `keyof ${instance}`;
    sames(own, names, `${what}: members`);
    sames(`Methods<${instance}>`, methods, `${what}: which members are methods`);
    for (const r of members) {
      for (const x of r.jsSpecs) {
        if (!x.params) continue;
        show(`(null as unknown as ${instance})[${JSON.stringify(x.name)}]`, r.jsSpecs, `${what}: ${x.name}`);
        options(`Parameters<${instance}[${JSON.stringify(x.name)}]>`, r.jsSpecs[r.jsSpecs.length - 1], `${what}: ${x.name}`);
        break;
      }
    }
  }
  return { text: `${lines.join('\n')}\n`, labels, printed };
}

/** The overloads of a function type as tsc prints it: each a list of [name, optional]. */
function overloads(type) {
  const strip = (t) => t.replace(/^<[^(]*>/, '');
  let signatures;
  if (type.startsWith('{ (') || type.startsWith('{ <')) {
    signatures = type
      .slice(2, -2)
      .split(/; (?=[(<])/)
      .map(strip);
  } else if (type.startsWith('[')) {
    signatures = [`(${type.slice(1, type.lastIndexOf(']'))})`]; // a constructor's parameters, as a tuple
  } else {
    signatures = [strip(type)];
  }
  return signatures.map((sig) => {
    let depth = 0;
    let end = 0;
    for (; end < sig.length; end++) {
      if ('([{<'.includes(sig[end])) depth++;
      else if (')]}>'.includes(sig[end]) && sig[end - 1] !== '=') depth--;
      if (depth === 0) break;
    }
    return surface.splitTop(sig.slice(1, end)).map((p) => {
      const m = /^(\.\.\.)?([\w$]+)(\?)?:/.exec(p);
      assert.ok(m, `a parameter tsc printed: ${p}`);
      return [m[2], Boolean(m[3])];
    });
  });
}

/** A mapping spec's parameters as the typings name them ([name or null for an options object, optional]). */
const paramsOf = (spec) => spec.params.map((p) => [p.name, p.optional]);

describe('the typings', () => {
  it('declare the mapped names, methods, parameters and options', () => {
    const { text, labels, printed } = program();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ratekeeper-surface-'));
    try {
      fs.writeFileSync(path.join(dir, 'surface.ts'), text);
      const node = path.join(ROOT, 'bindings-node');
      fs.writeFileSync(
        path.join(dir, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: {
            strict: true,
            noEmit: true,
            noErrorTruncation: true,
            target: 'es2022',
            lib: ['es2022', 'dom'],
            module: 'nodenext',
            moduleResolution: 'nodenext',
            types: [],
            paths: { ratekeeper: [path.join(node, 'ratekeeper.d.ts')], 'ratekeeper/redis': [path.join(node, 'redis.d.ts')] },
          },
          files: ['surface.ts'],
        }),
      );
      let out = '';
      try {
        out = execFileSync(findTsc(), ['-p', dir, '--pretty', 'false'], { encoding: 'utf8' });
      } catch (e) {
        out = String(e.stdout);
      }
      const problems = [];
      const seen = new Set();
      for (const line of out.split('\n')) {
        const m = /^[^(]*surface\.ts\((\d+),\d+\): error TS\d+: (.*)$/.exec(line);
        if (!m) {
          if (line.trim() !== '') problems.push(`tsc: ${line}`);
          continue;
        }
        const at = Number(m[1]);
        const shown = printed.get(at);
        const type = shown && /^Type '(.*)' is not assignable to type 'never'\.$/.exec(m[2]);
        if (!type) {
          problems.push(`${labels.get(at) ?? `line ${at}`}: ${m[2]}`);
          continue;
        }
        seen.add(at);
        // Each overload tsc prints is one the mapping lists, and each the mapping lists is declared.
        const declared = overloads(type[1]).map((ps) => JSON.stringify(ps.map(([n, o], i) => [shown.specs.some((s) => s.params[i] && s.params[i].fields) ? null : n, o])));
        const want = shown.specs.map((s) => JSON.stringify(paramsOf(s)));
        const odd = [...new Set(declared)].filter((d) => !want.includes(d));
        const absent = want.filter((w) => !declared.includes(w));
        if (odd.length || absent.length) problems.push(`${shown.what}: declared ${type[1]}; mapped ${shown.specs.map((s) => s.spec.replace(/^x\./, '')).join(' / ')}`);
      }
      for (const [at, { what }] of printed) if (!seen.has(at)) problems.push(`${what}: tsc printed no type (is it declared?)`);
      assert.deepStrictEqual(problems, []);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
