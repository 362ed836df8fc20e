/**
 * Facts for the finding rules' specs, built from the shared fixtures
 * (`../fixtures.ts`, shaped like the agent's messages).
 */
import { nullTranslator } from '@jupyterlab/translation';
import type { IFacts } from '../../../src/analysis/findings';
import type { IInventory, IModelInfo } from '../../../src/protocol';
import { c01Inventory, held, yolo } from '../fixtures';

export const MiB = 2 ** 20;
export const trans = nullTranslator.load('jupyterlab_gpu_hygiene');

/** Facts of one inventory (no sample, no hello). */
export function facts(inventory: IInventory | null): IFacts {
  return { inventory, sample: null, hello: null };
}

/** C01 with `models` and no roots. */
export function inventoryOf(models: IModelInfo[]): IInventory {
  return { ...c01Inventory(), models, roots: [] };
}

/**
 * A YOLO's layers after `del model`, in a reference cycle: family
 * `ultralytics`, classes `Conv`, `C2f`, `Detect`, nothing reaches them.
 */
export function cycleLayers(onCuda = true): IModelInfo[] {
  const hidden = held('hidden', 'unreachable from the namespace');
  return ['Conv', 'Conv', 'C2f', 'Detect'].map((className, i) =>
    yolo({
      id: `0x7f00000001${i}`,
      order: 10 + i,
      className,
      module: 'ultralytics.nn.modules.conv',
      label: className,
      bytes: onCuda ? { 'cuda:0': 2 * MiB } : { cpu: 2 * MiB },
      holders: [hidden],
      stale: true
    })
  );
}
