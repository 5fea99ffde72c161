'use strict';
// The `ratekeeper` package's CommonJS entry on Node (export condition `node`):
// the native addon's API (index.js) and pacedFetch (lib/paced-fetch.cjs).
module.exports = { ...require('./index.js'), pacedFetch: require('./lib/paced-fetch.cjs').pacedFetch };
