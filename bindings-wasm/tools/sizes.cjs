#!/usr/bin/env node
// Where the bytes of the .wasm go (`bash scripts/wasm.sh sizes`, which builds
// the module as `build` does but keeps its name section): function bodies by
// size, raw and what gzip would save without each; then the code the
// decisions reach against the code only the rest of the API reaches, and
// what each export and each group of exports alone holds.
//
// "gzip without it" is the compressed code and data with that part left
// out, against all of them: parts that repeat others compress well, so a
// copy removed saves little (see bindings-wasm/README.md, issue 7).
//
// usage: node sizes.cjs MODULE.wasm MODULE.wat [ROWS]
// (MODULE.wat: `wasm-dis` of the same module, for the calls.)
'use strict';

const fs = require('node:fs');
const zlib = require('node:zlib');

const [wasmPath, watPath, rowsArg] = process.argv.slice(2);
if (!wasmPath || !watPath) {
    console.error('usage: node sizes.cjs MODULE.wasm MODULE.wat [ROWS]');
    process.exit(2);
}
const ROWS = Number(rowsArg || 40);

// --- the binary: function bodies, their names, the data segments ---------
const bin = fs.readFileSync(wasmPath);
let pos = 8;
function leb() {
    let result = 0;
    let shift = 0;
    for (;;) {
        const byte = bin[pos++];
        result += (byte & 0x7f) * 2 ** shift;
        shift += 7;
        if (!(byte & 0x80)) return result;
    }
}
function str() {
    const len = leb();
    const s = bin.toString('utf8', pos, pos + len);
    pos += len;
    return s;
}
function skipConstExpr() {
    while (bin[pos] !== 0x0b) pos++;
    pos++;
}
let imported = 0;
const bodies = []; // [index, bytes]
const names = new Map();
const data = [];
while (pos < bin.length) {
    const id = bin[pos++];
    const size = leb();
    const end = pos + size;
    if (id === 2) {
        for (let n = leb(); n > 0; n--) {
            str();
            str();
            const kind = bin[pos++];
            if (kind === 0) {
                leb();
                imported++;
            } else if (kind === 1) {
                pos++;
                const flags = leb();
                leb();
                if (flags & 1) leb();
            } else if (kind === 2) {
                const flags = leb();
                leb();
                if (flags & 1) leb();
            } else {
                pos += 2;
            }
        }
    } else if (id === 10) {
        const count = leb();
        for (let i = 0; i < count; i++) {
            const start = pos;
            const len = leb();
            const bodyEnd = pos + len;
            bodies.push([imported + i, bin.subarray(start, bodyEnd)]);
            pos = bodyEnd;
        }
    } else if (id === 11) {
        for (let n = leb(); n > 0; n--) {
            const flags = leb();
            if (flags === 2) leb();
            if (flags !== 1) skipConstExpr();
            const len = leb();
            data.push(bin.subarray(pos, pos + len));
            pos += len;
        }
    } else if (id === 0 && str() === 'name') {
        while (pos < end) {
            const sub = bin[pos++];
            const len = leb();
            const subEnd = pos + len;
            if (sub === 1) {
                for (let n = leb(); n > 0; n--) {
                    const index = leb();
                    names.set(index, str());
                }
            }
            pos = subEnd;
        }
    }
    pos = end;
}
const fns = bodies.map(([index, bytes]) => ({ name: names.get(index) ?? `f${index}`, bytes }));
const byName = new Map(fns.map((f) => [f.name, f]));
const dataBytes = Buffer.concat(data);

const gz = (parts) => zlib.deflateRawSync(Buffer.concat(parts), { level: 9 }).length;
const all = gz([...fns.map((f) => f.bytes), dataBytes]);
// What gzip saves without the functions in `left`.
const without = (left) => all - gz([...fns.filter((f) => !left.has(f.name)).map((f) => f.bytes), dataBytes]);
const raw = (set) => [...set].reduce((sum, n) => sum + (byName.get(n)?.bytes.length ?? 0), 0);

// --- the text: calls, the table, the exports --------------------------------
const wat = fs.readFileSync(watPath, 'utf8');
const ident = String.raw`\$("[^"]*"|[^\s()]+)`;
const unquote = (s) => (s.startsWith('"') ? s.slice(1, -1) : s);
const exported = new Map();
for (const m of wat.matchAll(new RegExp(String.raw`\(export "([^"]+)" \(func ${ident}\)\)`, 'g'))) {
    exported.set(m[1], unquote(m[2]));
}
const table = new Set();
for (const line of wat.split('\n').filter((l) => l.startsWith(' (elem '))) {
    for (const m of line.matchAll(new RegExp(ident, 'g'))) table.add(unquote(m[1]));
}
const calls = new Map();
const indirect = new Set();
let current = null;
for (const line of wat.split('\n')) {
    const head = line.match(new RegExp(String.raw`^ \(func ${ident}`));
    if (head) {
        current = unquote(head[1]);
        calls.set(current, new Set());
        continue;
    }
    if (!current) continue;
    if (line.includes('call_indirect')) indirect.add(current);
    for (const m of line.matchAll(new RegExp(String.raw`(?:call|ref\.func) ${ident}`, 'g'))) {
        calls.get(current).add(unquote(m[1]));
    }
}
function reach(roots) {
    const seen = new Set();
    const stack = [...roots];
    while (stack.length) {
        const f = stack.pop();
        if (seen.has(f) || !calls.has(f)) continue;
        seen.add(f);
        stack.push(...calls.get(f));
        if (indirect.has(f)) stack.push(...table);
    }
    return seen;
}

// --- report ------------------------------------------------------------------
const kb = (n) => (n / 1000).toFixed(1).padStart(6);
const short = (name) => name.replace(/\[[0-9a-f]+\]/g, '').slice(0, 110);
console.log(`code and data: ${bin.length} bytes of module; code ${raw(new Set(byName.keys()))}, data ${dataBytes.length}; gzip of code and data ${all}`);

console.log(`\nfunction bodies, largest first (KB raw, KB gzip saves without it):`);
for (const f of [...fns].sort((a, b) => b.bytes.length - a.bytes.length).slice(0, ROWS)) {
    console.log(`${kb(f.bytes.length)} ${kb(without(new Set([f.name])))}  ${short(f.name)}`);
}

// The decisions and what they read or throw through: every call the JS
// layer makes per request.
const HOT = ['tryAcquire', 'peek', 'reserve', 'keyedOp', 'keyedOpBytes', 'keyedOpScratch', 'policyOp',
    'policyOpScratch', 'takeError', 'scratch', 'keyScratch', 'fieldScratch', 'policyDetails', 'keyedLen'];
const hot = reach(HOT.filter((e) => exported.has(e)).map((e) => exported.get(e)));
const cold = new Set([...byName.keys()].filter((n) => !hot.has(n)));
console.log(`\nreached from the decisions (${HOT.join(', ')}): ${kb(raw(hot))} KB raw`);
console.log(`reached only from the rest of the API: ${kb(raw(cold))} KB raw, ${kb(without(cold))} KB gzip saves without it`);
console.log(`data (messages, names): ${kb(dataBytes.length)} KB raw, ${kb(all - gz(fns.map((f) => f.bytes)))} KB gzip saves without it`);

const reached = new Map([...exported].filter(([, f]) => calls.has(f)).map(([e, f]) => [e, reach([f])]));
function alone(group) {
    const mine = new Set(group.flatMap((e) => [...(reached.get(e) ?? [])]));
    for (const [e, r] of reached) if (!group.includes(e)) for (const n of r) mine.delete(n);
    return mine;
}
const GROUPS = {
    'policy configuration (policyFromConfig)': ['policyFromConfig'],
    'constructors (8 exports)': ['tokenBucket', 'tokenBucketFromBandwidths', 'gcra', 'gcraPerPeriod', 'leakyBucket',
        'slidingWindowLog', 'slidingWindowCounter', 'fixedWindow'],
    'building policies (policyFromRates, policyAdd, policyNew, fitPolicy)': ['policyFromRates', 'policyAdd', 'policyNew', 'fitPolicy'],
    'state codec (toBytes, restore)': ['toBytes', 'restore'],
    'reconfigure': ['reconfigure'],
    'refunds (refund, keyedRefund, policyRefund)': ['refund', 'keyedRefund', 'policyRefund'],
    'configuration read back (config, policyLimits, keyedPrototype)': ['config', 'policyLimits', 'keyedPrototype'],
    'headers (headers, policyHeaders, checkName)': ['headers', 'policyHeaders', 'checkName'],
    'reset and reclaim (keyed, policy)': ['keyedReset', 'policyReset', 'keyedReclaim', 'policyReclaim'],
    'keyedTryAcquireBatch': ['keyedTryAcquireBatch'],
};
console.log(`\ngroups of exports: code no other export reaches (KB raw, KB gzip saves without it):`);
for (const [label, group] of Object.entries(GROUPS)) {
    const mine = alone(group);
    console.log(`${kb(raw(mine))} ${kb(without(mine))}  ${label}`);
}
