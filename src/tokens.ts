/**
 * Public tokens, command ids and interfaces of jupyterlab-gpu-hygiene.
 */
import type { ISessionContext } from '@jupyterlab/apputils';
import type { NotebookPanel } from '@jupyterlab/notebook';
import { Token } from '@lumino/coreutils';
import type { ISignal } from '@lumino/signaling';
import type { GpuKernelModel } from './model';
import type {
  IServerKernelsAnswer,
  ServerKernelsState
} from './server-kernel-types';

/** Command ids. */
export namespace CommandIDs {
  /** Insert (and run) the clear_gpu cell in the current notebook. */
  export const clean = 'gpu-hygiene:clean';
  /** Restart the current notebook's kernel with JupyterLab's confirmation. */
  export const restartKernel = 'gpu-hygiene:restart-kernel';
  /**
   * Interrupt a kernel's running cell (args: `kernelId`): the session
   * context's `kernel.interrupt()`, as JupyterLab's own Interrupt Kernel;
   * the kernel and its variables stay.
   */
  export const interruptKernel = 'gpu-hygiene:interrupt-kernel';
  /** Open the VRAM panel (time series, per-cell table, who holds VRAM, leak trend). */
  export const openPanel = 'gpu-hygiene:open-panel';
  /** Insert (and run) a clean cell for one stale model (args: `modelId`, `kernelId`). */
  export const freeModel = 'gpu-hygiene:free-model';
  /** Ask, then insert (and run) `del <names>` and the clean tail for one model (args: `modelId`, `kernelId`). */
  export const deleteModel = 'gpu-hygiene:delete-model';
  /**
   * Ask, then insert (and run) a cell that detaches the tensors of one graph
   * holder (args: `name`, `kernelId`); only for a variable that is itself the
   * container and whose name is a Python identifier.
   */
  export const fixGraphHolder = 'gpu-hygiene:fix-graph-holder';
  /**
   * Ask, then insert (and run) a cell that shuts down the DataLoader workers
   * kept by user variables and deletes those variables (args: `names`,
   * `kernelId`); only names that keep workers in the latest inventory and
   * are Python identifiers.
   */
  export const dropWorkers = 'gpu-hygiene:drop-workers';
  /**
   * Ask, then insert (and run) a cell that replaces the CUDA tensors of one
   * user variable by CPU copies (args: `name`, `kernelId`); the dialog also
   * offers {@link deleteVariable}.
   */
  export const moveTensorsToCpu = 'gpu-hygiene:move-tensors-to-cpu';
  /** Ask, then insert (and run) a cell that deletes one user variable (args: `name`, `kernelId`). */
  export const deleteVariable = 'gpu-hygiene:delete-variable';
  /**
   * Ask, then insert (and run) a cell that drops the finished Ultralytics
   * trainer of one YOLO and keeps the model (args: `modelId`, `name`, the
   * variable naming the YOLO, and `kernelId`).
   */
  export const dropTrainer = 'gpu-hygiene:drop-trainer';
  /**
   * Toggle the `recordOrigins` setting: record which cell and line
   * allocated each live CUDA block (the VRAM panel's origins).
   */
  export const recordOrigins = 'gpu-hygiene:record-origins';
  /**
   * Select the cell of an execution count (args `cell`, `line`, `kernelId`)
   * in the kernel's notebook, the cursor on the line: the origins' links.
   */
  export const goToOrigin = 'gpu-hygiene:go-to-origin';
  /**
   * Ask, then shut down one kernel of this server with JupyterLab's kernel
   * manager (args: `kernelId`, a kernel id from the server's
   * `gpu-hygiene/kernels` answer; without it the dialog lets the user choose
   * one of those kernels). Never a pid, never a kernel the server does not
   * list; the dialog names the notebook and the VRAM it frees, and says so
   * when it is the current notebook's kernel.
   */
  export const shutdownKernel = 'gpu-hygiene:shutdown-kernel';
}

/** What the clean command does with the generated cell. */
export type CleanAction = 'insert-and-run' | 'insert';

/** User settings (schema/plugin.json), live. */
export interface IGpuSettings {
  /** Sampler period of the kernel agent, milliseconds (≥ 250). */
  sampleIntervalMs: number;
  /** Raise a warning toast when instances of the same model kind stack up. */
  warnOnStackedModels: boolean;
  /** Fraction (0–1) of device memory from which the gauge shows a warning colour. */
  warnThreshold: number;
  /** Fraction (0–1) of device memory from which the gauge shows the critical colour. */
  criticalThreshold: number;
  /** Whether the clean command runs the inserted cell. */
  cleanAction: CleanAction;
  /** Samples kept per kernel (ring buffer; 3600 = an hour at one a second). */
  maxSamples: number;
  /** Raise a toast when PyTorch's allocated memory climbs steadily. */
  warnOnLeak: boolean;
  /** Fewest cells (points) before the leak trend gives a verdict (≥ 3). */
  leakMinPoints: number;
  /** Lowest R² of the least-squares line for a steady climb (0–1). */
  leakMinR2: number;
  /** Raise an error toast when a cell fails with CUDA out of memory (one per cell). */
  warnOnOutOfMemory: boolean;
  /** Raise a toast when a variable keeps autograd graphs of ≥ 64 MiB alive on a CUDA device (one per variable). */
  warnOnGraphHolders: boolean;
  /**
   * Raise a warning toast for findings (`src/analysis/findings/`) of the
   * kinds no other toast tells: one per kernel and kind.
   */
  warnOnFindings: boolean;
  /**
   * Smallest finding that raises a toast, MiB (all devices of the finding's
   * bytes); smaller ones are only listed in the VRAM panel. Default 1.
   */
  toastMinMiB: number;
  /**
   * Findings holding less than this, MiB (all devices of the finding's
   * bytes, more than 0), are left out of the panel's list (a button shows
   * them) and of the gauge's count (`splitAtFloor`). Default 1; 0 lists all.
   */
  findingFloorMiB: number;
  /**
   * Record which notebook cell and line allocated each live CUDA block
   * (PyTorch's allocation-stack recording, turned on in each kernel once its
   * code has used CUDA); the VRAM panel shows "Live CUDA memory by origin".
   * Off by default: it costs every CUDA allocation (docs/benchmarks.md).
   */
  recordOrigins: boolean;
}

/** Defaults, identical to schema/plugin.json. */
export const DEFAULT_SETTINGS: IGpuSettings = {
  sampleIntervalMs: 1000,
  warnOnStackedModels: true,
  warnThreshold: 0.75,
  criticalThreshold: 0.9,
  cleanAction: 'insert-and-run',
  maxSamples: 3600,
  warnOnLeak: true,
  leakMinPoints: 5,
  leakMinR2: 0.9,
  warnOnOutOfMemory: true,
  warnOnGraphHolders: true,
  warnOnFindings: true,
  toastMinMiB: 1,
  findingFloorMiB: 1,
  recordOrigins: false
};

/**
 * This server's kernels and their pids (`GET {baseUrl}gpu-hygiene/kernels`,
 * the server extension), as the monitor last fetched them.
 */
export interface IServerKernels {
  /** Where the browser stands with the list (see `ServerKernelsState`). */
  readonly state: ServerKernelsState;
  /** The last valid answer, or null. */
  readonly answer: IServerKernelsAnswer | null;
  /** Emitted when the state changed. */
  readonly changed: ISignal<IServerKernels, ServerKernelsState>;
  /**
   * Fetch again unless the last attempt is younger than `maxAgeMs` (default
   * 5 s; 0 always fetches) or a request is in flight. Never rejects.
   */
  refresh(maxAgeMs?: number): Promise<ServerKernelsState>;
}

/**
 * The GPU monitor: one {@link GpuKernelModel} per kernel, following the
 * notebooks of the application. Views and actions depend on this token only.
 */
export interface IGpuMonitor {
  /** Model of the current notebook's kernel, or null (no notebook, no kernel). */
  readonly currentModel: GpuKernelModel | null;
  /** Emitted when {@link currentModel} changes (another notebook or kernel). */
  readonly currentChanged: ISignal<IGpuMonitor, GpuKernelModel | null>;
  /** Emitted when a model is created for a kernel (views subscribe to it). */
  readonly modelAdded: ISignal<IGpuMonitor, GpuKernelModel>;
  /** All live models. */
  readonly models: ReadonlyArray<GpuKernelModel>;
  /** Current settings. */
  readonly settings: IGpuSettings;
  /** Emitted after settings changed. */
  readonly settingsChanged: ISignal<IGpuMonitor, IGpuSettings>;
  /**
   * Persist one setting in the Settings Editor's user settings.
   *
   * @throws if the settings could not be saved (e.g. invalid value).
   */
  setSetting<K extends keyof IGpuSettings>(
    key: K,
    value: IGpuSettings[K]
  ): Promise<void>;
  /** The notebook panel whose kernel a model watches (the current one first). */
  panelFor(model: GpuKernelModel): NotebookPanel | null;
  /** Session context of the current notebook, or null. */
  readonly currentSessionContext: ISessionContext | null;
  /**
   * A user opened a view of this kernel (the gauge's popup, the VRAM panel):
   * fresh figures now. The server is asked again; the kernel's agent only
   * where the server cannot read the kernel's GPU (a Kernel Gateway, another
   * machine or pid namespace). Never called on a timer: a message to a
   * kernel counts as its activity for idle cullers.
   */
  askForFigures(model: GpuKernelModel): void;
  /**
   * This server's kernels, their pids and its NVML reading of the GPUs:
   * polled while a ready kernel is shown and the page is visible (the
   * sampler's period, at least 1 s; not counted as the server's activity),
   * fetched when a kernel's agent lists the GPU's processes and the last
   * answer is older than 5 s, and when the VRAM panel opens.
   */
  readonly serverKernels: IServerKernels;
}

/** The monitor token. */
export const IGpuMonitor = new Token<IGpuMonitor>(
  'jupyterlab-gpu-hygiene:IGpuMonitor',
  'Per-kernel VRAM samples, model inventory and findings of the GPU hygiene agent.'
);
