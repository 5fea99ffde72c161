// Types of the ES module entry on Node (main.mjs, export conditions `node` +
// `import`): the package's one surface (ratekeeper.d.ts), plus the default
// export main.mjs gives, `init` carrying the whole API, as in
// `import init, { Gcra } from 'ratekeeper'` shared with browsers.
import * as api from './ratekeeper.js'

export * from './ratekeeper.js'
declare const main: typeof api.init & typeof api
export default main
