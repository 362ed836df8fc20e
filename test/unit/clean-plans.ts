/**
 * Every kind of plan the clean-cell generator is given, built from the
 * shared unit fixtures (`./fixtures.ts`) and the inventories real kernels
 * sent (`test/fixtures/inventory_*.json`): the unrestricted Clean GPU plan,
 * the VRAM panel's "free" (one stale model) and "delete…" (the variables
 * naming a model), for stale models, output-cache tensors and hidden copies,
 * the last traceback, graph holders, owner objects, DataLoader workers, and
 * inventories at the agent's bounds. The cell-shape test
 * (`clean-cell-shape.spec.ts`) runs the generator over all of them.
 */
import {
  planClean,
  type ICleanPlan
} from '../../src/analysis/codegen/clean-cell';
import type { IInventory, IModelInfo, IRootBytes } from '../../src/protocol';
import afterTraining from '../fixtures/inventory_after_training.json';
import handTrainer from '../fixtures/inventory_hand_trainer.json';
import { c01Inventory, c08Inventory, held, yolo } from './fixtures';

const MiB = 2 ** 20;

/** A named plan: `kind` groups the plans in the report of the shape test. */
export interface INamedPlan {
  kind: string;
  name: string;
  plan: ICleanPlan;
}

/** An output root with `cells`, `sole` and `shared` (agent 0.4). */
function output(
  name: string,
  cells: number[],
  cuda: number,
  extra: Partial<IRootBytes> = {}
): IRootBytes {
  const sole = { 'cuda:0': cuda };
  return {
    kind: 'output',
    name,
    bytes: sole,
    sole,
    shared: {},
    sharedWith: [],
    cells,
    models: 0,
    tensors: 1,
    ...extra
  };
}

/** The steps of a committed real-kernel fixture as inventories. */
function steps(json: unknown): Array<{ step: string; inventory: IInventory }> {
  return (json as Array<Record<string, unknown>>).map(found => {
    const inventory: Record<string, unknown> = { ...found };
    delete inventory.step;
    return {
      step: String(found.step),
      inventory: { ...c01Inventory(), ...inventory } as IInventory
    };
  });
}

/** C01 plus a model held by the last traceback (and `Out[5]`). */
function withTraceback(): IInventory {
  const inventory = c01Inventory();
  inventory.models.push(
    yolo({
      id: '0x7f0000000003',
      order: 3,
      label: 'YOLO (yolov8s.yaml)',
      holders: [
        held('traceback', 'last traceback (train_step)'),
        held('output', 'Out[5]')
      ],
      stale: true
    })
  );
  return inventory;
}

/** C01 on CUDA with displayed tensors: cells, `_` and hidden copies. */
function withOutputs(): IInventory {
  const inventory = c01Inventory();
  inventory.cudaInitialized = true;
  inventory.roots.push(
    output('_4', [4], 64 * MiB),
    output('Out[4]', [4], 64 * MiB),
    output('___', [3], 4 * MiB, { tensors: 2 }),
    output('_2', [], 4 * MiB), // left by `del Out[2]`
    output('_', [], 32 * MiB), // user_ns_hidden's after `%reset -f out`
    output('__', [], 32 * MiB),
    output('x', [], 16 * MiB, { kind: 'variable' })
  );
  return inventory;
}

/** A YOLO's layers in a reference cycle after `del model` (nothing names them). */
function cycle(): IInventory {
  const hidden = held('hidden', 'unreachable from the namespace');
  return {
    ...c01Inventory(),
    models: ['Conv', 'Conv', 'C2f', 'Detect'].map((className, i) =>
      yolo({
        id: `0x7f00000001${i}`,
        order: 10 + i,
        className,
        label: className,
        bytes: { 'cuda:0': 2 * MiB },
        holders: [hidden],
        stale: true
      })
    ),
    roots: []
  };
}

/** DataLoader workers kept by variables (the child-processes fact). */
function workers(): IInventory {
  return {
    ...c01Inventory(),
    children: {
      visible: true,
      source: 'proc',
      reason: null,
      truncated: false,
      processes: [],
      holders: [
        {
          kind: 'variable',
          name: 'train_loader',
          path: 'train_loader',
          className: 'DataLoader',
          persistent: true,
          pids: [12, 11]
        }
      ]
    }
  };
}

/**
 * Near the bounds: 30 stale models in the output cache and the traceback
 * under long hostile labels, 40 named models (every name kept, one of 151
 * characters), 50 more
 * output cells holding tensors (a run of 30 and 20 scattered) and four
 * hidden copies.
 */
function crowded(): IInventory {
  const inventory = c01Inventory();
  inventory.cudaInitialized = true;
  const long = 'L'.repeat(300);
  const stale: IModelInfo[] = Array.from({ length: 30 }, (_, i) =>
    yolo({
      id: `0x7f00000002${i}`,
      order: 20 + i,
      label: i % 2 ? `YOLO (${long})` : 'Evil\nimport os; os.system("x")\u2028',
      bytes: { 'cuda:0': (i + 1) * MiB },
      holders: [
        held('output', `Out[${100 + i}]`),
        held('output', `_${100 + i}`),
        held('traceback', 'last traceback (train_step)')
      ],
      stale: true
    })
  );
  const named: IModelInfo[] = Array.from({ length: 40 }, (_, i) =>
    yolo({
      id: `0x7f00000003${i}`,
      order: 60 + i,
      holders: [
        held(
          'variable',
          i ? `model_with_a_rather_long_name_${i}` : `m${'x'.repeat(150)}`
        )
      ]
    })
  );
  inventory.models = [...inventory.models, ...stale, ...named];
  for (let cell = 200; cell < 230; cell++) {
    inventory.roots.push(output(`_${cell}`, [cell], MiB)); // a run of cells
  }
  for (let cell = 301; cell < 340; cell += 2) {
    inventory.roots.push(output(`Out[${cell}]`, [cell], MiB)); // scattered
  }
  for (const copy of ['_', '__', '___', '_7']) {
    inventory.roots.push(output(copy, [], MiB));
  }
  return inventory;
}

/** The unrestricted plan, "free" for each stale model, "delete…" for each named one. */
function plansOf(kind: string, name: string, inventory: IInventory) {
  const plans: INamedPlan[] = [
    { kind, name: `${name}: Clean GPU`, plan: planClean(inventory) }
  ];
  for (const model of inventory.models) {
    if (model.stale) {
      plans.push({
        kind,
        name: `${name}: free ${model.id}`,
        plan: planClean(inventory, { modelId: model.id })
      });
    }
    const names = model.holders
      .filter(h => h.kind === 'variable')
      .map(h => h.name);
    if (names.length) {
      plans.push({
        kind,
        name: `${name}: delete ${names.join(', ')}`,
        plan: planClean(inventory, { modelId: model.id, deleteNames: names })
      });
    }
  }
  return plans;
}

/** Every representative plan (see the file's comment). */
export function representativePlans(): INamedPlan[] {
  return [
    { kind: 'empty', name: 'no inventory', plan: planClean(null) },
    ...plansOf('stale models (C01)', 'C01', c01Inventory()),
    ...plansOf('last traceback', 'traceback', withTraceback()),
    ...plansOf('output-cache tensors, hidden copies', 'outputs', withOutputs()),
    ...plansOf('graph holders, trainer parts (C08)', 'C08', c08Inventory()),
    ...plansOf('unreachable cycle', 'cycle', cycle()),
    ...plansOf('workers', 'workers', workers()),
    ...steps(afterTraining).flatMap(s =>
      plansOf('after training (real kernel)', s.step, s.inventory)
    ),
    ...steps(handTrainer).flatMap(s =>
      plansOf('owner objects (real kernel)', s.step, s.inventory)
    ),
    ...plansOf('at the bounds', 'crowded', crowded())
  ];
}
