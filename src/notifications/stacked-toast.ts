/**
 * Stacked models: one toast per kernel while instances of the same model
 * kind stack up (a re-run cell, a second model still alive), updated in
 * place when the set of stacked instances changes and dismissed when none
 * is left. Setting: `warnOnStackedModels`.
 *
 * What it says follows the findings of the older instance it tells (the
 * newest stale one, else the newest older one):
 * - stale (no variable names it; `stale-model`): a warning, "Stacked YOLO:
 *   older …, held only by Out[2], …", with Clean GPU and Restart kernel;
 *   Restart kernel and the VRAM panel instead where Clean GPU may leave a
 *   holder (`cleanLeaves`: a user's own `_`, `Out['3']`);
 * - still named (`named-older-model`): an info, "Stacked YOLO: m still holds
 *   YOLO (yolov8n.yaml), 12.1 MiB; …", with "Delete m…" (it asks) where the
 *   variable can be deleted, never a Clean GPU that would free nothing.
 *
 * Only models the user has stack (`findStackedModels`): modules nothing
 * reaches and parts of a model never raise it. Like every finding's toast,
 * none for an older instance below `toastMinMiB`.
 */
import { sumBytes } from '../analysis/format';
import { modelAndParts } from '../analysis/findings/user-models';
import {
  cleanLeaves,
  deletableNames,
  wrapperNames
} from '../analysis/memory/holders';
import {
  findStackedModels,
  IStackedGroup,
  stackingSignature
} from '../analysis/memory/stacking';
import type { GpuKernelModel } from '../model';
import type { IInventory, IModelInfo } from '../protocol';
import type { IGpuSettings } from '../tokens';
import {
  IRuleContext,
  IToastRule,
  RuleResult,
  STATE_TOAST_AUTO_CLOSE
} from './rule';
import { describeStacking } from './text';

/** The older instance a group's toast tells: the newest stale one, else the newest older one. */
export function toldInstance(group: IStackedGroup): IModelInfo {
  const stale = group.older.filter(m => m.stale);
  return stale.length
    ? stale[stale.length - 1]
    : group.older[group.older.length - 1];
}

/** The stacked-model rule. */
export function stackedRule({ trans, actions }: IRuleContext): IToastRule {
  const check = (
    model: GpuKernelModel,
    inventory: IInventory,
    settings: IGpuSettings
  ): RuleResult => {
    const min = Math.max(0, settings.toastMinMiB) * 2 ** 20;
    const groups = settings.warnOnStackedModels
      ? findStackedModels(inventory).filter(
          g => sumBytes(modelAndParts(toldInstance(g))) >= min
        )
      : [];
    if (!groups.length) {
      return [];
    }
    const kernelId = model.kernelId;
    // The newest group is told, the others counted ("+n more").
    const group = groups[groups.length - 1];
    const older = toldInstance(group);
    // the names that bind it, else the wrappers that keep it (`pipe` of `pipe.model`)
    const bound = older.stale ? [] : deletableNames(older);
    const names =
      older.stale || bound.length ? bound : wrapperNames(older, inventory);
    return [
      {
        key: '',
        type: older.stale ? 'warning' : 'info',
        message: describeStacking(group, trans, groups.length - 1, older),
        // Which instances stack: a new cell with the same ones changes nothing.
        signature: `${stackingSignature(groups)}:${older.stale}`,
        // A stale instance (the warning) stays until the user closes it or the
        // stacking ends (issue 29): it is why the GPU fills. Two named ones
        // (an info) close themselves like the other state toasts.
        autoClose: older.stale ? false : STATE_TOAST_AUTO_CLOSE,
        actions: [
          ...(older.stale
            ? cleanLeaves(older, inventory).length
              ? [actions.restartKernel(kernelId), actions.openPanel()]
              : [actions.cleanGpu(kernelId), actions.restartKernel(kernelId)]
            : names.length
              ? [actions.deleteModel(kernelId, older.id, names)]
              : [actions.openPanel('accent')]),
          actions.dontWarnAgain(
            'warnOnStackedModels',
            trans.__('Turn off stacked-model warnings in the settings')
          )
        ]
      }
    ];
  };
  return {
    id: 'stacked',
    policy: 'update',
    describes: 'state',
    onInventory: check,
    // Turning the setting off (or on) applies to the toast now.
    onSettings: (model, settings) =>
      model.inventory ? check(model, model.inventory, settings) : null
  };
}
