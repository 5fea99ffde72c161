// ES module entry of the `ratekeeper` package on Node: the CommonJS build, re-exported.
import api from './index.js';

export const {
  Limiter,
  TokenBucket,
  Gcra,
  LeakyBucket,
  SlidingWindowLog,
  SlidingWindowCounter,
  FixedWindow,
  KeyedLimiter,
  Policy,
  RateLimited,
  middleware,
  fastifyHook,
  ipKey,
} = api;
export default api;
