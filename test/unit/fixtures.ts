/**
 * Messages shaped like the agent's, for unit tests. Field values follow what
 * the agent reported for the C01 case in a real kernel (see test/agent).
 */
import { Signal } from '@lumino/signaling';
import type { GpuKernelModel } from '../../src/model';
import type { IInventory, IModelInfo, ISample } from '../../src/protocol';
import { DEFAULT_SETTINGS, IGpuMonitor, IGpuSettings } from '../../src/tokens';

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
    holders: [{ kind: 'variable', name: 'model' }],
    stale: false,
    ...overrides
  };
}

/** C01 after the re-run cell: the older instance held only by the output cache. */
export function c01Inventory(): IInventory {
  return {
    protocol: 1,
    type: 'inventory',
    t: 1_764_496_800,
    seq: 3,
    executionCount: 3,
    durationMs: 4.2,
    torchImported: true,
    cudaInitialized: false,
    truncated: false,
    models: [
      yolo({
        id: '0x7f0000000001',
        order: 1,
        holders: [
          { kind: 'output', name: 'Out[2]' },
          { kind: 'output', name: '_2' },
          { kind: 'output', name: '__' }
        ],
        stale: true
      }),
      yolo({
        id: '0x7f0000000002',
        order: 2,
        holders: [
          { kind: 'variable', name: 'model' },
          { kind: 'output', name: '_' },
          { kind: 'output', name: 'Out[3]' },
          { kind: 'output', name: '_3' }
        ]
      })
    ],
    lastError: null
  };
}

/** A GPU sample: `used` of `total` on cuda:0. */
export function gpuSample(used: number, total: number, seq = 1): ISample {
  return {
    protocol: 1,
    type: 'sample',
    t: 1_764_496_800 + seq,
    seq,
    busy: false,
    devices: [
      {
        index: 0,
        used,
        total,
        process: 700 * 2 ** 20,
        allocated: 40 * 2 ** 20,
        reserved: 64 * 2 ** 20
      }
    ]
  };
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
}
