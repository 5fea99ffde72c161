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

/** A connected cluster client, and every master node's own client (to flush its scripts). */
const CLUSTERS = {
  'ioredis Cluster': async (hostname, port) => {
    const { Cluster } = require('ioredis');
    const cluster = new Cluster([{ host: hostname, port }], { enableOfflineQueue: true });
    cluster.on('error', () => {});
    // Its nodes are known once it is ready.
    await new Promise((resolve) => cluster.once('ready', resolve));
    return { cluster, masters: cluster.nodes('master'), close: () => cluster.quit() };
  },
  ...Object.fromEntries(
    [
      ['node-redis createCluster', 'redis'],
      ['node-redis 4 createCluster', 'redis4'],
      ['node-redis 5 createCluster', 'redis5'],
    ].map(([name, module]) => [
      name,
      async (hostname, port) => {
        const { createCluster } = require(module);
        const cluster = createCluster({ rootNodes: [{ url: `redis://${hostname}:${port}` }] });
        cluster.on('error', () => {});
        await cluster.connect();
        const masters = await Promise.all(cluster.masters.map((node) => cluster.nodeClient(node)));
        return { cluster, masters: masters.map((m) => ({ script: (sub) => m.sendCommand(['SCRIPT', sub]) })), close: () => cluster.quit() };
      },
    ]),
  ),
};

for (const [name, connect] of Object.entries(CLUSTERS)) {
  test(`${name}: policies and hot keys on a 3-node cluster`, async () => {
    assert.ok(CLUSTER_URL, 'RATEKEEPER_REDIS_CLUSTER_URL is not set (bash scripts/redis.sh cluster start; redis://127.0.0.1:7391/0)');
    const { hostname, port } = new URL(CLUSTER_URL);
    const { cluster, masters, close } = await connect(hostname, Number(port));
    try {
      assert.equal(masters.length, 3);
      // Flush the scripts of every node: each call must load the script where its slot lives.
      await Promise.all(masters.map((node) => node.script('FLUSH')));
      const config = {
        limits: [
          { name: 'user', rate: '3/minute', by: ['user'] },
          { name: 'route', rate: '2/minute', algorithm: 'fixed_window', by: ['user', 'route'] },
        ],
      };
      const policy = new rkRedis.RedisPolicy(cluster, config, { prefix: prefix('cluster') });
      const local = new rk.Policy(config);
      const T0 = 2_000_000_000_000;
      for (const user of ['u1', 'u2', 'u3', 'u4', 'u5']) {
        for (const route of ['/a', '/a', '/a', '/b']) {
          const { fromStore, ...d } = await policy.tryAcquire({ user, route }, 1, T0);
          assert.equal(fromStore, true);
          assert.deepEqual(d, local.tryAcquire({ user, route }, 1, T0));
        }
      }
      // A global limit puts the whole policy on the slot of its prefix. (Caller
      // time: on the server's clock, a burst could straddle a window's end.)
      const global = new rkRedis.RedisPolicy(cluster, '5/minute;10/hour', { prefix: prefix('cluster-global'), algorithm: 'fixed_window', clock: () => T0 });
      const limiter = new rkRedis.RedisLimiter(cluster, new rk.FixedWindow({ limit: 50, windowMs: 3_600_000 }), { prefix: prefix('cluster-hot'), clock: () => T0 });
      const [globals, hot] = await Promise.all([
        Promise.all(Array.from({ length: 8 }, () => global.tryAcquire())),
        Promise.all(Array.from({ length: 128 }, () => limiter.tryAcquire('hot'))),
      ]);
      assert.equal(globals.filter((d) => d.allowed).length, 5);
      assert.equal(hot.filter((d) => d.allowed).length, 50);
      assert.ok([...globals, ...hot].every((d) => d.fromStore));
    } finally {
      await close();
    }
  });
}
