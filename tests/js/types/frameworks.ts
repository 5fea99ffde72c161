// tsc --strict over the server helpers with Express's and Fastify's own types
// (@types/express, fastify's bundled ones): what bindings-node/README.md says
// TypeScript infers, and where it says to name the request type.
import express, { type Request } from 'express';
import Fastify, { type FastifyRequest } from 'fastify';
import { KeyedLimiter, Policy, Gcra, fastifyHook, middleware } from 'ratekeeper';

const perKey = new KeyedLimiter(new Gcra({ burst: 10, emissionIntervalMs: 100 }));
const policy = Policy.fromRates('10/second', { by: ['user'] });

const app = express();
// Passed alone to app.use, the middleware reads Express's request type.
app.use(middleware({ limiter: perKey, key: (req) => req.get('x-api-key') }));
// Mounted at a path or on a route, Express's overloads give it none ('req' is unknown)...
// @ts-expect-error
app.use('/api', middleware({ limiter: perKey, key: (req) => req.get('x-api-key') }));
// ...so it is named.
app.use('/api', middleware<Request>({ limiter: perKey, key: (req) => req.get('x-api-key') }));
app.post('/login', middleware<Request>({ limiter: policy, fields: (req) => ({ user: req.get('x-user') ?? 'anonymous' }) }), (_req, res) => {
  res.send('ok');
});

const fastify = Fastify();
// addHook gives a hook made in its call no request type: named.
fastify.addHook('onRequest', fastifyHook<FastifyRequest>({ limiter: perKey, key: (request) => { const key = request.headers['x-api-key']; return typeof key === 'string' ? key : undefined; } }));
fastify.addHook('onRequest', fastifyHook<FastifyRequest>({ limiter: policy, fields: (request) => ({ user: request.ip }) }));

export { app, fastify };
