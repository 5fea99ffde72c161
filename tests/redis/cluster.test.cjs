'use strict';
// Redis Cluster through each cluster client (ioredis's Cluster, node-redis's
// createCluster v4, v5 and v6): a policy's keys share one hash tag (one slot),
// the script is loaded on the node of that slot, and a hot key batches there
// too. Needs RATEKEEPER_REDIS_CLUSTER_URL (a node of a local cluster: bash
// scripts/redis.sh cluster start); fails without it.
const test = require('node:test');
const assert = require('node:assert/strict');
const { rk, rkRedis, prefix } = require('./helpers.cjs');

const CLUSTER_URL = process.env.RATEKEEPER_REDIS_CLUSTER_URL;
// Every call must be answered by the store: within the default
// commandTimeoutMs (1 s), a stall of the machine had onError answer the
// first call on a node, which loads the script there (fromStore false).
const ANSWERED = { commandTimeoutMs: 60_000 };

/**
 * A cluster client, not yet connected: `connect()` resolves to every master
 * node's own client (to flush its scripts), `close()` closes every socket it
 * opened. Made before connecting, so that the test closes it in every path:
 * connected outside the test's `try`, a client whose masters could not be
 * reached was dropped unclosed, its sockets left open (the test process
 * never ending), and an ioredis Cluster that never got ready was waited for
 * for ever, reconnecting.
 */
const CLUSTERS = {
  'ioredis Cluster': (hostname, port) => {
    const { Cluster } = require('ioredis');
    // lazyConnect: connect() rejects when no startup node answers, where
    // waiting for 'ready' waited for ever.
    const cluster = new Cluster([{ host: hostname, port }], { enableOfflineQueue: true, lazyConnect: true });
    cluster.on('error', () => {});
    return {
      cluster,
      // Its nodes are known once it is ready.
      connect: async () => {
        await cluster.connect();
        return cluster.nodes('master');
      },
      close: async () => {
        // quit resolves on the nodes' replies, before their sockets close
        // (the server closes them): each node's 'end' says its socket is
        // closed for good.
        const ended = cluster.nodes().filter((node) => node.status !== 'end').map((node) => new Promise((resolve) => node.once('end', resolve)));
        await cluster.quit();
        await Promise.all(ended);
      },
    };
  },
  ...Object.fromEntries(
    [
      ['node-redis createCluster', 'redis'],
      ['node-redis 4 createCluster', 'redis4'],
      ['node-redis 5 createCluster', 'redis5'],
    ].map(([name, module]) => [
      name,
      (hostname, port) => {
        const { createCluster } = require(module);
        const cluster = createCluster({ rootNodes: [{ url: `redis://${hostname}:${port}` }] });
        cluster.on('error', () => {});
        return {
          cluster,
          connect: async () => {
            await cluster.connect();
            const masters = await Promise.all(cluster.masters.map((node) => cluster.nodeClient(node)));
            return masters.map((m) => ({ script: (sub) => m.sendCommand(['SCRIPT', sub]) }));
          },
          // A connect that failed closed what it opened itself.
          close: async () => {
            if (cluster.isOpen) await cluster.quit();
          },
        };
      },
    ]),
  ),
};

for (const [name, client] of Object.entries(CLUSTERS)) {
  test(`${name}: policies and hot keys on a 3-node cluster`, async () => {
    assert.ok(CLUSTER_URL, 'RATEKEEPER_REDIS_CLUSTER_URL is not set (bash scripts/redis.sh cluster start; redis://127.0.0.1:7391/0)');
    const { hostname, port } = new URL(CLUSTER_URL);
    const { cluster, connect, close } = client(hostname, Number(port));
    try {
      const masters = await connect();
      assert.equal(masters.length, 3);
      // Flush the scripts of every node: each call must load the script where its slot lives.
      await Promise.all(masters.map((node) => node.script('FLUSH')));
      const config = {
        limits: [
          { name: 'user', rate: '3/minute', by: ['user'] },
          { name: 'route', rate: '2/minute', algorithm: 'fixed_window', by: ['user', 'route'] },
        ],
      };
      const policy = new rkRedis.RedisPolicy(cluster, config, { ...ANSWERED, prefix: prefix('cluster') });
      const local = new rk.Policy(config);
      const T0 = 2_000_000_000_000;
      // Users of bytes that are not UTF-8 too: keys (and hash tags) of raw bytes, on the nodes of their slots.
      const bytes = Array.from({ length: 5 }, (_, i) => new Uint8Array([0xff, 0x80 + i]));
      for (const user of ['u1', 'u2', 'u3', 'u4', 'u5', ...bytes]) {
        for (const route of ['/a', '/a', '/a', '/b']) {
          const { fromStore, ...d } = await policy.tryAcquire({ user, route }, 1, T0);
          assert.equal(fromStore, true);
          assert.deepEqual(d, local.tryAcquire({ user, route }, 1, T0));
        }
      }
      // A global limit puts the whole policy on the slot of its prefix. (Caller
      // time: on the server's clock, a burst could straddle a window's end.)
      const global = new rkRedis.RedisPolicy(cluster, '5/minute;10/hour', { ...ANSWERED, prefix: prefix('cluster-global'), algorithm: 'fixed_window', clock: () => T0 });
      const limiter = new rkRedis.RedisLimiter(cluster, new rk.FixedWindow({ limit: 50, windowMs: 3_600_000 }), { ...ANSWERED, prefix: prefix('cluster-hot'), clock: () => T0 });
      const [globals, hot] = await Promise.all([
        Promise.all(Array.from({ length: 8 }, () => global.tryAcquire())),
        Promise.all(Array.from({ length: 128 }, () => limiter.tryAcquire('hot'))),
      ]);
      assert.equal(globals.filter((d) => d.allowed).length, 5);
      assert.equal(hot.filter((d) => d.allowed).length, 50);
      const hotBytes = await Promise.all(Array.from({ length: 128 }, () => limiter.tryAcquire(new Uint8Array([0xfe, 0x68]))));
      assert.equal(hotBytes.filter((d) => d.allowed).length, 50, 'one hot key of bytes');
      assert.ok([...globals, ...hot, ...hotBytes].every((d) => d.fromStore));
    } finally {
      await close();
    }
  });
}
