/**
 * Stacked models: one warning per kernel while instances of the same model
 * kind stack up (a re-run cell, a second model still alive), updated in
 * place when the set of stacked instances changes and dismissed when none
 * is left. Setting: `warnOnStackedModels`.
 */
import { findStackedModels, stackingSignature } from '../analysis/stacking';
import type { GpuKernelModel } from '../model';
import type { IInventory } from '../protocol';
import type { IGpuSettings } from '../tokens';
import type { IRuleContext, IToastRule, RuleResult } from './rule';
import { describeStacking } from './text';

/** The stacked-model rule: Clean GPU, Restart kernel, Don't warn again. */
export function stackedRule({ trans, actions }: IRuleContext): IToastRule {
  const check = (
    model: GpuKernelModel,
    inventory: IInventory,
    settings: IGpuSettings
  ): RuleResult => {
    const groups = settings.warnOnStackedModels
      ? findStackedModels(inventory)
      : [];
    if (!groups.length) {
      return [];
    }
    const kernelId = model.kernelId;
    return [
      {
        key: '',
        type: 'warning',
        // The newest group is told, the others counted ("+n more").
        message: describeStacking(
          groups[groups.length - 1],
          trans,
          groups.length - 1
        ),
        // Which instances stack: a new cell with the same ones changes nothing.
        signature: stackingSignature(groups),
        autoClose: false,
        actions: [
          actions.cleanGpu(kernelId),
          actions.restartKernel(kernelId),
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
