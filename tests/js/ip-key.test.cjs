'use strict';
// The key of a client's address (ipKey, and the server helpers' default key
// and fields, which key by it): an IPv6 client by its network, /56 unless
// `ipv6Subnet` says otherwise. The cases are the shared vectors of
// tests/vectors/server/ip_keys.json, written from Python's ipaddress and
// read by the ASGI middleware's tests too (test_asgi.py): a client has one
// key in both bindings. Each address was a key of its own, so that an IPv6
// client, who may take a new address within its network at will, got a
// fresh limit with each.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const { ipKey, middleware, fastifyHook, FixedWindow, KeyedLimiter, Policy } = require('./impl.cjs');
const { assertLimiterError } = require('./helpers.cjs');

const DIR = path.join(__dirname, '..', 'vectors', 'server');
const { scenarios } = JSON.parse(fs.readFileSync(path.join(DIR, 'ip_keys.json'), 'utf8'));
// The JS spelling of Python's None: whole addresses.
const subnetOption = (subnet) => (subnet === null ? false : subnet);

describe('the shared vectors of tests/vectors/server', () => {
  it('are all there, as index.json counts them', () => {
    const index = JSON.parse(fs.readFileSync(path.join(DIR, 'index.json'), 'utf8'));
    assert.deepStrictEqual(index, { files: { 'ip_keys.json': scenarios.length } });
    // Every kind the parser must tell: each changes some key, or must not.
    assert.ok(scenarios.some(({ address, key }) => address.includes('%') && key !== address), 'a zone id');
    assert.ok(scenarios.some(({ address, key }) => address.startsWith('::ffff:') && !key.includes(':')), 'a mapped IPv4 address');
    assert.ok(scenarios.some(({ address, key }) => address.includes(':') && key === address), 'something that is no IPv6 address');
  });

  it('ipKey(address, ipv6Subnet) is the key Python writes, for each', () => {
    const wrong = scenarios
      .map(({ name, address, ipv6_subnet: subnet, key }) => ({ name, want: key, got: ipKey(address, subnetOption(subnet)) }))
      .filter(({ want, got }) => want !== got);
    assert.deepStrictEqual(wrong, []);
  });

  it('the default is a /56', () => {
    for (const { address, ipv6_subnet: subnet, key } of scenarios.filter((s) => s.ipv6_subnet === 56)) {
      assert.equal(ipKey(address), key, address);
      assert.equal(ipKey(address, undefined), key, address);
    }
    assert.equal(ipKey('2001:db8:1234:5678::1'), '2001:db8:1234:5600::/56');
  });

  for (const helper of [middleware, fastifyHook]) {
    it(`${helper.name}: the default key and fields are each address's ipKey`, () => {
      // A clock standing still: the counts below are read before and after
      // each decision (a cost of 0 reads the clock too), and on the runtime's
      // clock the policy's bucket, one unit back every 60 ms, refilled
      // between the two whenever the machine paused the test that long.
      const clock = () => 0;
      for (const subnet of new Set(scenarios.map((s) => s.ipv6_subnet))) {
        const rows = scenarios.filter((s) => s.ipv6_subnet === subnet && s.address !== '');
        const option = subnet === 56 ? {} : { ipv6Subnet: subnetOption(subnet) };
        const limiter = new KeyedLimiter(new FixedWindow({ limit: 1000, windowMs: 60_000, clock }));
        const { decide } = helper({ limiter, ...option });
        const policy = Policy.fromRates('1000/minute', { by: ['client'], clock });
        const byFields = helper({ limiter: policy, ...option });
        for (const { address, key } of rows) {
          // Express's and Fastify's request.ip, or a plain server's socket.
          const before = limiter.peek(key, 0).remaining;
          decide({ ip: address });
          decide({ socket: { remoteAddress: address } });
          assert.equal(limiter.peek(key, 0).remaining, before - 2, `${address}, ${subnet}`);
          const left = policy.peek({ client: key }, 0).remaining;
          byFields.decide({ ip: address, method: 'GET', url: '/' });
          assert.equal(policy.peek({ client: key }, 0).remaining, left - 1, `${address}, ${subnet}`);
        }
        assert.equal(limiter.size, new Set(rows.map((row) => row.key)).size, `${subnet}`);
      }
    });
  }
});

describe('ipKey and ipv6Subnet refuse what is no prefix length', () => {
  it('ipKey: an integer from 1 to 128 or false; a string address', () => {
    for (const bad of [0, 129, -56, 56.5, NaN, Infinity]) {
      const error = assertLimiterError(() => ipKey('::1', bad), 'invalid_value', 'ipv6Subnet', String(bad));
      assert.equal(error.message, `\`ipv6Subnet\` must be a prefix length from 1 to 128, not ${bad}`);
    }
    for (const [bad, type] of [[true, 'boolean'], ['56', 'string'], [null, 'null'], [56n, 'bigint']]) {
      const error = assertLimiterError(() => ipKey('::1', bad), 'invalid_type', 'ipv6Subnet', String(bad));
      assert.equal(error.message, `\`ipv6Subnet\` must be a number or false, not ${type}`);
    }
    for (const [bad, type] of [[undefined, 'undefined'], [null, 'null'], [42, 'number'], [new Uint8Array(2), 'object']]) {
      const error = assertLimiterError(() => ipKey(bad), 'invalid_type', 'address', String(bad));
      assert.equal(error.message, `\`address\` must be a string, not ${type}`);
    }
    assert.equal(ipKey('::1', 1), '::/1');
    assert.equal(ipKey('::1', 128), '::1/128');
    assert.equal(ipKey('::1', false), '::1');
  });

  for (const helper of [middleware, fastifyHook]) {
    it(`${helper.name}: the same errors, and none where no default reads the address`, () => {
      // A clock standing still: on the runtime's, a second's end between the
      // decision and the count read below gave the unit back.
      const limiter = new KeyedLimiter(new FixedWindow({ limit: 1, windowMs: 1000, clock: () => 0 }));
      const policy = Policy.fromRates('1/second', { by: ['client'] });
      for (const given of [limiter, policy]) {
        assertLimiterError(() => helper({ limiter: given, ipv6Subnet: 0 }), 'invalid_value', 'ipv6Subnet');
        assertLimiterError(() => helper({ limiter: given, ipv6Subnet: true }), 'invalid_type', 'ipv6Subnet');
        assertLimiterError(() => helper({ limiter: given, ipv6Subnet: null }), 'invalid_type', 'ipv6Subnet');
        for (const fine of [1, 48, 64, 128, false]) helper({ limiter: given, ipv6Subnet: fine });
      }
      // Beside a key or fields of one's own, or one limiter for all, it would
      // be ignored: refused, as `key` beside a Policy is.
      assert.throws(
        () => helper({ limiter, key: (request) => request.ip, ipv6Subnet: 64 }),
        /^TypeError: `ipv6Subnet` is for the default `key`: with `key` of your own, apply ipKey\(address, ipv6Subnet\) in it$/,
      );
      assertLimiterError(() => helper({ limiter, key: (request) => request.ip, ipv6Subnet: false }), 'invalid_type', 'ipv6Subnet');
      assert.throws(
        () => helper({ limiter: policy, fields: (request) => ({ client: request.ip }), ipv6Subnet: 56 }),
        /^TypeError: `ipv6Subnet` is for the default `fields`: with `fields` of your own, apply ipKey\(address, ipv6Subnet\) in it$/,
      );
      assert.throws(
        () => helper({ limiter: new FixedWindow({ limit: 1, windowMs: 1000 }), ipv6Subnet: 56 }),
        /^TypeError: `ipv6Subnet` is for a KeyedLimiter or a Policy: one limiter that every request shares reads no address$/,
      );
      // A key of one's own keys by ipKey itself.
      const own = helper({ limiter, key: (request) => ipKey(request.headers['x-client-ip'], 64) });
      own.decide({ headers: { 'x-client-ip': '2001:db8:0:1::5' } });
      assert.equal(limiter.peek('2001:db8:0:1::/64', 0).remaining, 0);
    });
  }
});
