/**
 * The shapes of `GET {baseUrl}gpu-hygiene/kernels`'s answer and of where the
 * browser stands with it: read by the fetch (`server-kernels.ts`), its
 * validation (`server-kernels-schema.ts`, a lazy chunk), the GPU-process
 * join and the commands. Types only, so the lazy chunk and the fetch share
 * them without importing each other.
 */

/** Result of `parseServerKernels` (server-kernels-schema.ts). */
export type ServerKernelsParse =
  { ok: true; answer: IServerKernelsAnswer } | { ok: false; reason: string };

/** One session of a server kernel: `path` of a notebook (or a console's name), `type` `notebook`, `console`, ... */
export interface IServerSession {
  id: string;
  path: string;
  name: string;
  type: string;
}

/**
 * One kernel of the server: its id (as `/api/kernels`), kernelspec `name`,
 * the OS `pid` of its process when a local provisioner launched it (else
 * null), `executionState` and `lastActivity` (ISO 8601) as `/api/kernels`,
 * its websocket `connections` and its `sessions` (notebook or console paths).
 */
export interface IServerKernel {
  id: string;
  name: string;
  pid: number | null;
  executionState: string;
  lastActivity: string | null;
  connections: number;
  sessions: IServerSession[];
}

/**
 * The answer of `GET gpu-hygiene/kernels`: every running kernel of this
 * server (`kernels`), and whether they live behind a Kernel Gateway
 * (`gateway`: then no kernel has a pid). Validated by
 * `parseServerKernels` (server-kernels-schema.ts), loaded with the first fetch.
 */
export interface IServerKernelsAnswer {
  kernels: IServerKernel[];
  gateway: boolean;
  /**
   * The server's threshold for an idle kernel holding VRAM (its
   * `GpuHygieneMetrics.idle_minutes` and `idle_min_mib` settings, which its
   * `gpu-hygiene/metrics` flags with `kernel_idle_holding_vram`); absent from
   * an older server.
   */
  idleHolding?: IIdleHolding;
  /**
   * The GPUs as the server's own NVML reads them (absent from an older
   * server and behind a Kernel Gateway): between cells an idle kernel's agent
   * sends nothing, so the device's figures come from here.
   */
  devices?: IServerDevices;
}

/**
 * The server's NVML reading: `t` when it was read (the server's clock, in
 * seconds since the epoch: a local kernel's samples use the same clock),
 * `error` why there is no device (no nvidia-ml-py, no driver), else null.
 */
export interface IServerDevices {
  t: number;
  error: string | null;
  devices: IServerDevice[];
}

/**
 * One device the server's NVML lists (a MIG slice is one of its own, `mig`):
 * `index` is NVML's ("0", "0:1"), `uuid` how a kernel's devices are matched
 * (its `hello.devices[].uuid`), `total`/`used` bytes (NVML's v2 `used`, as
 * nvidia-smi), `utilization` percent (GPU-Util; null on a MIG slice), and
 * the processes NVML lists on it with their bytes (`used` null where the
 * driver does not say).
 */
export interface IServerDevice {
  uuid: string;
  index: string;
  mig: boolean;
  total: number | null;
  used: number | null;
  utilization: number | null;
  processes: { pid: number; used: number | null }[];
}

/** An idle kernel holding VRAM: idle at least `minutes` and holding at least `mib` MiB. */
export interface IIdleHolding {
  minutes: number;
  mib: number;
}

/**
 * Where the browser stands with the server's kernel list:
 * - `none`: not asked yet;
 * - `ok`: the `answer` fetched at `at` (ms since the epoch);
 * - `missing`: the server answered 404: it runs without the server extension
 *   (an older install), so no kernel of it can be attributed;
 * - `error`: another failure (`reason`: `network`, `http` with the status in
 *   `detail`, `invalid` answer), said once in the VRAM panel.
 */
export type ServerKernelsState =
  | { status: 'none' }
  | { status: 'ok'; answer: IServerKernelsAnswer; at: number }
  | { status: 'missing'; at: number }
  | {
      status: 'error';
      reason: 'network' | 'http' | 'invalid';
      detail: string;
      at: number;
    };
