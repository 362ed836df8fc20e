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

import { parseKernelMessage, type IHello } from './protocol';

export { parseKernelMessage };

/**
 * The install request's user expression (its key in `user_expressions`):
 * after the install, the kernel evaluates the running agent's `hello_now()`
 * and puts its `hello` in the `execute_reply` (src/agent/gpu_hygiene_agent/
 * lifecycle.py), so the browser has the devices one round trip before the
 * comm's own `hello`. It reads the package from `sys.modules` through the
 * builtin `__import__`, binds nothing, and IPython evaluates it without the
 * display hook (no `_`, `Out` or execution count).
 */
export const HELLO_EXPRESSION: Readonly<Record<string, string>> = {
  jupyterlab_gpu_hygiene_hello:
    "__import__('sys').modules['_jupyterlab_gpu_hygiene_agent'].hello_now()"
};

/**
 * The `hello` in an install's `execute_reply` content (`user_expressions`),
 * validated as the comm's messages are; null when there is none (a kernel
 * that ignores user expressions, an older agent kept in the kernel, an
 * install that failed): the comm's `hello` then comes alone.
 */
export function helloFromReply(content: unknown): IHello | null {
  const expressions = (content as { user_expressions?: unknown } | null)
    ?.user_expressions;
  const result = (expressions as Record<string, unknown> | undefined)?.[
    Object.keys(HELLO_EXPRESSION)[0]
  ] as { status?: unknown; data?: Record<string, unknown> } | undefined;
  if (!result || result.status !== 'ok' || !result.data) {
    return null;
  }
  let value = result.data['application/json'];
  if (value === undefined && typeof result.data['text/plain'] === 'string') {
    try {
      value = JSON.parse(result.data['text/plain']);
    } catch {
      return null;
    }
  }
  const parsed = parseKernelMessage(value);
  return parsed.ok && parsed.message.type === 'hello' ? parsed.message : null;
}

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
