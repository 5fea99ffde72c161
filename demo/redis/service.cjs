'use strict';
// The demo's Node service: node:http limited by ratekeeper/redis's RedisPolicy,
// the same limits (policy.json) in the same Redis (RATEKEEPER_REDIS_URL, key
// prefix DEMO_PREFIX) as the Python service (service.py).
//   node service.cjs <port>      prints "listening <port>" when ready
const http = require('node:http');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '../..');
const { RedisPolicy } = require(path.join(ROOT, 'bindings-node/lib/redis.cjs'));
const Redis = require(path.join(ROOT, 'tests/redis/node_modules/ioredis'));
const config = require('./policy.json');

async function main() {
  const client = new Redis(process.env.RATEKEEPER_REDIS_URL, { enableOfflineQueue: false, lazyConnect: true });
  client.on('error', () => {});
  await client.connect();
  const policy = new RedisPolicy(client, config, { prefix: process.env.DEMO_PREFIX ?? 'ratekeeper-demo:' });
  const server = http.createServer(async (req, res) => {
    const request = {
      client: req.headers['x-client'] ?? 'anonymous',
      method: req.method,
      endpoint: new URL(req.url, 'http://localhost').pathname,
    };
    const d = await policy.tryAcquire(request);
    res.writeHead(d.allowed ? 200 : 429, { ...policy.headers(d), 'content-type': 'application/json' });
    res.end(JSON.stringify({ service: 'node', allowed: d.allowed, deniedBy: d.deniedBy, fromStore: d.fromStore }));
  });
  server.listen(Number(process.argv[2] ?? 0), '127.0.0.1', () => console.log(`listening ${server.address().port}`));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
