// Runs the shared conformance vectors (tests/vectors and tests/vectors/core-only)
// in the page, with the very runner of the Node suite (tests/js/vector-runner.mjs).
import { runDirectory } from '/tests/js/vector-runner.mjs';

/** Fetches every file of both directories from `base` and runs them all against `api`. */
export async function runVectors(api, base) {
  const directories = {};
  for (const dir of ['', 'core-only/']) {
    const read = async (name) => {
      const response = await fetch(new URL(dir + name, base));
      if (!response.ok) throw new Error(`GET ${dir}${name}: ${response.status}`);
      return response.text();
    };
    directories[dir || './'] = await runDirectory(api, read);
  }
  return directories;
}
