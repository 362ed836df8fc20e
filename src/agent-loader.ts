/**
 * Loads the agent's chunk (`src/agent-chunk.ts`: the agent's text, its install
 * code and the message validator) once per page, when the first Python kernel
 * connects; every connection waits on the same promise, so a kernel that
 * connects while the chunk is on its way is served when it arrives.
 */
import type * as AgentChunk from './agent-chunk';

/** The agent chunk's exports. */
export type IAgentChunk = typeof AgentChunk;

/**
 * The agent's chunk, loaded on the first call.
 *
 * @returns the chunk's module; rejects when the chunk cannot be loaded (the
 * server went away, the extension was rebuilt under the page). A failed load
 * is forgotten, so the next call (a restart, another kernel) tries again.
 */
export function loadAgent(): Promise<IAgentChunk> {
  if (!chunk) {
    chunk = import('./agent-chunk').catch(reason => {
      chunk = null;
      throw reason;
    });
  }
  return chunk;
}

/** The chunk being loaded or loaded; null before the first call or after a failure. */
let chunk: Promise<IAgentChunk> | null = null;
