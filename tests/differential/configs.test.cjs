'use strict';
// Policy configurations read alike by the napi addon, the wasm build and
// Python: the same JSON texts (a valid configuration with one field changed
// to a number written many ways, a string, a lone surrogate escape, another
// type; fields given twice; the top level), each given as text and as the
// object each language's JSON parser makes of it. Python reads text with
// serde_json and the JS bindings with JSON.parse, then check what serde
// refuses (lib/api/config.cjs, serdeReading): this holds them together. Run by
// `bash scripts/wasm.sh test` beside differential.test.cjs.

const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { implementations } = require('./differential.cjs');

const ROOT = path.join(__dirname, '..', '..');
const PYTHON = process.env.RATEKEEPER_PYTHON || path.join(ROOT, '.venv', 'bin', 'python');
const RUNNER = path.join(ROOT, 'bindings-python', 'tests', 'differential_configs.py');

const BASE = [
  { name: 'a', rate: '10/second', burst: 5, by: ['user'] },
  { name: 'b', algorithm: 'fixed_window', rate: '100/minute', max_keys: 10, eviction: 'refuse' },
];
// Each written as JSON text writes it.
const NUMBERS = ['5', '5.0', '5e0', '5E0', '0.5e1', '50e-1', '-0', '-0.0', '0', '-5', '1e400', '-1e400', '1.5', '1e2', '100',
  '9007199254740991', '9007199254740992', '9007199254740993', '18446744073709551615', '18446744073709551616',
  '100000000000000000000', '-9223372036854775808', '-9223372036854775809', '1e19', '4294967296'];
const OTHERS = ['"5"', '""', '"x"', 'true', 'false', 'null', '[]', '[5]', '["user"]', '{}', '{"a": 1}', '{"a": {"b": []}}',
  '"\\ud800"', '"a\\udc00"', '"\\ud83d\\ude00"', '"token_bucket"', '"gcra"', '"day"', '"refuse"', '"evict"', '[null]',
  '["user", "user"]', '["\\ud800"]', '[""]', '"10/second"', '"1/second\\ud800"', '"Token_Bucket"'];
// Numbers about f64::MAX (1.7976931348623157e308, its shortest digits): first some serde_json reads
// (with an exponent, as a fraction, as digits past a u64's), then some it refuses as out of range that
// JSON.parse reads as f64::MAX (its exact digits too), then some both refuse.
const SERDE_FLOATS = ['1.7976931348623157e308', '17976931348623157e292', '0.17976931348623157e309', `1${'0'.repeat(308)}`,
  `18446744073709551615${'0'.repeat(288)}`, '99999999999999999999e288', `${'9'.repeat(400)}e-92`, '0e99999999999', '-1e-400',
  '1.7976931348623158e308', '-1.7976931348623158e308', '1.797693134862315807e308', '1797693134862315708e290', '0.17976931348623158e309',
  `17976931348623157${'0'.repeat(292)}`, `-17976931348623158${'0'.repeat(292)}`, `${2n ** 1024n - 2n ** 971n}`,
  '1.8e308', '1e309', '-1e309', `${'9'.repeat(400)}e-91`, '1e2147483648'];
const FIELDS = ['name', 'algorithm', 'rate', 'burst', 'calendar', 'by', 'max_keys', 'eviction', 'colour', '\\u0062urst'];

/** The texts: every field of the first limit set to every value, then fields given twice, then whole configurations. */
function texts() {
  const all = [];
  const rest = JSON.stringify(BASE[1]);
  for (const field of FIELDS) {
    const kept = JSON.stringify(Object.fromEntries(Object.entries(BASE[0]).filter(([k]) => k !== field)));
    for (const raw of [...NUMBERS, ...OTHERS]) all.push(`{"limits": [${kept.slice(0, -1)}, "${field}": ${raw}}, ${rest}]}`);
  }
  const pairs = [['1', '1'], ['"a"', '"b"'], ['"\\ud800"', '"a"'], ['"a"', '"\\ud800"'], ['2.0', '3'], ['3', '2.0']];
  for (const field of ['name', 'rate', 'burst', 'by', 'max_keys', 'algorithm', 'colour']) {
    for (const [a, b] of pairs) all.push(`{"limits": [{"name": "a", "rate": "1/second", "${field}": ${a}, "${field}": ${b}}]}`);
  }
  const limit = (fields) => `{"limits": [{"name": "a", "rate": "1/second", ${fields}}]}`;
  all.push(
    '{}', '{"limits": []}', '{"limits": [{}]}', '{"limits": null}', '{"limits": {}}', '{"limits": [], "limits": []}',
    '{"limits": [{"name": "a", "rate": "1/second"}], "limits": [{"name": "b", "rate": "1/second", "burst": 2.0}]}',
    '{"limits": [], "x": 1}', '{"\\ud800": 1}', '{"limits": ["\\ud800"]}', '{"limits": [], "extra": {"x": 1, "x": 2}}',
    limit('"x": {"y": 1, "y": 2}'), limit('"burst": {"x": 1, "x": 2}'), limit('"burst": 2.0, "colour": 1'),
    limit('"colour": 1, "burst": 2.0'), limit('"burst": 0, "burst": 1'), limit('"burst": 2.0, "eviction": 5'),
    '{"limits": [{"name": "a", "rate": "1/second", "burst": 0}, {"name": "b", "rate": "1/second", "burst": 1, "burst": 1}]}',
    '{"limits": [{"name": "a", "rate": "1/second", "burst": 2.0}, {"name": "\\ud800", "rate": "1/second"}]}',
    '{"limits": [{"name": "\\ud800", "name": "a", "rate": "1/second"}]}', limit('"by": [["\\ud800"]]'),
    limit('"by": {"\\ud800": 1}'), limit('"by": ["u", "\\ud800", 5]'), limit('"by": ["u", 5, "\\ud800"]'),
    limit('"by": ["\\ud800\\u0041", "\\n\\udc00"]'), limit('"x\\ud800": 1'),
    '{"limits": [{"name": "a", "rate": "1000000000/second", "burst": 9007199254740991}]}',
    '{"limits": [{"name": "a", "rate": "1000000000/second", "burst": 9007199254740993}]}',
    '{"limits": [{"name": "a", "rate": "1000000000/second", "burst": 18446744073709551615}]}',
    limit('"by": ["u"], "max_keys": 18446744073709551615'), limit('"by": ["u"], "max_keys": 18446744073709551614'),
    '{"limits": [{"name": "a", "rate": "1/second"}]} x', '{"limits": [', '[]', '"x"',
    '{"limits": [{"name": "a", "rate": "5/day", "calendar": "day", "algorithm": "fixed_window"}]}',
    limit('"calendar": null, "burst": null, "max_keys": null, "eviction": null'),
    // Digits past 2^53 of an earlier `limits`, or an earlier value of the field: not the last one's.
    ...['5', '{}', '"x"', 'null'].map((last) => `{"limits": [{"name": "a", "rate": "1/second", "by": ["u"], "max_keys": 18446744073709551615}], "limits": ${last}}`),
    limit('"by": ["u"], "max_keys": 18446744073709551615, "max_keys": "x"'), limit('"by": ["u"], "max_keys": 18446744073709551615, "max_keys": null'),
    // What serde_json does not read (a number out of range, 128 containers deep) is not JSON, before a lone surrogate.
    limit('"by": ["\\ud800"], "x": 1e400'), limit('"x": -1e400, "by": ["\\ud800"]'), `{"limits": [], "x": ${'1'.repeat(400)}}`,
    // The configuration, its limits and a limit hold 3 containers: 125 more is serde's 128. An object
    // given in JS nested deeper than 64 (62 more) was refused as not JSON, before its lone surrogate.
    ...[61, 62, 100, 124, 125].flatMap((n) => [
      limit(`"by": ${'['.repeat(n)}"\\ud800"${']'.repeat(n)}`),
      limit(`"by": ["\\ud800"], "x": ${'['.repeat(n)}${']'.repeat(n)}`),
      limit(`"x": ${'{"a": '.repeat(n)}"\\ud800"${'}'.repeat(n)}`),
    ]),
    // Numbers about f64's largest, which serde_json reads as its own float (the digits past a u64
    // dropped, times a power of ten: not always the nearest), some out of range where JSON.parse's is not.
    ...SERDE_FLOATS.flatMap((n) => [limit(`"by": ["\\ud800"], "x": ${n}`), limit(`"x": ${n}, "name": "\\ud800"`), limit(`"burst": ${n}`)]),
  );
  return all;
}

/** What `Policy` of `api` answers for `config`, as the Python runner records it. */
function outcome(api, config) {
  let policy;
  try {
    policy = new api.Policy(config);
  } catch (error) {
    return { code: error.code, type: error instanceof TypeError, message: error.message };
  }
  const limits = policy.limits.map(({ name, by }) => [name, [...by]]);
  const request = Object.fromEntries(limits.flatMap(([, by]) => by.map((field) => [field, 'v'])));
  return { limits, decided: policy.tryAcquire(request, 0, 0).limits.map((d) => d.limit) };
}

function runPython(all) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ratekeeper-configs-'));
  try {
    const file = path.join(dir, 'texts.json');
    fs.writeFileSync(file, JSON.stringify(all));
    return JSON.parse(execFileSync(PYTHON, [RUNNER, file], { maxBuffer: 1 << 28, encoding: 'utf8' }));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * What must agree: the limits read, or the error's code. (Messages are each
 * binding's words, but for a lone surrogate's, which both say alike; JS's
 * `invalid_config` is a TypeError, Python's a ValueError: README.md.)
 */
function agreed(record) {
  if (record.code === undefined) return record;
  return record.code === 'invalid_value' && / \(no lone surrogates\)$/.test(record.message)
    ? { code: record.code, message: record.message }
    : { code: record.code };
}

// Documented (bindings-node/README.md): a limit past 2^53 - 1 is refused in
// JS, whose numbers would not carry its decisions; Python takes up to 2^64 - 1.
const knownLimit = (js, py) => js.code === 'invalid_value' && js.message === '`limit` must be a safe integer (at most 2^53 - 1)' && py.decided?.some((n) => n > Number.MAX_SAFE_INTEGER);

// An object's numbers are JS numbers: JSON.parse made 5 of `5.0` and 0 of
// `-0`, and rounds digits past 2^53; and a mapping or an object repeats no
// key. Such texts are compared as text only.
const plainObject = (text, py) => !py.repeats && !/\d[.eE]|-0\b|\d{16,}/.test(text);

test('napi, wasm and Python read every configuration alike, as text and as an object', (t) => {
  const all = texts();
  const { napi, wasm } = implementations();
  const python = runPython(all);
  const differ = [];
  let compared = 0;
  all.forEach((text, i) => {
    const py = python[i];
    const ways = [['text', text, py.text]];
    if (py.mapping !== undefined && plainObject(text, py)) ways.push(['object', JSON.parse(text), py.mapping]);
    for (const [way, config, expected] of ways) {
      const n = outcome(napi, config);
      const w = outcome(wasm, config);
      compared++;
      if (JSON.stringify(n) !== JSON.stringify(w)) differ.push({ text, way, napi: n, wasm: w });
      if (knownLimit(n, expected)) continue;
      if (JSON.stringify(agreed(n)) !== JSON.stringify(agreed(expected))) differ.push({ text, way, js: n, python: expected });
    }
  });
  t.diagnostic(`${all.length} configurations, ${compared} readings`);
  assert.deepStrictEqual(differ.slice(0, 5), [], `${differ.length} readings differ`);
});
