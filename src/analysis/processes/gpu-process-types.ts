/**
 * The shapes of "who else is on the GPU" (issue 12), shared by the pid join
 * (`gpu-process-join.ts`), the labels (`kernel-labels.ts`), the per-device
 * sort (`device-processes.ts`) and the idle kernels of an OOM
 * (`oom-idle-kernels.ts`).
 *
 * A process is this kernel, a kernel of the user on this server (with its
 * notebook, state and idle time), a kernel matched only by the pid it
 * reports itself (`remote-kernel`: the server sees no pid for it), or
 * another process (its name and user). Where NVML's pids are not this OS's
 * pids (`namespace: "container"`) nothing is joined: the rows carry no
 * attribution.
 */
import type { IGpuProcess, IGpuProcesses } from '../../protocol';
import type { IServerSession } from '../../server-kernel-types';

/** What a process on the GPU is, for the user. */
export type GpuProcessKind =
  | 'this-kernel' // the kernel whose agent sent the list
  | 'your-kernel' // another kernel of this server, matched by pid
  | 'remote-kernel' // a kernel matched by the pid it reports (hello.pid); the server knows no pid for it
  | 'other-process' // not a kernel the browser or the server knows
  | 'unattributed'; // NVML's pids are not this OS's (container): nothing is said

/** A kernel the browser has an agent in (one model of the monitor). */
export interface IKnownKernel {
  /** Kernel id. */
  id: string;
  /** The pid its agent reported (`hello.pid`). */
  pid: number;
  /** Path of the notebook the browser has open on it, or null. */
  path: string | null;
  /** The kernel's status as the browser sees it (`idle`, `busy`, ...), or null. */
  status: string | null;
  /**
   * When its last cell ended (or its agent started, when no cell ran since),
   * seconds since the epoch; null when unknown.
   */
  idleSince: number | null;
}

/** The kernel behind a process row. */
export interface IKernelInfo {
  /** Kernel id (as `/api/kernels`). */
  id: string;
  /** Kernelspec name (`python3`), or null when the server did not list the kernel. */
  spec: string | null;
  /** Path of its notebook (the first notebook session, else the browser's), or null. */
  notebook: string | null;
  /** Its sessions, as the server lists them (empty when it did not). */
  sessions: ReadonlyArray<IServerSession>;
  /** Execution state (`idle`, `busy`, `starting`, ...), or null when unknown. */
  state: string | null;
  /** Seconds since it became idle (null unless `state` is `idle` and the time is known). */
  idleSeconds: number | null;
  /** Where `idleSeconds` comes from: the browser's record of its cells, or the server's last activity. */
  idleSource: 'cells' | 'server' | null;
  /** Websocket connections the server counts, or null. */
  connections: number | null;
  /**
   * Listed in the server's answer: only then can it be shut down from here
   * (JupyterLab's kernel manager, by this id).
   */
  inServer: boolean;
  /** How the pid was matched: the server's pid of the kernel process, or the pid the kernel reported. */
  matchedBy: 'server' | 'hello';
}

/** One process on the kernel's GPUs, all devices together. */
export interface IGpuProcessRow {
  /** The pid as NVML lists it. */
  pid: number;
  /** What it is. */
  kind: GpuProcessKind;
  /** NVML's used bytes per device (`"cuda:<index>"`), where reported. */
  bytes: Record<string, number>;
  /** Devices where NVML lists it without a figure (`used: null`). */
  unknown: string[];
  /** Sum of `bytes`. */
  total: number;
  /** Compute, graphics or both (over all its devices). */
  processKind: IGpuProcess['kind'];
  /** Process name, command line and owner (null when unreadable). */
  name: string | null;
  cmdline: string | null;
  user: string | null;
  /** The kernel, for `your-kernel`, `remote-kernel` and (when known) `this-kernel`. */
  kernel: IKernelInfo | null;
}

/** Totals of one device, for the gauge's tooltip. */
export interface IDeviceTotals {
  /** Bytes and count of processes that are not the user's kernels (`other-process`). */
  otherBytes: number;
  otherCount: number;
  /** Bytes and count of the user's other kernels (`your-kernel`, `remote-kernel`). */
  kernelBytes: number;
  kernelCount: number;
  /** Bytes and count of processes not attributed (container). */
  unattributedBytes: number;
  unattributedCount: number;
}

/** The join of one `gpuProcesses` message. */
export interface IGpuProcessesJoin {
  /** When the agent listed them, seconds since the epoch. */
  t: number;
  /** The message's pid namespace. */
  namespace: IGpuProcesses['namespace'];
  /** Whether the rows are attributed (false in a container: the pids are not this OS's). */
  attributed: boolean;
  /** Whether the server's kernel list was available for the join. */
  server: boolean;
  /** The processes, largest first (this kernel first among equals). */
  rows: IGpuProcessRow[];
  /** Totals per device (`"cuda:<index>"`), every device of the message. */
  totals: Record<string, IDeviceTotals>;
}

/** Order of the kinds among rows of equal size. */
export const KIND_RANK: Record<GpuProcessKind, number> = {
  'this-kernel': 0,
  'your-kernel': 1,
  'remote-kernel': 2,
  'other-process': 3,
  unattributed: 4
};
