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

/** One step of a fixture the agent tests write (`test/fixtures/inventory_*.json`). */
export type Step = Partial<IInventory> & { step: string };

/** The inventory of `step` in such a fixture, over C01's (for the fields it leaves out). */
export function at(steps: unknown, step: string): IInventory {
  const found = (steps as Step[]).find(s => s.step === step);
  if (!found) {
    throw new Error(`no step ${step} in the fixture`);
  }
  const inventory: Partial<IInventory> & { step?: string } = { ...found };
  delete inventory.step;
  return { ...c01Inventory(), ...inventory } as IInventory;
}

/**
 * The inventory as if it had run on cuda:0, 1024× larger (KiB become MiB):
 * every per-device record's `cpu` becomes `cuda:0`.
 */
export function onCuda(inventory: IInventory): IInventory {
  const move = (value: unknown): unknown => {
    if (Array.isArray(value)) {
      return value.map(move);
    }
    if (value && typeof value === 'object') {
      const entries = Object.entries(value);
      if (
        entries.length &&
        entries.every(([k, v]) => k === 'cpu' && typeof v === 'number')
      ) {
        return { 'cuda:0': (value as { cpu: number }).cpu * 1024 };
      }
      return Object.fromEntries(entries.map(([k, v]) => [k, move(v)]));
    }
    return value;
  };
  return move(inventory) as IInventory;
}
