'use strict';
// The ```js blocks of the project's markdown files, run as the tests of what
// they say (docs.test.cjs here; the Redis ones in tests/redis/docs.test.cjs).
//
// Each block runs as written, in an async function of its own (an ES
// module's top-level await), its `import`s and `require`s given the modules
// the test names. A value the text states in a comment is checked against
// what the line gives:
//
// - `expression; // VALUE`, or `// VALUE` on the lines right under it, where
//   VALUE is a literal (strings, numbers, true, false, null, undefined,
//   arrays, objects), alone or before a ': ' that opens prose; for
//   `const name = ...; // VALUE`, the name's value.
//
// Any other comment is prose, read by people only. A block is left out by a
// marker on the line before its fence: `<!-- example: needs Redis ... -->`
// (run by the Redis suite) or `<!-- example: not run (why) -->`.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const vm = require('node:vm');

const ROOT = path.join(__dirname, '..', '..');

const BLOCK = /^(?:<!-- example: ([^\n]*?) -->\n)?```([a-z]*)\n([\s\S]*?)^```$/gm;

/** The fenced blocks of `relative` (a path from the repository root), in order; only those of `language` when given. */
function blocks(relative, language) {
  const text = fs.readFileSync(path.join(ROOT, relative), 'utf8');
  const found = [];
  for (const match of text.matchAll(BLOCK)) {
    const [, marker, lang, source] = match;
    const start = match.index + match[0].indexOf('\n') + 1;
    const line = text.slice(0, start).split('\n').length;
    if (language === undefined || lang === language) {
      found.push({ file: relative, line, language: lang, source, marker: marker ?? null, where: `${relative}:${line}` });
    }
  }
  return found;
}

const needsRedis = (block) => block.marker !== null && block.marker.startsWith('needs Redis');
const notRun = (block) => block.marker !== null && /^not run \(.+\)$/.test(block.marker);

/** The blocks of `relative` in `language` that run without Redis; any other marker is refused. */
function runnable(relative, language = 'js') {
  const every = blocks(relative, language);
  assert.ok(every.length > 0, `${relative} has no ${language} example`);
  for (const block of every) {
    assert.ok(block.marker === null || needsRedis(block) || notRun(block), `${block.where}: marker ${block.marker}`);
  }
  return every.filter((block) => block.marker === null);
}

const WORDS = new Set(['true', 'false', 'null', 'undefined', 'Infinity', 'NaN']);

/** Whether `text` is a JS literal: nothing in it but values, and names only as keys. */
function isLiteral(text) {
  if (text === '') return false;
  const token = /\s+|'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|-?\d[\d_]*(?:\.\d+)?(?:e[+-]?\d+)?|[A-Za-z_$][\w$]*|[{}[\],:]/y;
  for (let at = 0; at < text.length; ) {
    token.lastIndex = at;
    const match = token.exec(text);
    if (match === null) return false;
    at = token.lastIndex;
    if (/^[A-Za-z_$]/.test(match[0]) && !WORDS.has(match[0]) && !/^\s*:/.test(text.slice(at))) return false;
  }
  try {
    new Function(`return (${text});`);
    return true;
  } catch {
    return false;
  }
}

/** The value a comment states, if it states one: all of it, or what comes before any ': '. */
function stated(comment) {
  const ends = [comment.length];
  for (let at = comment.indexOf(': '); at !== -1; at = comment.indexOf(': ', at + 1)) ends.push(at);
  for (const end of ends) {
    const candidate = comment.slice(0, end).trim();
    if (isLiteral(candidate)) return { text: candidate, value: new Function(`return (${candidate});`)() };
  }
  return null;
}

/** A line split into its code and its `//` comment (outside strings and templates). */
function split(line) {
  let quote = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote) {
      if (c === '\\') i++;
      else if (c === quote) quote = null;
    } else if (c === "'" || c === '"' || c === '`') {
      quote = c;
    } else if (c === '/' && line[i + 1] === '/') {
      return { code: line.slice(0, i), comment: line.slice(i + 2).trim() };
    }
  }
  return { code: line, comment: null };
}

function parses(code) {
  try {
    new (async () => {}).constructor(code);
    return true;
  } catch {
    return false;
  }
}

/**
 * The block's source with each line a comment states a value for followed
 * by its check (on the same line, so that line numbers stay the file's);
 * and the claims, `{ where, code, comment }`.
 */
function withChecks(block) {
  const lines = block.source.split('\n');
  const claims = [];
  const out = lines.map((line, i) => {
    const { code, comment } = split(line);
    if (code.trim() === '') return line;
    const comments = comment === null ? [] : [comment];
    for (let next = i + 1; next < lines.length; next++) {
      const under = split(lines[next]);
      if (under.code.trim() !== '' || under.comment === null) break;
      comments.push(under.comment);
    }
    const values = comments.map(stated).filter((value) => value !== null);
    if (values.length === 0) return line;
    const where = `${block.file}:${block.line + i}`;
    const statement = code.trim().replace(/;$/, '');
    assert.ok(parses(statement), `${where}: a value is stated for \`${statement}\`, which is no statement of its own`);
    const declared = /^(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=/.exec(statement);
    const checks = values.map((value) => {
      claims.push({ where, code: statement, comment: value.text });
      const args = [JSON.stringify(value.text), JSON.stringify(where), JSON.stringify(statement)].join(', ');
      return declared ? `__check(${declared[1]}, ${args});` : `__check((${statement}), ${args});`;
    });
    return declared ? `${statement}; ${checks.join(' ')}` : checks.join(' ');
  });
  return { source: out.join('\n'), claims };
}

function check(value, text, where, statement) {
  assert.deepStrictEqual(value, new Function(`return (${text});`)(), `${where}: \`${statement}\` is not what the text says, ${text}`);
}

/** `import ... from 'name';` lines as declarations of what `load(name)` gives. */
function withoutImports(block, source) {
  return source
    .split('\n')
    .map((line, i) => {
      if (!/^\s*import\s/.test(line)) return line;
      const match = /^\s*import\s+(?:([A-Za-z_$][\w$]*)\s*,?\s*)?(?:\{([^}]*)\}|\*\s+as\s+([A-Za-z_$][\w$]*))?\s*from\s+(['"])([^'"]+)\4;?(.*)$/.exec(line);
      assert.ok(match, `${block.file}:${block.line + i}: an import this test does not read: ${line}`);
      const [, defaultName, named, namespace, , from, rest] = match;
      const module = `__load(${JSON.stringify(from)})`;
      const parts = [];
      if (defaultName) parts.push(`const ${defaultName} = __default(${module});`);
      if (named) parts.push(`const { ${named.replace(/\bas\b/g, ':')} } = ${module};`);
      if (namespace) parts.push(`const ${namespace} = ${module};`);
      return parts.join(' ') + rest;
    })
    .join('\n');
}

/**
 * Runs `block` with `modules` (name to module: what its imports and
 * `require`s get) and `names` (what the text leaves to the reader, by name);
 * resolves to the claims it checked.
 */
async function run(block, { modules = {}, names = {} } = {}) {
  const { source, claims } = withChecks(block);
  const body = withoutImports(block, source);
  const load = (name) => {
    assert.ok(Object.hasOwn(modules, name), `${block.where}: the test gives no module ${name}`);
    return modules[name];
  };
  // An ES module's default import: `default` where a CommonJS module sets it, else the module.
  const defaultOf = (module) => (module && module.__esModule && 'default' in module ? module.default : module);
  const params = ['__load', '__default', '__check', 'require', ...Object.keys(names)];
  // Line 1 is the wrapper; the example's first line is then line `block.line` of its file.
  const code = `return (async () => {{\n${body}\n}})();`;
  const fn = vm.compileFunction(code, params, { filename: path.join(ROOT, block.file), lineOffset: block.line - 2 });
  await fn(load, defaultOf, check, load, ...Object.values(names));
  return claims;
}

module.exports = { ROOT, blocks, runnable, needsRedis, notRun, run, stated, isLiteral };
