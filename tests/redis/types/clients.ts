// The real clients' own types are accepted as RedisClient: tsc -p tests/redis/types/tsconfig.clients.json
import { createClient, createCluster } from 'redis'
import Redis, { Cluster } from 'ioredis'
import { Gcra } from 'ratekeeper'
import { RedisLimiter } from 'ratekeeper/redis'

const limiter = new Gcra({ burst: 2, emissionIntervalMs: 10 })
export const limiters = [
  new RedisLimiter(createClient(), limiter),
  new RedisLimiter(createCluster({ rootNodes: [] }), limiter),
  new RedisLimiter(new Redis(), limiter),
  new RedisLimiter(new Cluster([]), limiter),
]
