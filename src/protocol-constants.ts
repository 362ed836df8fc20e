/**
 * What the browser and the agent agree on beside the messages' shapes: the
 * protocol version, the comm target and the clean cell's marker.
 *
 * Its own module, without the validator: code on JupyterLab's start path (the
 * connection, the clean-cell generator) reads these values without loading
 * zod, which comes with `src/protocol.ts` in the agent's chunk
 * (`src/agent-chunk.ts`) when the first Python kernel connects.
 */

/** Version carried as `protocol` in every message. */
export const PROTOCOL_VERSION = 2;

/** Comm target registered by the agent in the kernel. */
export const COMM_TARGET = 'jupyterlab_gpu_hygiene.v1';

/** Marker comment that identifies a clean cell (the agent reports `cleaned` after it). */
export const CLEAN_MARKER = '# gpu-hygiene: clear_gpu';

/** Most processes per device in a `gpuProcesses` message (the agent keeps the largest). */
export const GPU_PROCESSES_MAX_PER_DEVICE = 64;
