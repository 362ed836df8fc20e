/**
 * Messages shaped like the agent's, for unit tests. Field values follow what
 * the agent reported for the C01 case in a real kernel (see test/agent).
 */
import { Signal } from '@lumino/signaling';
import type { GpuKernelModel } from '../../src/model';
import type {
  IGpuProcess,
  IGpuProcesses,
  IGraphHolder,
  IHello,
  IHolder,
  IInventory,
  IModelInfo,
  IOom,
  ISample
} from '../../src/protocol';
import type {
  IServerKernel,
  IServerKernelsAnswer,
  ServerKernelsState
} from '../../src/server-kernel-types';
import {
  DEFAULT_SETTINGS,
  IGpuMonitor,
  IGpuSettings,
  IServerKernels
} from '../../src/tokens';

const MiB = 2 ** 20;
const GiB = 2 ** 30;

/** A holder whose path is its root name (a variable or output-cache entry naming the model itself). */
/** An agent's `hello` from one H200 (141 GiB) with NVML and torch; `overrides` replace fields. */
export function h200Hello(overrides: Partial<IHello> = {}): IHello {
  return {
    protocol: 2,
    type: 'hello',
    agentVersion: '0.8.0',
    python: '3.11.7',
    pid: 1,
    torch: '2.14.1',
    nvml: true,
    nvmlError: null,
    devices: [
      {
        index: 0,
        nvmlIndex: 0,
        name: 'NVIDIA H200',
        total: 141 * GiB,
        uuid: 'GPU-1'
      }
    ],
    ...overrides
  };
}

export function held(
  kind: IHolder['kind'],
  name: string,
  path = name
): IHolder {
  return { kind, name, path };
}

/** A YOLOv8n wrapper as the agent reports it (CPU: bytes under "cpu"). */
export function yolo(overrides: Partial<IModelInfo> = {}): IModelInfo {
  return {
    id: '0x7f0000000001',
    order: 1,
    className: 'YOLO',
    module: 'ultralytics.models.yolo.model',
    family: 'ultralytics',
    label: 'YOLO (yolov8n.yaml)',
    parameters: 3_157_200,
    bytes: { cpu: 12_700_000 },
    parts: [],
    holders: [held('variable', 'model')],
    stale: false,
    ...overrides
  };
}

/** C01 after the re-run cell: the older instance held only by the output cache. */
export function c01Inventory(): IInventory {
  return {
    protocol: 2,
    type: 'inventory',
    t: 1_764_496_800,
    seq: 3,
    executionCount: 3,
    durationMs: 4.2,
    skipped: false,
    torchImported: true,
    cudaInitialized: false,
    truncated: false,
    models: [
      yolo({
        id: '0x7f0000000001',
        order: 1,
        holders: [
          held('output', 'Out[2]'),
          held('output', '_2'),
          held('output', '__')
        ],
        stale: true
      }),
      yolo({
        id: '0x7f0000000002',
        order: 2,
        holders: [
          held('variable', 'model'),
          held('output', '_'),
          held('output', 'Out[3]'),
          held('output', '_3')
        ]
      })
    ],
    lastError: null,
    roots: [
      {
        kind: 'variable',
        name: 'model',
        bytes: { cpu: 12_700_000 },
        models: 1,
        tensors: 0
      },
      {
        kind: 'output',
        name: 'Out[2]',
        bytes: { cpu: 12_700_000 },
        models: 1,
        tensors: 0
      }
    ],
    unattributed: {},
    tensors: [],
    graphs: [],
    allocator: null,
    children: {
      visible: true,
      source: 'proc',
      reason: null,
      truncated: false,
      processes: [],
      holders: []
    },
    owners: []
  };
}

/**
 * The time of the model's latest sample (ms since the epoch; 0 without one):
 * the gauge as it reads right after that sample, when no age is due.
 */
export function atSample(model: GpuKernelModel): number {
  return (model.latestSample?.t ?? 0) * 1000;
}

/** A GPU sample: `used` of `total` on cuda:0. */
export function gpuSample(used: number, total: number, seq = 1): ISample {
  return {
    protocol: 2,
    type: 'sample',
    t: 1_764_496_800 + seq,
    seq,
    busy: false,
    devices: [
      {
        index: 0,
        used,
        total,
        process: 700 * MiB,
        allocated: 40 * MiB,
        reserved: 64 * MiB,
        cached: 24 * MiB,
        nonTorch: 636 * MiB,
        processHidden: false
      }
    ]
  };
}

/**
 * C08 on CUDA: `val_losses`, a list of 4 loss tensors with `grad_fn`, keeps
 * ≈ 1 GiB of graphs on cuda:0; a model with a trainer, EMA and optimizer
 * state held through a path.
 */
export function c08Inventory(): IInventory {
  return {
    ...c01Inventory(),
    cudaInitialized: true,
    models: [
      yolo({
        id: '0x7f0000000010',
        order: 1,
        bytes: { 'cuda:0': 12 * MiB },
        parts: [
          {
            path: 'trainer.ema.ema',
            kind: 'model',
            className: 'DetectionModel',
            bytes: { 'cuda:0': 12 * MiB }
          },
          {
            path: 'trainer.optimizer',
            kind: 'optimizer',
            className: 'SGD',
            bytes: { 'cuda:0': 6 * MiB }
          }
        ],
        holders: [
          held('variable', 'runs', 'runs[0].model'),
          held('variable', 'model')
        ]
      })
    ],
    roots: [
      {
        kind: 'variable',
        name: 'val_losses',
        bytes: { 'cuda:0': GiB },
        models: 0,
        tensors: 4
      },
      {
        kind: 'variable',
        name: 'model',
        bytes: { 'cuda:0': 30 * MiB },
        models: 1,
        tensors: 0
      },
      {
        kind: 'traceback',
        name: 'last traceback (train_step)',
        bytes: { 'cuda:0': 256 * MiB },
        models: 0,
        tensors: 1
      }
    ],
    unattributed: { 'cuda:0': 32 * MiB },
    tensors: [
      {
        path: 'last traceback (train_step).act',
        kind: 'traceback',
        device: 'cuda:0',
        bytes: 256 * MiB,
        shape: [256, 1024, 1024],
        dtype: 'uint8',
        gradFn: null
      }
    ],
    graphs: [graphHolder()]
  };
}

/** A graph holder as the agent reports it (C08: 4 losses, ≈ 1 GiB on cuda:0). */
export function graphHolder(
  overrides: Partial<IGraphHolder> = {}
): IGraphHolder {
  return {
    name: 'val_losses',
    path: 'val_losses',
    container: 'list',
    count: 4,
    gradFn: 'NllLossBackward0',
    bytes: { 'cuda:0': GiB },
    nodes: 120,
    truncated: false,
    ...overrides
  };
}

/** An `oom` message: torch ≥ 2.1 wording on an 80 GiB GPU, no Ultralytics. */
export function oomMessage(overrides: Partial<IOom> = {}): IOom {
  return {
    protocol: 2,
    type: 'oom',
    executionCount: 7,
    errorType: 'OutOfMemoryError',
    message:
      'CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.19 GiB of which 3.19 MiB is free.',
    device: 'cuda:0',
    requested: 20 * MiB,
    free: Math.round(3.19 * MiB),
    total: Math.round(79.19 * GiB),
    process: 78 * GiB,
    processes: [],
    allocated: 76 * GiB,
    reserved: 76 * GiB + 8 * MiB,
    stale: [],
    traceback: 0,
    graphs: 0,
    torch: '2.14.1',
    ultralytics: null,
    ...overrides
  };
}

/** A process of a `gpuProcesses` message (a compute process of 1 GiB, user alice). */
export function gpuProcess(overrides: Partial<IGpuProcess> = {}): IGpuProcess {
  return {
    pid: 4242,
    kind: 'compute',
    used: GiB,
    name: 'python3',
    cmdline: 'python3 train.py --epochs 100',
    user: 'alice',
    self: false,
    ...overrides
  };
}

/**
 * A `gpuProcesses` message of kernel pid 1000 on cuda:0: the kernel itself
 * (2 GiB) and `others`.
 */
export function gpuProcessesMessage(
  others: IGpuProcess[] = [],
  overrides: Partial<IGpuProcesses> = {}
): IGpuProcesses {
  return {
    protocol: 2,
    type: 'gpuProcesses',
    t: 1_764_496_801,
    pid: 1000,
    namespace: 'host',
    devices: [
      {
        index: 0,
        processes: [
          gpuProcess({
            pid: 1000,
            used: 2 * GiB,
            name: 'python',
            cmdline: 'python -m ipykernel_launcher -f kernel-k1.json',
            self: true
          }),
          ...others
        ]
      }
    ],
    ...overrides
  };
}

/** A kernel of the server's answer (idle, one notebook session). */
export function serverKernel(
  overrides: Partial<IServerKernel> = {}
): IServerKernel {
  const id = overrides.id ?? 'k2';
  return {
    id,
    name: 'python3',
    pid: 2000,
    executionState: 'idle',
    lastActivity: '2025-11-30T10:00:00.000Z',
    connections: 1,
    sessions: [
      {
        id: `s-${id}`,
        path: `work/${id}.ipynb`,
        name: `${id}.ipynb`,
        type: 'notebook'
      }
    ],
    ...overrides
  };
}

/** The server's answer with `kernels`. */
export function serverAnswer(
  kernels: IServerKernel[],
  gateway = false
): IServerKernelsAnswer {
  return { kernels, gateway };
}

/** An IServerKernels whose state a test sets; `refresh` only counts the calls. */
export class FakeServerKernels implements IServerKernels {
  state: ServerKernelsState = { status: 'none' };
  readonly changed: Signal<IServerKernels, ServerKernelsState> = new Signal(
    this
  );
  refreshes: number[] = [];
  get answer(): IServerKernelsAnswer | null {
    return this.state.status === 'ok' ? this.state.answer : null;
  }
  set(state: ServerKernelsState | IServerKernelsAnswer): void {
    this.state =
      'status' in state ? state : { status: 'ok', answer: state, at: 0 };
    this.changed.emit(this.state);
  }
  async refresh(maxAgeMs = 5000): Promise<ServerKernelsState> {
    this.refreshes.push(maxAgeMs);
    return this.state;
  }
}

/**
 * A minimal IGpuMonitor around one real GpuKernelModel, for the notifier
 * tests: the real monitor needs a notebook tracker and kernels, which the
 * Galata tests cover.
 */
export class OneModelMonitor implements IGpuMonitor {
  constructor(
    readonly model: GpuKernelModel,
    settings: Partial<IGpuSettings> = {}
  ) {
    this.settings = { ...DEFAULT_SETTINGS, ...settings };
  }
  readonly currentChanged: Signal<IGpuMonitor, GpuKernelModel | null> =
    new Signal(this);
  readonly modelAdded: Signal<IGpuMonitor, GpuKernelModel> = new Signal(this);
  readonly settingsChanged: Signal<IGpuMonitor, IGpuSettings> = new Signal(
    this
  );
  settings: IGpuSettings;
  currentSessionContext = null;
  serverKernels = new FakeServerKernels();
  get currentModel(): GpuKernelModel {
    return this.model;
  }
  get models(): GpuKernelModel[] {
    return [this.model];
  }
  async setSetting<K extends keyof IGpuSettings>(
    key: K,
    value: IGpuSettings[K]
  ): Promise<void> {
    this.settings = { ...this.settings, [key]: value };
    this.settingsChanged.emit(this.settings);
  }
  panelFor(): null {
    return null;
  }
  /** The models a view asked fresh figures for (a user opened it). */
  readonly askedFor: GpuKernelModel[] = [];
  askForFigures(model: GpuKernelModel): void {
    this.askedFor.push(model);
  }
}
