/**
 * What a kernel connection needs once a Python kernel is there, in a chunk of
 * its own: the agent's text (`src/_generated/agent.ts`, about 170 KB of
 * Python, compressed to 63 KB), the code of the silent request that installs it, and the validator
 * of the agent's messages (`src/protocol.ts`, with zod).
 *
 * Only `src/agent-loader.ts` imports it, with a dynamic `import()`: JupyterLab
 * starts without it, and the first Python kernel that connects loads it once
 * for the page.
 */
import { AGENT_LOADER, AGENT_SOURCE } from './_generated/agent';

export { parseKernelMessage } from './protocol';

/**
 * The code of the silent execute request that installs the agent.
 *
 * It binds no name in the user namespace: the loader runs in a throwaway
 * globals dict and registers the agent package and its modules in
 * `sys.modules`. `SOURCE` is the payload: a JSON list of [module name, source
 * text] pairs in dependency order, zlib-compressed and base64-encoded (see
 * `scripts/embed-agent.mjs`).
 *
 * @param sampleIntervalMs - sampler period, milliseconds.
 */
export function agentInstallCode(sampleIntervalMs: number): string {
  const config = JSON.stringify({ sampleIntervalMs });
  // JSON string literals are valid Python string literals; the loader decodes
  // the payload and parses it and the config with json.loads.
  return `exec(${JSON.stringify(AGENT_LOADER)}, {"SOURCE": ${JSON.stringify(
    AGENT_SOURCE
  )}, "CONFIG": ${JSON.stringify(config)}})`;
}
