// A tiny static file server for the browser test: only the page, the web build,
// the shared vectors and their runner, from the repository root, on 127.0.0.1 and a free port.
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { extname, join, posix } from 'node:path';

const SERVED = [
  '/tests/browser/page/',
  '/tests/vectors/',
  '/tests/js/vector-runner.mjs',
  '/bindings-wasm/web.mjs',
  '/bindings-wasm/pkg/api.mjs',
  '/bindings-wasm/pkg/web/',
];

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  // The right type lets the glue use WebAssembly.instantiateStreaming.
  '.wasm': 'application/wasm',
};

/** Starts serving `root`; resolves to `{ url, close() }`. */
export async function startServer(root) {
  const server = createServer(async (request, response) => {
    let path;
    try {
      path = posix.normalize(decodeURIComponent(new URL(request.url, 'http://x').pathname));
    } catch {
      path = '';
    }
    const allowed = request.method === 'GET' && SERVED.some((prefix) => path === prefix || (prefix.endsWith('/') && path.startsWith(prefix)));
    const type = TYPES[extname(path)];
    if (!allowed || !type || path.includes('..')) {
      response.writeHead(404).end();
      return;
    }
    try {
      const body = await readFile(join(root, path));
      response.writeHead(200, { 'content-type': type, 'cache-control': 'no-store' }).end(body);
    } catch {
      response.writeHead(404).end();
    }
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
